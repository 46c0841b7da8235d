// The packed-weight micro-kernels (ops/packed_gemm.h) on one thread, per instruction set this CPU
// has, at the engine's row counts, as GFLOP/s and as a share of the same core's measured f32 FMA
// peak (independent FMA chains, no memory: measure_fma_peak_gflops); beside them oneDNN's matmul
// primitive on the same shape with f32 weights (what the projections ran before, the library
// kept only where it measures faster). N = 1024 output columns, weights bf16 or f32. Rates are per
// CPU second of the benchmark thread (Google Benchmark's default), not per wall second: on a
// shared machine the thread gets a fraction of a core, and the share of the FMA peak is what a
// core does while it runs the kernel.
//   build/bench/packed_gemm_bench --benchmark_counters_tabular=true
// bf16 compute's other candidates on CPUs with AVX512-BF16: our vdpbf16ps kernel over the same
// AVX-512 panels, and oneDNN's bf16 matmul (AMX where the CPU has it), as a share of the core's
// vdpbf16ps peak (measure_bf16dot_peak_gflops; twice the FMA FLOPs per instruction).
// Our AMX kernel (ops/amx_gemm.h) as a share of the core's AMX bf16 peak (measure_amx_peak_gflops).
// Args: isa (1 avx2, 2 avx512; 0 = oneDNN f32; 3 = AVX512-BF16 dot kernel, 4 = oneDNN bf16
// matmul, 5 = AMX kernel), m, k, weight dtype (0 f32, 1 bf16).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <map>
#include <random>
#include <vector>

#include "ops/amx_gemm.h"
#include "ops/gemm.h"
#include "ops/packed_gemm.h"
#include "util/cpu_isa.h"
#include "util/half.h"

namespace {

using namespace dllmq;

double peak(Isa isa) {
  static std::map<Isa, double> cache;
  auto it = cache.find(isa);
  if (it == cache.end()) it = cache.emplace(isa, measure_fma_peak_gflops(isa, 0.3)).first;
  return it->second;
}

double amx_peak() {
  static const double p = measure_amx_peak_gflops(0.3);
  return p;
}

double dot_peak() {
  static const double p = measure_bf16dot_peak_gflops(0.3);
  return p;
}

constexpr int kN = 1024;

void BM_PackedGemm(benchmark::State& st) {
  const int which = int(st.range(0)), m = int(st.range(1)), k = int(st.range(2));
  const DType dt = st.range(3) ? DType::kBF16 : DType::kF32;
  const bool dot = which == 3 || which == 4;
  const Isa isa = which == 2 || dot ? Isa::kAvx512 : Isa::kAvx2;
  if ((which != 0 && !isa_available(isa)) || (dot && dot_peak() == 0.0) ||
      (which == 5 && !amx_available())) {
    st.SkipWithError("instruction set not on this CPU");
    return;
  }
  std::mt19937 g(3);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<float> x(size_t(m) * k), y(size_t(m) * kN), wf(size_t(kN) * k);
  for (float& v : x) v = nd(g);
  for (float& v : wf) v = nd(g);
  std::vector<uint16_t> wb(wf.size());
  for (size_t i = 0; i < wf.size(); ++i) wb[i] = f32_to_bf16(wf[i]);
  if (which == 5) {
    const auto pw = pack_weight_amx(wb.data(), DType::kBF16, kN, k, false);
    const kern::Block b{x.data(), k, m, y.data(), kN};
    for (auto _ : st) packed_gemm_amx(*pw, {&b, 1}, 0, pw->panels());
    st.SetLabel("AMX bf16, tdpbf16ps");
  } else if (which == 4) {
    if (!gemm_info().bf16_jit) {
      st.SkipWithError("no oneDNN bf16 JIT kernel here");
      return;
    }
    std::vector<uint16_t> xb(x.size());
    for (size_t i = 0; i < x.size(); ++i) xb[i] = f32_to_bf16(x[i]);
    for (auto _ : st) {
#pragma omp parallel num_threads(1)
      gemm_bf16_nt_onednn(m, kN, k, xb.data(), k, wb.data(), k, y.data(), kN);
    }
    st.SetLabel(gemm_info().name + " " + gemm_info().isa + " bf16 matmul");
  } else if (which == 3) {
    const auto pw = pack_weight(wb.data(), DType::kBF16, kN, k, isa, false);
    const kern::Block b{x.data(), k, m, y.data(), kN};
    for (auto _ : st) packed_gemm_bf16dot(*pw, {&b, 1}, 0, pw->panels());
    st.SetLabel("packed avx512 bf16, vdpbf16ps");
  } else if (which == 0) {
    if (dt == DType::kBF16)
      for (size_t i = 0; i < wf.size(); ++i) wf[i] = bf16_to_f32(wb[i]);
    for (auto _ : st) {
#pragma omp parallel num_threads(1)
      sgemm_nt(m, kN, k, x.data(), k, wf.data(), k, y.data(), kN);
    }
    st.SetLabel(gemm_info().name + " " + gemm_info().isa + " f32 matmul");
  } else {
    const void* w = dt == DType::kBF16 ? static_cast<const void*>(wb.data()) : wf.data();
    const auto pw = pack_weight(w, dt, kN, k, isa, false);
    const kern::Block b{x.data(), k, m, y.data(), kN};
    for (auto _ : st) packed_gemm(*pw, {&b, 1}, 0, pw->panels(), false);
    st.SetLabel(std::string("packed ") + isa_name(isa) + (dt == DType::kBF16 ? " bf16" : " f32"));
  }
  const double flops = 2.0 * m * kN * k;
  st.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  const Isa pisa = which == 0 ? best_isa() : isa;
  // Share of the core's FMA peak (the oneDNN f32 rows against the best ISA's), or of its bf16
  // dot-product peak for the bf16 candidates.
  const double pk = which == 5 ? amx_peak() : dot ? dot_peak() : peak(pisa);
  st.counters["peak"] = pk;
  st.counters["pct_peak"] =
      benchmark::Counter(flops * 1e-9 * 100.0 / pk, benchmark::Counter::kIsIterationInvariantRate);
}

void Shapes(benchmark::internal::Benchmark* b) {
  for (int k : {1024, 4096})
    for (int m : {1, 8, 16, 32, 64, 256}) {
      for (int which : {1, 2, 3, 4, 5}) b->Args({which, m, k, 1});
      b->Args({1, m, k, 0});  // f32 weights, AVX2
      b->Args({2, m, k, 0});  // f32 weights, AVX-512
      b->Args({0, m, k, 1});  // oneDNN f32 (bf16 values widened beforehand)
    }
}
BENCHMARK(BM_PackedGemm)->Apply(Shapes)->Unit(benchmark::kMicrosecond)->MinTime(0.2);

}  // namespace

BENCHMARK_MAIN();
