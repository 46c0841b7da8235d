// dllmq bench: end-to-end generate for each cache mode on one model, side by side in one run.
// Reports tokens/s, NFE and model FLOPs per mode, and the speedup of each cached mode over
// `none` against its FLOP-count ratio (efficiency = speedup / FLOP ratio), and a roofline table
// per phase (projections, attention, LM head, sampling): wall and CPU seconds, cores busy,
// achieved GFLOP/s and GB/s against the GEMM backend's and the memory's ceilings measured in the
// same run, and the efficiency that reading the weights once per forward allows each mode.
#include <time.h>

#include <cstdio>
#include <random>
#include <sstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/model_names.h"
#include "cli/openmp_policy.h"
#include "cli/settings_names.h"
#include "decode/generate.h"
#include "model/projections.h"
#include "ops/gemm.h"
#include "ops/gemm_peak.h"
#include "ops/packed_gemm.h"
#include "util/error.h"
#include "util/memory.h"
#include "util/team_cpu_clock.h"

namespace dllmq::cli {

namespace {

double process_cpu_s() {
  return clock_s(CLOCK_PROCESS_CPUTIME_ID);
}

struct Peaks {
  double gemm_large = 0.0;  // GFLOP/s of the projection path at [512, d] x [d, d]^T
  double gemm_small = 0.0;  // ... at [32, d] x [d, d]^T (the dual-cache step's rows)
  double fma_core = 0.0;    // one core's f32 FMA peak on the projections' vectors (0: scalar)
  double read_gbps = 0.0;   // a parallel read of the projections (MoE experts too) and LM head
  double read_bytes = 0.0;
};

Peaks measure_peaks(const Model& m) {
  const ModelConfig& c = m.config();
  // The LM head's dtype (a quantized checkpoint keeps it in floats unless GPTQ's lm_head flag).
  const Linear& head = m.weights().lm_head;
  const DType wd = head.w != nullptr ? head.w->dtype : m.weights().dtype;
  Peaks p;
  p.gemm_large = measure_linear_gflops(512, c.d_model, c.d_model, wd, m.compute_dtype());
  p.gemm_small = measure_linear_gflops(32, c.d_model, c.d_model, wd, m.compute_dtype());
  // The read bandwidth over the model's own weights: the bytes a step streams, from the level of
  // the memory that holds them. (A 64 MiB buffer of its own was read from L3 on a VM whose L3
  // share is smaller than the benchmark models' weights, at twice the rate those stream from DRAM.)
  std::vector<ByteRange> ranges;
  for_each_projection(m.weights(), [&](const Linear& l) { append_weight_range(l, ranges); });
  append_weight_range(head, ranges);
  for (const ByteRange& r : ranges) p.read_bytes += double(r.bytes);
  p.read_gbps = measure_read_gbps(ranges);
  p.fma_core = measure_fma_peak_gflops(dispatch_isa());
  return p;
}

std::string describe_backend() {
  const GemmInfo& g = gemm_info();
  return fmt::format(
      "projections on packed {} kernels ({}); {} (kernels {}, CPU {}{}), {} threads (OpenMP wait: "
      "{}), bf16 products {}; {}",
      g.proj_isa, g.proj_why, g.name, g.isa, g.cpu_isa, g.generic ? ", GENERIC" : "",
      gemm_threads(), openmp_wait_description(), g.bf16_why, g.why);
}

// One row of the roofline table: against the large-M GEMM peak and the read bandwidth.
nlohmann::json phase_row(const char* name, const PhaseStat& s, const Peaks& pk) {
  const double gf = s.wall_s > 0 ? s.flops * 1e-9 / s.wall_s : 0.0;
  const double gb = s.wall_s > 0 ? s.bytes * 1e-9 / s.wall_s : 0.0;
  fmt::print(stderr,
             "    {:<11} {:>8.3f} {:>8.3f} {:>6.2f} {:>9.1f} {:>8.1f} {:>6.0f}% {:>8.2f} {:>7.1f} "
             "{:>6.0f}%\n",
             name, s.wall_s, s.cpu_s, s.wall_s > 0 ? s.cpu_s / s.wall_s : 0.0, s.flops * 1e-9, gf,
             100.0 * gf / pk.gemm_large, s.bytes * 1e-9, gb, 100.0 * gb / pk.read_gbps);
  return {{"phase", name},           {"wall_s", s.wall_s}, {"cpu_s", s.cpu_s},
          {"gflop", s.flops * 1e-9}, {"gflop_per_s", gf},  {"gb", s.bytes * 1e-9},
          {"gb_per_s", gb}};
}

nlohmann::json roofline(const ForwardProfile& pf, double total_wall, double total_cpu, size_t vocab,
                        const Peaks& pk) {
  fmt::print(stderr, "    {:<11} {:>8} {:>8} {:>6} {:>9} {:>8} {:>7} {:>8} {:>7} {:>7}\n", "phase",
             "wall s", "CPU s", "cores", "GFLOP", "GFLOP/s", "%gemm", "GB", "GB/s", "%BW");
  // Sampling: everything of the generate call outside the forwards (softmax / confidence /
  // ranking over the logits rows, bookkeeping); it must read every logits row once.
  PhaseStat sampling;
  sampling.wall_s = std::max(0.0, total_wall - pf.wall_s());
  sampling.cpu_s = std::max(0.0, total_cpu - pf.cpu_s());
  sampling.bytes = 4.0 * double(pf.logit_rows) * double(vocab);
  PhaseStat all;
  all.wall_s = total_wall;
  all.cpu_s = total_cpu;
  all.flops = pf.proj.flops + pf.attn.flops + pf.head.flops;
  all.bytes = pf.proj.bytes + pf.attn.bytes + pf.head.bytes + sampling.bytes;
  nlohmann::json rows = nlohmann::json::array();
  rows.push_back(phase_row("projections", pf.proj, pk));
  rows.push_back(phase_row("attention", pf.attn, pk));
  rows.push_back(phase_row("lm_head", pf.head, pk));
  rows.push_back(phase_row("sampling", sampling, pk));
  rows.push_back(phase_row("other", pf.other, pk));
  rows.push_back(phase_row("total", all, pk));
  return rows;
}

// What reading the weights bounds: a forward streams every projection and the LM head once
// (from DRAM where they outgrow the cache), so no mode runs faster than its forwards' weight
// bytes at the measured read rate. The FLOP-count ideal (the baseline's time over the FLOP
// ratio) assumes the mode's products run as fast as the baseline's; where the weight floor lies
// above it (few rows per forward: the dual cache's 32), the efficiency the memory allows is
// ideal / floor, below 100% on any implementation.
nlohmann::json weight_read_bound(int64_t forwards, double ideal_s, const Peaks& pk) {
  const double gb = double(forwards) * pk.read_bytes * 1e-9;
  const double floor_s = pk.read_gbps > 0 ? gb / pk.read_gbps : 0.0;
  const double bound = floor_s > ideal_s ? ideal_s / floor_s : 1.0;
  fmt::print(stderr,
             "    bound: every weight read once per forward, {:.2f} GB at {:.1f} GB/s = {:.3f} s; "
             "FLOP-count ideal {:.3f} s; efficiency the reads allow {:.0f}%\n",
             gb, pk.read_gbps, floor_s, ideal_s, 100.0 * bound);
  return {{"weight_read_gb", gb},
          {"weight_read_floor_s", floor_s},
          {"flop_ideal_s", ideal_s},
          {"efficiency_bound", bound}};
}

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
  auto model = Model::load(dir, resolve_compute_dtype(a.gen));  // packed once, for its kernels
  apply_compute_flags(a.gen, *model);
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
  fmt::print(stderr, "dllmq bench: {} | prompt {} | dtype {} | {}{}\n", dir, a.prompt_length,
             compute_dtype_name(model->compute_dtype()), describe(base, cfg),
             describe_w8a8(*model));
  fmt::print(stderr, "  gemm: {}\n", describe_backend());
  const Peaks pk = measure_peaks(*model);
  fmt::print(stderr,
             "  measured peaks: projection GEMM {:.1f} GFLOP/s at 512x{}x{}, {:.1f} at 32x{}x{}; "
             "reading the weights ({}) {:.1f} GB/s; one core's FMA peak {:.1f} GFLOP/s\n",
             pk.gemm_large, cfg.d_model, cfg.d_model, pk.gemm_small, cfg.d_model, cfg.d_model,
             format_bytes(pk.read_bytes), pk.read_gbps, pk.fma_core);
  for (const std::string& mode : modes) {
    GenerateOptions opt = base;
    opt.cache = parse_cache_mode(mode);
    GenerateResult best;
    ForwardProfile best_pf;
    double best_cpu = 0.0;
    for (int r = 0; r < a.repeat; ++r) {
      model->reset_profile();
      const double cpu0 = process_cpu_s();
      GenerateResult res = generate(*model, prompt, opt);
      const double cpu = process_cpu_s() - cpu0;
      if (r == 0 || res.time_s < best.time_s) {
        best = res;
        best_pf = model->profile();
        best_cpu = cpu;
      }
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
                          {"kv_bits_effective_v", best.kv_bits_effective_v()},
                          {"cpu_s", best_cpu},
                          {"cores_busy", best_cpu / best.time_s}};
    fmt::print(stderr,
               "  {:<7} NFE {:>4}  {:>8.2f} s  {:>8.2f} tok/s  {:>9.1f} GFLOP  {:>7.1f} GFLOP/s  "
               "speedup {:>5.2f}x  "
               "FLOP ratio {:>5.2f}x  efficiency {:>4.0f}%  KV {} {} B ({:.2f}/{:.2f} bits K/V)\n",
               mode, best.nfe, best.time_s, best.tokens.size() / best.time_s, best.flops * 1e-9,
               best.flops * 1e-9 / best.time_s, speedup, flop_ratio, 100.0 * speedup / flop_ratio,
               best.kv_store, best.kv_bytes, best.kv_bits_effective_k(),
               best.kv_bits_effective_v());
    row["phases"] = roofline(best_pf, best.time_s, best_cpu, size_t(cfg.vocab_size), pk);
    // A MoE forward reads only its rows' experts, so the bytes of every expert are no floor.
    if (!cfg.moe.enabled())
      row.update(weight_read_bound(best_pf.forwards, base_time / flop_ratio, pk));
    rows.push_back(row);
  }
  const GemmInfo& gi = gemm_info();
  nlohmann::json out = {{"model", dir},
                        {"prompt_length", a.prompt_length},
                        {"dtype", compute_dtype_name(model->compute_dtype())},
                        {"gemm_backend", gi.name},
                        {"gemm_isa", gi.isa},
                        {"proj_kernels", std::string("packed ") + gi.proj_isa},
                        {"cpu_isa", gi.cpu_isa},
                        {"gemm_generic", gi.generic},
                        {"bf16_native", gi.bf16_native},
                        {"bf16_dot", gi.bf16_dot},
                        {"bf16_amx", gi.bf16_amx},
                        {"bf16_why", gi.bf16_why},
                        {"threads", gemm_threads()},
                        {"openmp_wait", openmp_wait_description()},
                        {"peak_gemm_gflops_512", pk.gemm_large},
                        {"peak_gemm_gflops_32", pk.gemm_small},
                        {"peak_fma_gflops_core", pk.fma_core},
                        {"peak_read_gbps", pk.read_gbps},
                        {"peak_read_bytes", pk.read_bytes},
                        {"modes", rows},
                        {"peak_rss_bytes", peak_rss_bytes()}};
  out.update(model_weight_facts(*model));
  fmt::print(stderr, "  peak RSS {:.1f} MiB\n", peak_rss_bytes() / 1048576.0);
  if (a.json) std::puts(out.dump().c_str());
}

}  // namespace

void register_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Time generate under each cache mode, side by side");
  auto a = std::make_shared<BenchArgs>();
  cmd->add_option("-m,--model", a->model,
                  "model directory or short name (" + embedded_model_names() +
                      "; default: the embedded model)")
      ->transform(model_name_transform());
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
