// The engine's products with their weights streamed from memory, as in a decode step: M rows
// through a chain of projections whose weights together are far larger than the last-level
// cache (48 weights of [4096, 1024]: 768 MiB in f32, 384 MiB in bf16), on all OpenMP threads,
// through linear() as the model calls it. packed_gemm_bench measures the kernels on weights that
// stay in cache; this one measures what a step of a real model meets, where each weight byte is
// read from DRAM once per step and serves M rows: M / 2 FLOPs per f32 byte, M per bf16 byte.
// Beside each rate: a plain parallel read of the same packed bytes in the same process
// (measure_read_gbps), and the share of it the product streams at.
// BM_WeightResident runs the same chain over one weight of [1024, 1024] used 48 times, whose
// share per thread of two stays in a 2 MiB L2 (the Xeon's; on a 1 MiB L2, Zen 4's, only the bf16
// weight's share does): the product's rate with no wait on memory. A kernel whose
// work hid wholly behind its stream would stream at min(read rate, resident rate); one whose work
// and stream take turns, at 1 / (1 / read rate + 1 / resident rate). The AMX kernel lies between
// the two, far below the first at 32 rows (docs/performance.md).
//   build/bench/weight_stream_bench --benchmark_counters_tabular=true
// Args: m, weight dtype (0 f32, 1 bf16), compute dtype (0 fp32, 1 bf16).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

#include "ops/gemm_peak.h"
#include "ops/linear.h"
#include "util/half.h"

namespace {

using namespace dllmq;

constexpr int kWeights = 48, kN = 4096, kK = 1024;

// Small normal-ish values from a cheap generator: 50 million weights from mt19937's normal
// distribution take seconds, and the values do not change the speed.
float next_value(uint64_t& s) {
  s = s * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float(uint32_t(s >> 40)) / float(1u << 24) - 0.5f) * 0.08f;
}

// The chain of kWeights products over `distinct` weights of [n, kK] (used in turn), timed.
void run_chain(benchmark::State& st, int n, int distinct) {
  const int m = int(st.range(0));
  const DType wdt = st.range(1) ? DType::kBF16 : DType::kF32;
  const ComputeDType cdt = st.range(2) ? ComputeDType::kBF16 : ComputeDType::kF32;
  const size_t per = size_t(n) * kK;
  uint64_t seed = 11;
  std::vector<float> wf;
  std::vector<uint16_t> wh;
  if (wdt == DType::kF32) {
    wf.resize(per * distinct);
    for (float& v : wf) v = next_value(seed);
  } else {
    wh.resize(per * distinct);
    for (uint16_t& v : wh) v = f32_to_bf16(next_value(seed));
  }
  std::vector<TensorView> views(distinct);
  std::vector<Linear> lin(distinct);
  for (int i = 0; i < distinct; ++i) {
    views[i].dtype = wdt;
    views[i].shape = {n, kK};
    views[i].data = wdt == DType::kF32 ? static_cast<const void*>(wf.data() + per * i)
                                       : static_cast<const void*>(wh.data() + per * i);
    views[i].nbytes = per * dtype_size(wdt);
    lin[i] = Linear{&views[i], nullptr, n, kK};
    pack_linear(lin[i], cdt);  // as a loaded model's weights are
  }
  std::vector<float> x(size_t(m) * kK), y(size_t(m) * n);
  for (float& v : x) v = next_value(seed);
  for (auto _ : st)
    for (int i = 0; i < kWeights; ++i) linear(x.data(), m, lin[i % distinct], y.data(), 0, cdt);
  const double bytes = double(per) * dtype_size(wdt) * kWeights;
  const double flops = 2.0 * m * double(per) * kWeights;
  st.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["weight_GB/s"] =
      benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  std::vector<ByteRange> ranges;
  for (const Linear& l : lin) append_weight_range(l, ranges);
  const double bw = measure_read_gbps(ranges, 0.5);  // the same packed bytes
  st.counters["read_GB/s"] = bw;
  st.counters["pct_read"] =
      benchmark::Counter(bytes * 1e-9 * 100.0 / bw, benchmark::Counter::kIsIterationInvariantRate);
  st.SetLabel(std::string(wdt == DType::kF32 ? "f32" : "bf16") + " weights, " +
              compute_dtype_name(cdt) + ", " + std::to_string(omp_get_max_threads()) + " threads");
}

void BM_WeightStream(benchmark::State& st) {
  run_chain(st, kN, kWeights);
}

// [1024, 1024]: 4 MiB in f32, 2 MiB in bf16, half of it per thread of two: within a 2 MiB L2 in
// both dtypes, within a 1 MiB one in bf16 only.
void BM_WeightResident(benchmark::State& st) {
  run_chain(st, 1024, 1);
}

void Shapes(benchmark::internal::Benchmark* b) {
  // f32 weights in fp32, bf16 weights in fp32 and in bf16 (f32 weights in bf16 compute are
  // rounded to bf16 at packing where AMX runs, so they stream what bf16 weights do).
  for (int m : {1, 16, 32, 64, 256})
    for (auto [w, c] : {std::pair{0, 0}, {1, 0}, {1, 1}}) b->Args({m, w, c});
}
BENCHMARK(BM_WeightStream)
    ->Apply(Shapes)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(0.5);
BENCHMARK(BM_WeightResident)
    ->Apply(Shapes)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(0.5);

}  // namespace

BENCHMARK_MAIN();
