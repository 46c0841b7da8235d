// Internal interface of the packed-weight GEMM micro-kernels (ops/packed_gemm.h is the public
// one). Each instruction set's kernels are one translation unit compiled with that set's target
// flags (packed_kernel_{scalar,avx2,avx512}.cpp, all instantiating packed_kernel_impl.h), so this
// header includes nothing that could be instantiated there and linked into portable code.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dllmq::kern {

// Stored type of the packed weights: floats, or integer codes (8 or 4 bits) with per-group
// scales and zero points, w = (q - z) * s (wquant/weight_quant.h). kQ8 / kQ4 hold the codes q
// with their zero points; kS8 / kS4 hold q - z itself as signed codes, for weights whose every
// zero point is 2^(bits - 1) (the symmetric scheme): no subtraction in the inner loop.
enum class WType : int { kF32 = 0, kBF16 = 1, kF16 = 2, kQ8 = 3, kQ4 = 4, kS8 = 5, kS4 = 6 };

constexpr bool is_code(WType t) {
  return t == WType::kQ8 || t == WType::kQ4 || t == WType::kS8 || t == WType::kS4;
}

// The group tables of integer codes (unused for float weights). The reduction runs over the
// packed k order, in which each group's columns are one run [gstart[g], gstart[g + 1]); K blocks
// hold whole groups. `zero` is unused by kS8 / kS4.
struct QuantArgs {
  const float* scale = nullptr;     // [panels][n_groups][2 * lanes], the panel's columns in order
  const int32_t* zero = nullptr;    // same layout
  const int32_t* gstart = nullptr;  // [n_groups + 1]
  int n_groups = 0;
};

// One block of rows: x [m, k] (row stride ldx) times the weights -> y [m, n] (row stride ldy).
struct Block {
  const float* x;
  ptrdiff_t ldx;
  int m;
  float* y;
  ptrdiff_t ldy;
};

// Panels [p0, p1) of packed weights (layout in packed_gemm.h) applied to every block.
struct GemmArgs {
  const Block* blocks;
  int n_blocks;
  const void* w;  // the first panel of the weight
  WType wtype;
  int n, k;      // columns (output features) and reduction length of the whole weight
  int lanes;     // floats per vector of the layout: a panel is 2 * lanes columns
  int p0, p1;    // panels to compute
  bool round_w;  // round each (widened) weight to bf16 first (bf16 compute, non-bf16 weights)
  QuantArgs q;   // codes only
  // A panel group's row tiles prefetch the next group's weights into L2
  // (PackedGemm::NextGroup); off only to measure it (DLLMQ_PANEL_PREFETCH=0).
  bool prefetch_next_group = true;
  // Reduction values per K block; 0: PackedGemm::k_block's rule (packed_gemm's k_block: tests and
  // benchmarks only). The bits do not depend on it.
  int kc = 0;
  // Panels per group; 0: PackedGemm::panel_group's rule (tests and benchmarks force others). The
  // bits do not depend on it either.
  int group = 0;
};

// y = x W^T over the panels, one f32 FMA chain per output in ascending k starting from 0:
// every output's bits are those of the scalar `fmaf` loop, whatever the kernel, row count,
// tiling or thread. Codes: per group g in the packed order, a chain a_g = fmaf over the group's
// k of x[k] * float(q - z) from 0, and y = fmaf(a_g, s_g, y) over the groups from 0 (the scale
// leaves the inner loop). lanes 8: scalar8 / avx2; lanes 16: scalar16 / avx512.
void gemm_scalar8(const GemmArgs& a);
void gemm_scalar16(const GemmArgs& a);
void gemm_avx2(const GemmArgs& a);
void gemm_avx512(const GemmArgs& a);

// bf16 compute on bf16 weights packed for AVX-512, on the AVX512-BF16 dot product: per output a
// chain over the k pairs in ascending order, each pair acc = fmaf(x[k+1], w[k+1], acc) then
// fmaf(x[k], w[k], acc), x rounded to bf16 (nearest even), denormal inputs and results as zero
// (packed_kernel_avx512bf16.cpp; its twin is gemm_bf16dot_ref in ops/packed_gemm.h). Only for
// WType::kBF16 with lanes 16, on a CPU with AVX512-BF16.
void gemm_bf16dot_avx512(const GemmArgs& a);

// Floats of activations a K block may hold for all its rows: 3/8 of one core's L2 (768 KiB of the
// Xeons' 2 MiB, 192 KiB of the AMD EPYC's 512 KiB), from sysconf, 384 KiB where the size is
// unknown.
// Computed once (packed_gemm.cpp).
int k_block_budget_floats();

// One core's L2 in bytes, as the C library reports it (1 MiB where unknown).
long l2_cache_bytes();

// Independent FMA chains (12 AVX2 / 24 AVX-512 vectors) for `iters` rounds on one thread: the
// core's f32 FMA peak is flops / time (measure_fma_peak_gflops). Returns a value that depends on
// every chain.
float fma_burn_avx2(long iters, float seed);
float fma_burn_avx512(long iters, float seed);
// The same with 24 vdpbf16ps chains: the core's bf16 dot-product peak.
float dp_burn_avx512bf16(long iters, float seed);
// Sum of n floats, n a multiple of 64 (ops/gemm_peak.h's read bandwidth).
float read_sum_avx2(const float* p, size_t n);
float read_sum_avx512(const float* p, size_t n);
// FLOPs per round of each burn loop.
inline constexpr long kBurnFlopsAvx2 = 12 * 8 * 2;
inline constexpr long kBurnFlopsAvx512 = 24 * 16 * 2;
inline constexpr long kBurnFlopsBf16Dot = 24 * 16 * 4;  // two multiply-adds per lane

}  // namespace dllmq::kern
