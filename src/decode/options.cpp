#include "decode/options.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "util/error.h"

namespace dllmq {

CacheMode parse_cache_mode(const std::string& s) {
  if (s == "none") return CacheMode::kNone;
  if (s == "prefix") return CacheMode::kPrefix;
  if (s == "dual") return CacheMode::kDual;
  fail("--cache: unknown mode '{}' (expected none, prefix or dual)", s);
}

RankAlg parse_rank_alg(const std::string& s) {
  if (s == "low_confidence") return RankAlg::kLowConfidence;
  if (s == "random") return RankAlg::kRandom;
  if (s == "maskgit_plus") return RankAlg::kMaskgitPlus;
  if (s == "topk_margin") return RankAlg::kTopkMargin;
  if (s == "entropy") return RankAlg::kEntropy;
  if (s == "origin") return RankAlg::kOrigin;
  fail(
      "--alg: unknown algorithm '{}' (expected low_confidence, random, maskgit_plus, topk_margin, "
      "entropy or origin)",
      s);
}

const char* cache_mode_name(CacheMode m) {
  return m == CacheMode::kNone ? "none" : m == CacheMode::kPrefix ? "prefix" : "dual";
}

const char* rank_alg_name(RankAlg a) {
  switch (a) {
    case RankAlg::kLowConfidence:
      return "low_confidence";
    case RankAlg::kRandom:
      return "random";
    case RankAlg::kMaskgitPlus:
      return "maskgit_plus";
    case RankAlg::kTopkMargin:
      return "topk_margin";
    case RankAlg::kEntropy:
      return "entropy";
    case RankAlg::kOrigin:
      return "origin";
  }
  return "?";
}

// The ranking a sampler uses: --alg or the architecture's default; Dream's low_confidence is its
// maskgit_plus (the same rule: max probability).
RankAlg resolved_alg(const GenerateOptions& opt, Arch arch) {
  const bool llada = arch == Arch::kLLaDA;
  RankAlg a = opt.alg.value_or(llada ? RankAlg::kLowConfidence : RankAlg::kEntropy);
  if (llada && a != RankAlg::kLowConfidence && a != RankAlg::kRandom)
    fail("--alg {}: LLaDA's sampler ranks by low_confidence or random", rank_alg_name(a));
  if (!llada && a == RankAlg::kRandom)
    fail("--alg random: Dream's sampler has no random ranking (use origin)");
  if (!llada && a == RankAlg::kLowConfidence) a = RankAlg::kMaskgitPlus;
  return a;
}

bool uses_block_driver(const GenerateOptions& opt, Arch arch) {
  return !(arch == Arch::kDream && opt.cache == CacheMode::kNone);
}

namespace {

// The options' numbers, for callers that do not come through the command line's range checks
// (cli/flag_ranges.cpp). Written as "!(inside)" so that NaN, for which every comparison is
// false, is refused too.
void validate_options(const GenerateOptions& o) {
  auto real = [](const char* flag, double v, double lo, double hi, bool lo_open, bool hi_open) {
    const bool ok =
        std::isfinite(v) && (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
    if (!ok)
      fail("{} must be a finite number in {}{}, {}{}, got {}", flag, lo_open ? "(" : "[", lo,
           std::isinf(hi) ? "inf" : fmt::format("{}", hi), hi_open ? ")" : "]", v);
  };
  if (o.gen_length <= 0 || o.gen_length > (1 << 24))
    fail("--gen-length must be in [1, {}], got {}", 1 << 24, o.gen_length);
  if (o.block_length <= 0) fail("--block-length must be positive, got {}", o.block_length);
  if (o.steps <= 0) fail("--steps must be positive, got {}", o.steps);
  if (o.threshold && o.factor) fail("--threshold and --factor are exclusive; give one");
  if (o.threshold) real("--threshold", *o.threshold, 0, 1, true, false);
  // Bounds that hold where the values are used, not only as doubles (the command line's
  // ranges, cli/flag_ranges.cpp, are the same):
  // - temperature and alg-temp divide float logits / [0, 1] confidences in double: 0 (greedy)
  //   or at least 1e-6 keeps every quotient finite (|logit| < 3.4e38); at most 1e6.
  // - cfg-scale: logits = un + (s + 1)(cond - un) in float; s = 1e300 was inf as a float and
  //   every logit non-finite. Guidance scales in use are 0..10; 1000 keeps the product finite
  //   for logit differences up to 3e35.
  // - eps: Dream's last timestep, divided by; at least 1e-12 (the reference uses 1e-3).
  // - factor: 1 - factor / (k + 2) in double; at most 1e6.
  auto scale = [&](const char* flag, double v) {
    if (!(v == 0.0 || (v >= 1e-6 && v <= 1e6)))
      fail("{} must be 0 or a finite number in [1e-06, 1e+06], got {}", flag, v);
  };
  if (o.factor) real("--factor", *o.factor, 0, 1e6, true, false);
  scale("--temperature", o.temperature);
  real("--top-p", o.top_p, 0, 1, true, false);
  if (o.top_k < 0) fail("--top-k must be >= 0, got {}", o.top_k);
  scale("--alg-temp", o.alg_temp);
  real("--eps", o.eps, 1e-12, 1, false, true);
  real("--cfg-scale", o.cfg_scale, 0, 1000, false, false);
}

}  // namespace

void check_generate_options(const GenerateOptions& opt, const ModelConfig& cfg,
                            std::span<const int32_t> prompt) {
  validate_options(opt);
  const int vocab = cfg.vocab_size;
  for (size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] < 0 || prompt[i] >= vocab)
      fail("prompt token id {} at index {} outside the vocabulary [0, {})", prompt[i], i, vocab);
  (void)resolved_alg(opt, cfg.arch);
  const bool dream = cfg.arch == Arch::kDream;
  if (dream && prompt.empty())
    fail("Dream needs a non-empty prompt (its logits are shifted by one position)");
  if (uses_block_driver(opt, cfg.arch)) {
    const int G = opt.gen_length, B = opt.block_length;
    if (B <= 0 || G % B != 0) fail("--gen-length {} is not a multiple of --block-length {}", G, B);
    if (opt.steps <= 0 || opt.steps % (G / B) != 0)
      fail(
          "--steps {} is not a multiple of the number of blocks {} (= gen length {} / block length "
          "{})",
          opt.steps, G / B, G, B);
    if (opt.cfg_scale > 0 && opt.cache != CacheMode::kNone)
      fail("--cfg-scale is defined for --cache none only (LLaDA's generate)");
  } else if (opt.threshold || opt.factor) {
    if (opt.steps <= 0 || opt.gen_length % opt.steps != 0)
      fail("--steps {} must divide --gen-length {} for Dream's global threshold decoding",
           opt.steps, opt.gen_length);
  } else if (opt.steps <= 0) {
    fail("--steps must be positive, got {}", opt.steps);
  }
}

}  // namespace dllmq
