// Batched decoding in process, without HTTP: N prompts decoded one at a time, then together
// (generate_batched) with per-canvas and with stacked GEMMs, side by side in one run. Prints wall
// and process CPU seconds, tokens per second of each, the ratios to one-at-a-time, and checks that
// every batched result equals its one-at-a-time tokens; then where the forwards' time went
// (projections, attention, LM head, the rest: wall seconds, cores busy, GFLOP/s).
//
//   build/bench/batch_decode_bench [-m MODEL] [--batch 16] [--prompt-length 32] [--gen-length 48]
//       [--block-length 16] [--cache dual] [--threshold 0.9] [--rounds 2] [--dtype fp32]
//       [--prompts IDS.txt]
//
// Prompts: random ids of --prompt-length (+0..4) by default; --prompts takes one prompt a line as
// comma-separated ids, e.g. the server load test's chat prompts:
//   for q in ...; do build/dllmq tokenize --chat --ids-only --text "$q"; done > IDS.txt
// Threads: OMP_NUM_THREADS as usual; set OMP_WAIT_POLICY=passive GOMP_SPINCOUNT=10000 as dllmq
// commands run (cli/openmp_policy.cpp). CPU seconds are what a busy machine does not distort; on
// an idle one wall time shows what the threads add.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "decode/batch.h"
#include "decode/generate.h"
#include "model/model.h"
#include "ops/gemm.h"

using namespace dllmq;

