#include "settings/generate_flags.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <fmt/core.h>

#include "io/generation_config.h"
#include "quant/uniform.h"
#include "util/error.h"

namespace dllmq::settings {

void add_generate_flags(CLI::App* cmd, GenerateFlags& f) {
  cmd->add_option("--gen-length", f.gen_length,
                  "tokens to generate (default: the model's generation_config.json "
                  "max_new_tokens, else 256)");
  cmd->add_option("--block-length", f.block_length,
                  "semi-autoregressive block length (default: the model's block_length, else "
                  "min(32, gen length))");
  cmd->add_option("--steps", f.steps, "total reveal steps over all blocks (default: gen length)");
  cmd->add_option("--threshold", f.threshold,
                  "Fast-dLLM confidence threshold tau (parallel decoding)");
  cmd->add_option("--factor", f.factor, "Fast-dLLM factor f (parallel decoding)");
  cmd->add_option("--cache", f.cache, "KV reuse: none | prefix | dual")->capture_default_str();
  cmd->add_option(
      "--alg", f.alg,
      "ranking: low_confidence (LLaDA default), random, entropy (Dream default), maskgit_plus, "
      "topk_margin, origin");
  cmd->add_option("--temperature", f.temperature, "sampling temperature (0 = greedy)")
      ->capture_default_str();
  cmd->add_option("--top-p", f.top_p, "Dream: nucleus filter")->capture_default_str();
  cmd->add_option("--top-k", f.top_k, "Dream: top-k filter (0 = off)")->capture_default_str();
  cmd->add_option("--alg-temp", f.alg_temp, "Dream: temperature over confidences when choosing")
      ->capture_default_str();
  cmd->add_option("--eps", f.eps, "Dream: end of the timestep schedule")->capture_default_str();
  cmd->add_option("--cfg-scale", f.cfg_scale, "LLaDA classifier-free guidance scale")
      ->capture_default_str();
  cmd->add_flag("--logits-eos-inf", f.logits_eos_inf, "never propose EOS");
  cmd->add_flag("--confidence-eos-eot-inf", f.confidence_eos_eot_inf,
                "EOS/EoT proposals get zero confidence");
  cmd->add_flag("--early-stop", f.early_stop,
                "stop once a completed block is all EOS (off: reference parity)");
  cmd->add_option("--seed", f.seed, "seed for every stochastic path")->capture_default_str();
  cmd->add_option("--dtype", f.dtype,
                  "compute precision of the projections and LM head: fp32 (exact; bf16 weights "
                  "are widened losslessly) | bf16 (bf16 inputs, fp32 accumulation: the released "
                  "models' numerics); norms, softmax, RoPE and attention are fp32 in both")
      ->capture_default_str();
  cmd->add_flag("--w8a8", f.w8a8,
                "weight-quantized models: activations rounded per row to int8 and multiplied by "
                "the int8/int4 weight codes on the integer dot product (AVX512-VNNI; a scalar "
                "twin elsewhere), an approximation");
  cmd->add_option("--kv", f.kv,
                  "KV store: fp32 | fp16 | bf16 | kivi | kvquant | dllm-kvq (default: the compute "
                  "precision, fp32 or bf16)");
  cmd->add_option("--kv-bits", f.kv_bits,
                  "bits per cached K and V element for kivi/kvquant/dllm-kvq: 2, 3, 4 or 8 "
                  "(default: kivi/dllm-kvq 2, kvquant the artifact's)");
  cmd->add_option("--kv-bits-k", f.kv_bits_k, "bits for K only (overrides --kv-bits)");
  cmd->add_option("--kv-bits-v", f.kv_bits_v, "bits for V only (overrides --kv-bits)");
  cmd->add_option("--kv-group", f.kv_group,
                  "kivi/dllm-kvq group size G: K per channel over G positions, V per token over "
                  "min(G, head_dim) channels")
      ->capture_default_str();
  cmd->add_option("--calib", f.calib,
                  "calibration artifact from `dllmq calibrate` (kvquant: codebooks and "
                  "thresholds; dllm-kvq: fp16 K channels)");
  cmd->add_option("--kv-channels", f.kv_channels,
                  "dllm-kvq: fp16 K channels given explicitly, layer:head:channel,...");
  cmd->add_option("--kv-base", f.kv_base,
                  "dllm-kvq: codec of the other K channels and of V: kivi (uniform groups) | "
                  "kvquant (NUQ codebooks, thresholds and outliers of --kv-base-calib)")
      ->capture_default_str();
  cmd->add_option("--kv-base-calib", f.kv_base_calib,
                  "dllm-kvq --kv-base kvquant: the KVQuant artifact (`dllmq calibrate --method "
                  "kvquant`) whose codec the base uses");
  cmd->add_option(
      "--trace-cache", f.trace_cache,
      "JSONL file: per step and layer, error of reused K/V and attention vs a full recompute");
  cmd->add_option("--threads", f.threads, "OpenMP threads (0 = all cores)")->capture_default_str();
}

GenerateOptions resolve_generate_flags(const GenerateFlags& f, const std::string& model_dir) {
  GenerateOptions o;
  GenerationDefaults d = load_generation_defaults(model_dir);
  if (f.gen_length || !d.gen_length) d = {};  // the model's lengths only travel together
  o.gen_length = f.gen_length.value_or(d.gen_length.value_or(256));
  o.block_length = f.block_length.value_or(d.block_length.value_or(std::min(32, o.gen_length)));
  o.steps = f.steps.value_or(d.steps.value_or(o.gen_length));
  o.threshold = f.threshold;
  o.factor = f.factor;
  o.cache = parse_cache_mode(f.cache);
  if (!f.alg.empty()) o.alg = parse_rank_alg(f.alg);
  o.temperature = f.temperature;
  if (f.top_p <= 0.0 || f.top_p > 1.0) fail("--top-p must be in (0, 1], got {}", f.top_p);
  if (f.top_k < 0) fail("--top-k must be >= 0, got {}", f.top_k);
  o.top_p = f.top_p;
  o.top_k = f.top_k;
  o.alg_temp = f.alg_temp;
  o.eps = f.eps;
  o.cfg_scale = f.cfg_scale;
  o.logits_eos_inf = f.logits_eos_inf;
  o.confidence_eos_eot_inf = f.confidence_eos_eot_inf;
  o.early_stop = f.early_stop;
  o.seed = f.seed;
  // The KV store follows the compute precision unless chosen: fp32 keeps the exact default.
  o.kv.method = f.kv;
  if (o.kv.method.empty())
    o.kv.method = resolve_compute_dtype(f) == ComputeDType::kBF16 ? "bf16" : "fp32";
  o.kv.bits_k = f.kv_bits_k.value_or(f.kv_bits.value_or(0));
  o.kv.bits_v = f.kv_bits_v.value_or(f.kv_bits.value_or(0));
  if (f.kv_bits && !valid_quant_bits(*f.kv_bits))
    fail("--kv-bits {}: accepted values are 2, 3, 4 and 8", *f.kv_bits);
  o.kv.group = f.kv_group;
  o.kv.calib = f.calib;
  o.kv.channels = f.kv_channels;
  o.kv.base = f.kv_base;
  o.kv.base_calib = f.kv_base_calib;
  validate_kv_spec(o.kv);
  o.trace_cache = f.trace_cache;
  if (f.threads < 0) fail("--threads must be >= 0, got {}", f.threads);
  return o;
}

ComputeDType resolve_compute_dtype(const GenerateFlags& f) {
  if (f.dtype != "fp32" && f.dtype != "bf16")
    fail("--dtype {}: accepted values are fp32 and bf16", f.dtype);
  return parse_compute_dtype(f.dtype);
}

std::string describe_w8a8(const Model& m) {
  return m.w8a8().empty() ? std::string() : " | " + m.w8a8();
}

std::string describe(const GenerateOptions& o, const ModelConfig& cfg) {
  const bool dream_canvas = cfg.arch == Arch::kDream && o.cache == CacheMode::kNone;
  std::string sched = o.threshold ? fmt::format("threshold {}", *o.threshold)
                      : o.factor  ? fmt::format("factor {}", *o.factor)
                                  : fmt::format("steps {}", o.steps);
  const char* alg = o.alg                      ? rank_alg_name(*o.alg)
                    : cfg.arch == Arch::kLLaDA ? "low_confidence"
                                               : "entropy";
  return fmt::format(
      "{} sampler: gen_length {}, {}, {}, cache {}, kv {}, alg {}, temperature {}, seed {}",
      arch_name(cfg.arch), o.gen_length,
      dream_canvas ? std::string("whole canvas (no blocks)")
                   : fmt::format("block_length {}", o.block_length),
      sched, cache_mode_name(o.cache), o.cache == CacheMode::kNone ? "-" : describe_kv(o.kv), alg,
      o.temperature, o.seed);
}

void apply_threads(int threads) {
  if (threads > 0) omp_set_num_threads(threads);
}

std::string repo_path(const std::string& rel) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  // Above the binary: the source tree (build/dllmq) or an installed prefix, where `cmake
  // --install` and the Debian package put the embedded models and helper scripts in
  // PREFIX/share/dllmq (PREFIX/bin/dllmq).
  if (!ec)
    for (fs::path p = exe.parent_path(); !p.empty() && p != p.root_path(); p = p.parent_path()) {
      if (fs::exists(p / rel)) return (p / rel).string();
      if (fs::exists(p / "share/dllmq" / rel)) return (p / "share/dllmq" / rel).string();
    }
  const fs::path src = fs::path(DLLMQ_SOURCE_DIR) / rel;
  if (fs::exists(src)) return src.string();
  return "";
}

std::string default_model_dir() {
  if (const char* env = std::getenv("DLLMQ_MODEL"); env && *env) return env;
  const char* kName = "models/dllmq-synth-tiny";
  const std::string dir = repo_path(std::string(kName) + "/config.json");
  if (dir.empty())
    fail(
        "no -m given and the embedded default model ({}) was not found; pass -m DIR or set "
        "DLLMQ_MODEL",
        kName);
  return std::filesystem::path(dir).parent_path().string();
}

}  // namespace dllmq::settings
