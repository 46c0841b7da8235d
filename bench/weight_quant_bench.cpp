// Quantized weights against bf16 in the packed micro-kernels (ops/packed_gemm.h), side by side in
// one run, on one thread of the dispatched instruction set: one [4096, 4096] projection (an
// 8B-model-sized attention projection: 32 MiB in bf16, 16 MiB int8, 8 MiB int4, larger than the
// caches, so at few rows the weight bytes bound the time) at 1, 8 and 32 rows. Rates are per CPU
// second of the benchmark thread (Google Benchmark's default); the weight's bytes per second are
// reported beside the FLOPs.
//   build/bench/weight_quant_bench --benchmark_counters_tabular=true
// Args: format (0 bf16, 8 int8 per channel, 4 int4 groups of 128), m, asym (codes with zero
// points, 1; or the symmetric scheme's signed codes, 0), a8 (1: int8 activations on the integer
// kernel of ops/int8_act_gemm.h, --w8a8, labelled "w8a8"/"w4a8" with its kernel; 0: the f32
// widening kernels). The int8-activation rows include quantizing the activations.
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <vector>

#include "ops/int8_act_gemm.h"
#include "ops/packed_gemm.h"
#include "util/cpu_isa.h"
#include "util/half.h"
#include "wquant/weight_quant.h"

namespace {

using namespace dllmq;

constexpr int kN = 4096, kK = 4096;

// One packed weight per format, built once (quantizing takes a while).
const PackedWeight& weight(int format, bool asym) {
  static std::shared_ptr<const PackedWeight> cache[5];
  const int slot = format == 0 ? 0 : (format == 8 ? 1 : 3) + asym;
  if (cache[slot]) return *cache[slot];
  std::mt19937 g(3);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<uint16_t> wb(size_t(kN) * kK);
  for (uint16_t& v : wb) v = f32_to_bf16(nd(g));
  if (format == 0) {
    cache[slot] = pack_weight(wb.data(), DType::kBF16, kN, kK, dispatch_isa());
  } else {
    const WeightQuantScheme s{format, format == 8 ? -1 : 128, !asym};
    cache[slot] = pack_quant_weight(quantize_rtn(wb.data(), DType::kBF16, kN, kK, s, "bench"),
                                    dispatch_isa());
  }
  return *cache[slot];
}

void BM_WeightFormat(benchmark::State& st) {
  const int format = int(st.range(0)), m = int(st.range(1));
  const bool asym = st.range(2) != 0, a8 = st.range(3) != 0;
  const PackedWeight& pw = weight(format, asym);
  std::mt19937 g(4);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(size_t(m) * kK), y(size_t(m) * kN);
  for (float& v : x) v = nd(g);
  const kern::Block b{x.data(), kK, m, y.data(), kN};
  const std::string name = (format == 0   ? "bf16"
                            : format == 8 ? "int8"
                                          : "int4-g128") +
                           std::string(format != 0 && asym ? "-asym" : "");
  double bytes = double(pw.bytes());
  if (a8) {
    const auto a = pack_int8_act(pw);
    for (auto _ : st) int8_act_gemm(*a, {&b, 1});
    st.SetLabel(std::string(int8_act_kernel_name()) + (format == 8 ? " w8a8 " : " w4a8 ") + name);
    bytes = double(a->bytes());
  } else {
    for (auto _ : st) packed_gemm(pw, {&b, 1}, 0, pw.panels(), false);
    st.SetLabel(std::string(isa_name(pw.isa)) + " " + name);
  }
  st.counters["weight_MiB"] = bytes / (1 << 20);
  const double flops = 2.0 * m * kN * kK;
  st.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["weight_GB/s"] =
      benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void Shapes(benchmark::internal::Benchmark* b) {
  for (int m : {1, 8, 32})
    for (int format : {0, 8, 4})
      for (int asym : {0, 1})
        if (format != 0 || asym == 0) {
          b->Args({format, m, asym, 0});
          if (format != 0) b->Args({format, m, asym, 1});  // int8 activations
        }
}
BENCHMARK(BM_WeightFormat)->Apply(Shapes)->Unit(benchmark::kMicrosecond)->MinTime(0.5);

}  // namespace

BENCHMARK_MAIN();
