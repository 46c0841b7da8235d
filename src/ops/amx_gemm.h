// bf16 compute on Intel AMX (AMX-BF16 tile matrix multiply), the fourth way bf16 compute can
// multiply (ops/gemm.h, bf16_amx): chosen at start-up where it measures faster than the widening
// kernels and oneDNN's bf16 matmul, or forced with DLLMQ_BF16_GEMM=amx.
//
// Layout: the weights [n, k] rounded to bf16 (round to nearest even: bf16 weights are copied
// as they are, f32/f16 ones rounded as bf16 compute rounds them), cut into panels of 32 columns
// (the last padded with zeros) and k padded with zeros to k_pad, a multiple of 32. Each panel is
// k_pad / 32 blocks of 2 KiB, one per 32 k: the two B tiles of tdpbf16ps, columns 0-15 then
// 16-31, each 16 rows (k pairs 2i, 2i + 1) of 16 columns x (w[c][2i], w[c][2i + 1]). One copy of
// the weights in bf16, so a bf16 checkpoint costs its own bytes (plus the padding) and an f32 one
// half of them: a model loaded for bf16 compute packs only these (Model::load), and one switched
// to it drops the widening kernels' panels (Model::set_compute_dtype).
//
// Numerics: activations rounded to bf16 (nearest even, denormals to zero), products of bf16
// pairs summed in f32 by the tile unit, one tdpbf16ps per 32 k in ascending k order into a tile
// that starts at zero. The unit's order and rounding inside one instruction are not specified to
// the bit, so there is no bit-exact twin; the tests hold every output to
//   |y - sum_k x'[k] w'[k]| <= kAmxErrorUlps * (k_pad / 32 + 5) * 2^-24 * sum_k |x'[k] w'[k]|
// (x', w' the bf16 values, denormals as zero; the sums exact, in double): the worst case of
// summing each block's 32 products with at most 5 roundings and the blocks one after another,
// with a factor of two for directed rounding inside the unit. A row's bits do not depend on
// the rows beside it, the tiling or the thread split, so stacked requests keep their bits.
#pragma once

#include <memory>
#include <span>

#include "io/dtype.h"
#include "ops/packed_gemm.h"

namespace dllmq {

inline constexpr double kAmxErrorUlps = 2.0;

// Whether this process can run the AMX kernel: the CPU has AMX-TILE, AMX-BF16 and AVX512-BF16,
// the OS saves the tile state and granted it to this process (Linux: arch_prctl
// ARCH_REQ_XCOMP_PERM, asked once), and the dispatched instruction set is AVX-512 (DLLMQ_ISA=avx2
// or scalar turns it off).
bool amx_available();

// Packs w [n, k] (row-major, `dt`: bf16, f16 or f32) into the AMX layout; panels packed on the
// OpenMP threads when `parallel`. Requires amx_available().
std::shared_ptr<const PackedWeight> pack_weight_amx(const void* w, DType dt, int n, int k,
                                                    bool parallel = true);

// Panels [p0, p1) of AMX-packed `w` applied to every block (f32 activations, rounded to bf16
// here; y columns of those panels only, overwritten). Runs on the calling thread.
void packed_gemm_amx(const PackedWeight& w, std::span<const kern::Block> blocks, int p0, int p1);

// One core's AMX bf16 rate in GFLOP/s (independent tdpbf16ps on register tiles, no memory), best
// of repeats lasting `min_s` seconds in all; 0 where amx_available() is false.
double measure_amx_peak_gflops(double min_s = 0.2);

}  // namespace dllmq