namespace {

double cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double wall_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Run {
  double wall = 1e300, cpu = 1e300;  // best of the rounds
  bool exact = true;
  ForwardProfile profile;  // the model's phases in the best round
};

// Runs `f` as one round of `run`, keeping the model's phase profile of the best round.
template <typename F>
void time_round(Model& m, Run& run, F&& f) {
  m.reset_profile();
  const double c0 = cpu_s(), w0 = wall_s();
  f();
  const double w = wall_s() - w0;
  if (w < run.wall) run.profile = m.profile();
  run.wall = std::min(run.wall, w);
  run.cpu = std::min(run.cpu, cpu_s() - c0);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = DLLMQ_SOURCE_DIR "/models/dllmq-synth-tiny", cache = "dual", dtype = "fp32";
  std::string prompt_file;
  int batch = 16, prompt_len = 32, gen = 48, block = 16, rounds = 2;
  double threshold = 0.9;
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "-h" || k == "--help") {
      std::printf(
          "build/bench/batch_decode_bench [-m MODEL] [--batch 16] [--prompt-length 32] "
          "[--gen-length 48]\n    [--block-length 16] [--cache dual] [--threshold 0.9] "
          "[--rounds 2] [--dtype fp32]\n    [--prompts IDS.txt (one prompt a line, comma-separated "
          "ids, e.g. from dllmq tokenize --chat --ids-only)]\n");
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "option %s needs a value (--help lists them)\n", k.c_str());
      return 1;
    }
    const std::string v = argv[i + 1];
    if (k == "-m")
      model = v;
    else if (k == "--batch")
      batch = std::atoi(v.c_str());
    else if (k == "--prompt-length")
      prompt_len = std::atoi(v.c_str());
    else if (k == "--gen-length")
      gen = std::atoi(v.c_str());
    else if (k == "--block-length")
      block = std::atoi(v.c_str());
    else if (k == "--cache")
      cache = v;
    else if (k == "--threshold")
      threshold = std::atof(v.c_str());
    else if (k == "--rounds")
      rounds = std::atoi(v.c_str());
    else if (k == "--dtype")
      dtype = v;
    else if (k == "--prompts")
      prompt_file = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 1;
    }
  }
  if (batch < 1 || prompt_len < 1 || gen < 1 || block < 1 || rounds < 1 ||
      !(threshold >= 0.0 && threshold <= 1.0)) {
    std::fprintf(stderr,
                 "--batch, --prompt-length, --gen-length, --block-length and --rounds must be "
                 ">= 1, --threshold in [0, 1]\n");
    return 1;
  }
  auto m = Model::load(model);
  m->set_compute_dtype(parse_compute_dtype(dtype));
  const int vocab = m->config().vocab_size;
  std::mt19937 rng(7);
  std::vector<std::vector<int32_t>> prompts(batch);
  if (prompt_file.empty()) {
    for (int i = 0; i < batch; ++i) {
      prompts[i].resize(prompt_len + i % 5);  // different lengths
      for (int32_t& t : prompts[i]) t = static_cast<int32_t>(rng() % std::min(vocab - 16, 500));
    }
  } else {  // the first `batch` lines of the file
    std::ifstream in(prompt_file);
    std::string line;
    for (int i = 0; i < batch && std::getline(in, line); ++i) {
      std::stringstream ss(line);
      for (std::string id; std::getline(ss, id, ',');) prompts[i].push_back(std::stoi(id));
    }
    for (int i = 0; i < batch; ++i)
      if (prompts[i].empty()) {
        std::fprintf(stderr, "%s: fewer than %d prompts\n", prompt_file.c_str(), batch);
        return 1;
      }
  }
  GenerateOptions o;
  o.gen_length = gen;
  o.block_length = block;
  o.steps = gen;
  o.cache = parse_cache_mode(cache);
  if (threshold > 0) o.threshold = threshold;

  std::vector<std::vector<int32_t>> reference(batch);
  Run one, per_canvas, stacked;
  const bool stack_ok = [&] {
    m->set_batch_gemm(BatchGemm::kAuto);
    return m->batch_gemm() == BatchGemm::kStacked;
  }();
  for (int r = 0; r < rounds; ++r) {
    time_round(*m, one, [&] {
      for (int i = 0; i < batch; ++i) reference[i] = generate(*m, prompts[i], o).tokens;
    });
    for (BatchGemm mode : {BatchGemm::kPerCanvas, BatchGemm::kStacked}) {
      Run& run = mode == BatchGemm::kPerCanvas ? per_canvas : stacked;
      m->set_batch_gemm(mode);
      std::vector<BatchJob> jobs;
      for (int i = 0; i < batch; ++i) jobs.push_back({prompts[i], o, nullptr});
      std::vector<BatchOutcome> out;
      time_round(*m, run, [&] { out = generate_batched(*m, jobs); });
      for (int i = 0; i < batch; ++i)
        run.exact &= !out[i].error && out[i].result.tokens == reference[i];
    }
  }
  const double tokens = double(batch) * gen;
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) < 0) load[0] = -1;
  std::printf(
      "%s | %s, %d threads | batch %d, prompt %d+, gen %d, block %d, cache %s, threshold %g, %s\n",
      model.c_str(), gemm_info().name.c_str(), gemm_threads(), batch, prompt_len, gen, block,
      cache.c_str(), threshold, dtype.c_str());
  std::printf(
      "| | wall s | CPU s | tokens/s | tokens per CPU s | vs one at a time (wall, CPU) | tokens = "
      "one at a time |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  auto row = [&](const char* name, const Run& r, bool check) {
    std::printf("| %s | %.3f | %.3f | %.1f | %.1f | %.2fx, %.2fx | %s |\n", name, r.wall, r.cpu,
                tokens / r.wall, tokens / r.cpu, one.wall / r.wall, one.cpu / r.cpu,
                check ? (r.exact ? "yes" : "NO") : "-");
  };
  row("one at a time", one, false);
  row("batched, per-canvas GEMMs", per_canvas, true);
  row(stack_ok ? "batched, stacked GEMMs" : "batched, stacked GEMMs (check FAILED: not exact here)",
      stacked, true);
  std::printf("best of %d rounds; load average %.2f\n", rounds, load[0]);
  // Where the forwards' time goes: wall seconds per phase, and the cores busy in it (process CPU
  // seconds / wall seconds, so sampling threads running beside a forward count too).
  std::printf(
      "\n| phases: wall s (cores busy, GFLOP/s of wall) | forwards | projections | attention | LM "
      "head | other |\n");
  std::printf("|---|---|---|---|---|---|\n");
  auto phases = [&](const char* name, const Run& r) {
    const ForwardProfile& p = r.profile;
    auto cell = [](const PhaseStat& s) {
      char b[64];
      std::snprintf(b, sizeof b, "%.3f (%.2f, %.0f GFLOP/s)", s.wall_s,
                    s.wall_s > 0 ? s.cpu_s / s.wall_s : 0.0,
                    s.wall_s > 0 ? s.flops / s.wall_s * 1e-9 : 0.0);
      return std::string(b);
    };
    std::printf("| %s | %lld | %s | %s | %s | %s |\n", name, static_cast<long long>(p.forwards),
                cell(p.proj).c_str(), cell(p.attn).c_str(), cell(p.head).c_str(),
                cell(p.other).c_str());
  };
  phases("one at a time", one);
  phases("batched, per-canvas GEMMs", per_canvas);
  phases("batched, stacked GEMMs", stacked);
  return per_canvas.exact && (stacked.exact || !stack_ok) ? 0 : 1;
}
