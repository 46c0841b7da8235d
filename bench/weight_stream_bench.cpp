// The engine's products with their weights streamed from memory, as in a decode step: M rows
// through a chain of projections whose weights together are far larger than the last-level
// cache (48 weights of [4096, 1024]: 768 MiB in f32, 384 MiB in bf16), on all OpenMP threads,
// through linear() as the model calls it. packed_gemm_bench measures the kernels on weights that
// stay in cache; this one measures what a step of a real model meets, where each weight byte is
// read from DRAM once per step and serves M rows: M / 2 FLOPs per f32 byte, M per bf16 byte.
// Beside each rate: a plain parallel read of the same packed bytes in the same process
// (measure_read_gbps), and the share of it the product streams at.
// BM_WeightResident runs the same chain over one weight of [1024, 1024] used 48 times, whose
// share per thread of two stays in a 2 MiB L2 (the Xeon's; in a 1 MiB L2 only the bf16 weight's
// share does, in the AMD EPYC's 512 KiB neither, which then read from L3): the product's rate
// with no wait on DRAM. A kernel whose work hid wholly behind its stream would stream at
// min(read rate, resident rate); one whose work and stream take turns, at
// 1 / (1 / read rate + 1 / resident rate). The AMX kernel lies between the two, far below the
// first at 32 rows (docs/performance.md). BM_StreamPanelGroup: the stream with the packed
// kernels' panel groups forced, beside their rule's. BM_WeightStreamSmall: the same bytes in
// products a quarter the size, each with a first panel group that nothing prefetched.
//   build/bench/weight_stream_bench --benchmark_counters_tabular=true
//   build/bench/weight_stream_bench --benchmark_filter=PanelGroup --benchmark_repetitions=3
//     --benchmark_enable_random_interleaving=true   (one command line)
// Args: m, weight dtype (0 f32, 1 bf16), compute dtype (0 fp32, 1 bf16).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

#include "ops/gemm_peak.h"
#include "ops/linear.h"
#include "ops/packed_gemm.h"
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

// One product: through linear() as the model calls it (group < 0), or the packed kernels on an
// even split of the panels between the OpenMP threads with panel groups of `group` (0: the
// kernels' rule, PackedGemm::panel_group), to compare group sizes on the same stream.
void product(const float* x, int m, const Linear& l, float* y, ComputeDType cdt, int group) {
  if (group < 0) return linear(x, m, l, y, 0, cdt);
  const PackedWeight& pw = *l.packed;
  const kern::Block b{x, kK, m, y, l.out};
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    packed_gemm(pw, {&b, 1}, pw.panels() * t / nt, pw.panels() * (t + 1) / nt, false, false, 0,
                group);
  }
}

// The chain of `products` products over `distinct` weights of [n, kK] (used in turn), timed.
void run_chain(benchmark::State& st, int n, int distinct, int group = -1, int products = kWeights) {
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
    for (int i = 0; i < products; ++i)
      product(x.data(), m, lin[i % distinct], y.data(), cdt, group);
  const double bytes = double(per) * dtype_size(wdt) * products;
  const double flops = 2.0 * m * double(per) * products;
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
              compute_dtype_name(cdt) + ", " + std::to_string(omp_get_max_threads()) + " threads" +
              (group < 0   ? ""
               : group > 0 ? ", groups of " + std::to_string(group) + " panels"
                           : ", the rule's panel groups"));
}

void BM_WeightStream(benchmark::State& st) {
  run_chain(st, kN, kWeights);
}

// The same bytes as BM_WeightStream in four times as many products of [1024, 1024] (the d 1,024
// models' q, k, v and o: 4 MiB in f32, 2 MiB per thread of two), each a product of its own whose
// first panel group nothing fetched ahead (the kernels prefetch the next group within a product
// only): what that first group costs, beside BM_WeightStream's 16 MiB products.
void BM_WeightStreamSmall(benchmark::State& st) {
  run_chain(st, 1024, 4 * kWeights, -1, 4 * kWeights);
}

// [1024, 1024]: 4 MiB in f32, 2 MiB in bf16, half of it per thread of two: within a 2 MiB L2 in
// both dtypes, within a 1 MiB one in bf16 only, within 512 KiB in neither.
void BM_WeightResident(benchmark::State& st) {
  run_chain(st, 1024, 1);
}

// The same stream with the packed kernels' panel groups forced (1, 2, 4 panels) and by their rule
// (0), f32 weights in fp32, each thread half the panels: on a 512 KiB L2 the rule takes groups of
// 2 at 16-64 rows, where with 4 the next group's prefetch had room for a quarter of the group
// (docs/performance.md). Args: m, 0, 0 (f32 weights, fp32), group.
void BM_StreamPanelGroup(benchmark::State& st) {
  run_chain(st, kN, kWeights, int(st.range(3)));
}

void Shapes(benchmark::internal::Benchmark* b) {
  // f32 weights in fp32, bf16 weights in fp32 and in bf16 (f32 weights in bf16 compute are
  // rounded to bf16 at packing where AMX runs, so they stream what bf16 weights do).
  for (int m : {1, 8, 16, 24, 32, 64, 256})
    for (auto [w, c] : {std::pair{0, 0}, {1, 0}, {1, 1}}) b->Args({m, w, c});
}
BENCHMARK(BM_WeightStream)
    ->Apply(Shapes)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(0.5);
BENCHMARK(BM_WeightStreamSmall)
    ->ArgsProduct({{8, 16, 32, 64}, {0, 1}, {0}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(0.5);
BENCHMARK(BM_StreamPanelGroup)
    ->ArgsProduct({{16, 32, 64}, {0}, {0}, {0, 1, 2, 4}})
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
