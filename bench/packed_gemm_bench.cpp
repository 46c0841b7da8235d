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
// BM_Avx2InL2: the AVX2 kernel with its weights in L2 (one panel group, one K block), beside a
// plain 6 x 16 loop over the same shape (see there).
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
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

// x [m, k] and w [n, k] of small normal values from `seed`; y [m, n] of zeros.
struct Operands {
  std::vector<float> x, y, w;
};
Operands random_operands(int m, int n, int k, unsigned seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  Operands o{std::vector<float>(size_t(m) * k), std::vector<float>(size_t(m) * n),
             std::vector<float>(size_t(n) * k)};
  for (float& v : o.x) v = nd(g);
  for (float& v : o.w) v = nd(g);
  return o;
}

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
  auto [x, y, wf] = random_operands(m, kN, k, 3);
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

// The K block length at many rows, three rules on the same product (f32 weights, N = 1,024, the
// best ISA): 0 the kernels' own (PackedGemm::k_block: the larger of the rows' L2 share and a
// quarter of L2 for a panel group's weights), 1 the rows' share alone (3/8 of L2 over the rows:
// the rule before session 21), 2 no blocking (the whole K). The bits are the same under every
// rule (one FMA chain per output in ascending k; checked here before timing). Interleave them to
// compare: --benchmark_filter=PackedKBlock --benchmark_repetitions=5
// --benchmark_enable_random_interleaving=true. Args: m, k, rule.
void BM_PackedKBlock(benchmark::State& st) {
  const int m = int(st.range(0)), k = int(st.range(1)), rule = int(st.range(2));
  const Isa isa = best_isa();
  auto [x, y, w] = random_operands(m, kN, k, 7);
  const auto pw = pack_weight(w.data(), DType::kF32, kN, k, isa, false);
  const kern::Block b{x.data(), k, m, y.data(), kN};
  const int rows_rule = std::max(128, (kern::k_block_budget_floats() / m + 7) / 8 * 8);
  const int kc = rule == 0 ? 0 : rule == 1 ? rows_rule : k;
  packed_gemm(*pw, {&b, 1}, 0, pw->panels(), false);
  const std::vector<float> want = y;
  packed_gemm(*pw, {&b, 1}, 0, pw->panels(), false, false, kc);
  if (std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) != 0) {
    st.SkipWithError("a K block length changed the bits");
    return;
  }
  for (auto _ : st) packed_gemm(*pw, {&b, 1}, 0, pw->panels(), false, false, kc);
  const double flops = 2.0 * m * kN * k;
  st.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["pct_peak"] = benchmark::Counter(flops * 1e-9 * 100.0 / peak(isa),
                                               benchmark::Counter::kIsIterationInvariantRate);
  static const char* const names[] = {"kernels' rule", "rows' L2 share alone", "whole K"};
  st.SetLabel(std::string(isa_name(isa)) + ", " + names[rule]);
}
BENCHMARK(BM_PackedKBlock)
    ->ArgsProduct({{32, 128, 256}, {1024, 4096}, {0, 1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.3);

// A plain 6 x 16 f32 tile written out with intrinsics: one K-major panel (16 floats a k), six rows
// of x; no prefetch, no tails, nothing between the k steps. The reference for what the AVX2
// kernel's tile (ops/packed_kernel_impl.h) could reach on this core with its operands in cache.
__attribute__((target("avx2,fma"), noinline)) void plain_tile_6x16(const float* x, ptrdiff_t ldx,
                                                                   const float* w, int kc, float* y,
                                                                   ptrdiff_t ldy) {
  __m256 c[6][2];
#pragma GCC unroll 6
  for (int r = 0; r < 6; ++r) {
    c[r][0] = _mm256_loadu_ps(y + r * ldy);
    c[r][1] = _mm256_loadu_ps(y + r * ldy + 8);
  }
  const float* x0 = x;
  const float* x3 = x + 3 * ldx;
#pragma GCC unroll 4
  for (int k = 0; k < kc; ++k, w += 16, ++x0, ++x3) {
    const __m256 b0 = _mm256_loadu_ps(w), b1 = _mm256_loadu_ps(w + 8);
    const float* row[6] = {x0, x0 + ldx, x0 + 2 * ldx, x3, x3 + ldx, x3 + 2 * ldx};
#pragma GCC unroll 6
    for (int r = 0; r < 6; ++r) {
      const __m256 a = _mm256_broadcast_ss(row[r]);
      c[r][0] = _mm256_fmadd_ps(a, b0, c[r][0]);
      c[r][1] = _mm256_fmadd_ps(a, b1, c[r][1]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < 6; ++r) {
    _mm256_storeu_ps(y + r * ldy, c[r][0]);
    _mm256_storeu_ps(y + r * ldy + 8, c[r][1]);
  }
}

// f32 weights [64, 384] (4 panels of 16 columns: one panel group, 96 KiB) and m rows: with 384
// values of k the kernel runs one K block, every operand in L2. Args: m (a multiple of 6), which
// (0 the packed AVX2 kernel, 1 the plain loop over the same tiles in the same order: each row
// tile through the four panels).
void BM_Avx2InL2(benchmark::State& st) {
  const int m = int(st.range(0)), which = int(st.range(1));
  constexpr int kCols = 64, kDepth = 384, kPanels = kCols / 16;
  if (!isa_available(Isa::kAvx2)) {
    st.SkipWithError("instruction set not on this CPU");
    return;
  }
  auto [x, y, w] = random_operands(m, kCols, kDepth, 5);
  // AVX2 f32 panels: [panel][k][16 columns in order], back to back (ops/packed_gemm.h); the plain
  // loop reads the same packed bytes.
  const auto pw = pack_weight(w.data(), DType::kF32, kCols, kDepth, Isa::kAvx2, false);
  if (which == 0) {
    const kern::Block b{x.data(), kDepth, m, y.data(), kCols};
    for (auto _ : st) packed_gemm(*pw, {&b, 1}, 0, pw->panels(), false);
    st.SetLabel("packed avx2 f32, weights in L2");
  } else {
    const float* panels = static_cast<const float*>(pw->data());
    auto plain = [&](float* out) {
      for (int r = 0; r + 6 <= m; r += 6)
        for (int p = 0; p < kPanels; ++p)
          plain_tile_6x16(x.data() + size_t(r) * kDepth, kDepth, panels + size_t(p) * kDepth * 16,
                          kDepth, out + size_t(r) * kCols + p * 16, kCols);
    };
    // Once from zeros, it must give the packed kernel's bits (one FMA chain per output in
    // ascending k): proof that it reads the panels as the kernel does.
    std::vector<float> want(y.size());
    const kern::Block b{x.data(), kDepth, m, want.data(), kCols};
    packed_gemm(*pw, {&b, 1}, 0, pw->panels(), false);
    plain(y.data());
    if (std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) != 0) {
      st.SkipWithError("the plain loop's bits differ from the packed kernel's");
      return;
    }
    for (auto _ : st) plain(y.data());
    st.SetLabel("plain 6x16 intrinsics loop, same tiles");
  }
  const double flops = 2.0 * m * kCols * kDepth;
  st.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["pct_peak"] = benchmark::Counter(flops * 1e-9 * 100.0 / peak(Isa::kAvx2),
                                               benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Avx2InL2)
    ->ArgsProduct({{6, 48, 252}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.2);

}  // namespace

BENCHMARK_MAIN();
