// dllmq bench: end-to-end generate for each cache mode on one model, side by side in one run.
// Reports tokens/s, NFE and model FLOPs per mode, and the speedup of each cached mode over
// `none` against its FLOP-count ratio (efficiency = speedup / FLOP ratio).
#include <cstdio>
#include <random>
#include <sstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/generate_flags.h"
#include "decode/generate.h"
#include "util/error.h"

namespace dllmq::cli {

namespace {

struct BenchArgs {
  std::string model;
  int prompt_length = 256;
  std::string modes = "none,prefix,dual";
  int repeat = 1;
  bool json = false;
  GenerateFlags gen;
};

void run_bench(const BenchArgs& a) {
  apply_threads(a.gen.threads);
  const std::string dir = a.model.empty() ? default_model_dir() : a.model;
  auto model = Model::load(dir);
  const ModelConfig& cfg = model->config();
  if (a.prompt_length <= 0) fail("--prompt-length must be positive, got {}", a.prompt_length);
  if (a.repeat <= 0) fail("--repeat must be positive, got {}", a.repeat);
  // Random prompt ids (seeded), never the mask, EOS or EoT ids.
  std::mt19937 g(1234);
  std::vector<int32_t> prompt(a.prompt_length);
  for (auto& t : prompt) {
    do t = static_cast<int32_t>(g() % cfg.vocab_size);
    while (t == cfg.mask_id || t == cfg.eos_id || t == cfg.eot_id);
  }
  std::vector<std::string> modes;
  std::stringstream ss(a.modes);
  for (std::string m; std::getline(ss, m, ',');) {
    parse_cache_mode(m);
    modes.push_back(m);
  }
  nlohmann::json rows = nlohmann::json::array();
  double base_time = 0.0, base_flops = 0.0;
  const GenerateOptions base = resolve_generate_flags(a.gen, dir);  // reads generation_config once
  fmt::print(stderr, "dllmq bench: {} | prompt {} | {}\n", dir, a.prompt_length,
             describe(base, cfg));
  for (const std::string& mode : modes) {
    GenerateOptions opt = base;
    opt.cache = parse_cache_mode(mode);
    GenerateResult best;
    for (int r = 0; r < a.repeat; ++r) {
      GenerateResult res = generate(*model, prompt, opt);
      if (r == 0 || res.time_s < best.time_s) best = res;
    }
    if (mode == "none" || base_time == 0.0) {
      base_time = best.time_s;
      base_flops = best.flops;
    }
    const double speedup = base_time / best.time_s, flop_ratio = base_flops / best.flops;
    nlohmann::json row = {{"cache", mode},
                          {"nfe", best.nfe},
                          {"time_s", best.time_s},
                          {"tokens_per_s", best.tokens.size() / best.time_s},
                          {"gflop", best.flops * 1e-9},
                          {"gflop_per_s", best.flops * 1e-9 / best.time_s},
                          {"speedup_vs_first", speedup},
                          {"flop_ratio_vs_first", flop_ratio},
                          {"efficiency", speedup / flop_ratio},
                          {"kv_bytes", best.kv_bytes},
                          {"kv_bytes_fp16", best.kv_bytes_fp16},
                          {"kv_store", best.kv_store},
                          {"kv_bits_effective_k", best.kv_bits_effective_k()},
                          {"kv_bits_effective_v", best.kv_bits_effective_v()}};
    rows.push_back(row);
    fmt::print(stderr,
               "  {:<7} NFE {:>4}  {:>8.2f} s  {:>8.2f} tok/s  {:>9.1f} GFLOP  {:>7.1f} GFLOP/s  "
               "speedup {:>5.2f}x  "
               "FLOP ratio {:>5.2f}x  efficiency {:>4.0f}%  KV {} {} B ({:.2f}/{:.2f} bits K/V)\n",
               mode, best.nfe, best.time_s, best.tokens.size() / best.time_s, best.flops * 1e-9,
               best.flops * 1e-9 / best.time_s, speedup, flop_ratio, 100.0 * speedup / flop_ratio,
               best.kv_store, best.kv_bytes, best.kv_bits_effective_k(),
               best.kv_bits_effective_v());
  }
  nlohmann::json out = {{"model", dir},
                        {"prompt_length", a.prompt_length},
                        {"modes", rows},
                        {"peak_rss_bytes", peak_rss_bytes()}};
  fmt::print(stderr, "  peak RSS {:.1f} MiB\n", peak_rss_bytes() / 1048576.0);
  if (a.json) std::puts(out.dump().c_str());
}

}  // namespace

void register_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Time generate under each cache mode, side by side");
  auto a = std::make_shared<BenchArgs>();
  cmd->add_option("-m,--model", a->model, "model directory (default: the embedded model)");
  cmd->add_option("--prompt-length", a->prompt_length, "random prompt tokens")
      ->capture_default_str();
  cmd->add_option("--modes", a->modes, "comma-separated cache modes; the first is the baseline")
      ->capture_default_str();
  cmd->add_option("--repeat", a->repeat, "runs per mode (the fastest is reported)")
      ->capture_default_str();
  cmd->add_flag("--json", a->json, "print one JSON object");
  add_generate_flags(cmd, a->gen);
  cmd->callback([a] { run_bench(*a); });
}

}  // namespace dllmq::cli
