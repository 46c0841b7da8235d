// Internal interface of the AMX bf16 micro-kernel (ops/amx_gemm.h is the public one). Its one
// translation unit, amx_kernel.cpp, is compiled with the AMX and AVX512-BF16 target flags and is
// called only on CPUs that have them, after the process was granted the tile state.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dllmq::kern {

// Bytes of one k block of one 32-column panel in the AMX layout: two B tiles of 16 k pairs x 16
// columns x 2 bf16.
inline constexpr int kAmxBlockBytes = 2048;

// x [m, k] f32 (row stride ldx) as bf16 (round to nearest even; a denormal reads as zero, as
// vcvtne2ps2bf16 does) into dst, the A operand of the kernel in tile order: for each 16 rows,
// k_pad / 32 tiles of 16 rows x 32 bf16 (1 KiB each, contiguous, so a tile load reads 16
// consecutive cache lines instead of 16 rows a row stride apart that fall into the same L1
// sets). dst holds ceil16(m) * k_pad values, 64-byte aligned; the padding (k .. k_pad and rows
// m .. ceil16(m)) is zero.
void amx_convert_rows(const float* x, ptrdiff_t ldx, int m, int k, uint16_t* dst, int k_pad);

// Panels [p0, p1) of AMX-packed weights w (k_pad / 32 blocks of kAmxBlockBytes per panel) times
// the converted rows xb (amx_convert_rows) -> y [m, n] (row stride ldy; columns of those panels
// only, overwritten; padding columns >= n are not written). Loads its tile configuration and
// releases the tiles before it returns.
void amx_gemm_bf16(const uint16_t* xb, int m, int k_pad, const uint16_t* w, int n, int p0, int p1,
                   float* y, ptrdiff_t ldy);

// Attention's operands (ops/attention_amx.h). Tiles are 16 rows x 64 bytes, 1 KiB each, stored
// one after another; "A order" is amx_convert_rows' (tile (row tile t, k block kb) at
// (t * nkb + kb) * 512 values), "B order" the same with column tiles for row tiles.
//
// Keys [n, hd] (f32 rows, stride ldk) as the B operand of scores = Q K^T: column tile g holds
// keys 16g .. 16g + 15, k block kb dims 32kb .. 32kb + 31, row i of a tile the pairs (dims 2i,
// 2i + 1) of its 16 keys. ceil(n / 16) x hd_pad / 32 tiles; keys >= n and dims >= hd are zero.
void amx_pack_keys(const float* k, ptrdiff_t ldk, int n, int hd, int hd_pad, uint16_t* dst);
// Values [n, hd] (stride ldv) as the B operand of out += P V: column tile c holds dims 16c ..
// 16c + 15, k block kb keys 32kb .. 32kb + 31, row i the pairs (keys 2i, 2i + 1) of its 16 dims.
// ceil(hd / 16) x n_pad / 32 tiles (n_pad a multiple of 32); keys >= n and dims >= hd are zero.
void amx_pack_values(const float* v, ptrdiff_t ldv, int n, int hd, int n_pad, uint16_t* dst);
// The same from rows already in bf16 (a bf16 KV store's): the values go in as they are, which is
// what the f32 forms do with their exact widening.
void amx_pack_keys_bf16(const uint16_t* k, ptrdiff_t ldk, int n, int hd, int hd_pad, uint16_t* dst);
void amx_pack_values_bf16(const uint16_t* v, ptrdiff_t ldv, int n, int hd, int n_pad,
                          uint16_t* dst);
// The softmax terms of bf16 attention on the tiles: s[k] = exp(s[k] - m) in f32 (16 lanes: 2^j
// times a degree-7 Taylor polynomial on |r| <= ln 2 / 2, within 2 ulp; 0 below -126 ln 2),
// returning their sum (16 partial sums, then a tree). The probabilities go to the tile unit as bf16
// (half an ulp there is 2^-9), so the f32 path's correctly rounded double-precision exponentials
// (ops/exp_sum.h) buy nothing here and cost a third of the attention (docs/performance.md).
double amx_exp_sub_f32(float* s, int n, float m);

// c [16 row_tiles, 16 col_tiles] (row stride ldc floats) = (accumulate ? c : 0) + A B over nkb k
// blocks, A in A order, B in B order: each output the chain of one tdpbf16ps per k block in
// ascending order, whatever the blocking, so a row's bits do not depend on the rows beside it.
void amx_tiles_mm(const uint16_t* a, int row_tiles, const uint16_t* b, int col_tiles, int nkb,
                  float* c, ptrdiff_t ldc, bool accumulate);

// `iters` rounds of four independent tdpbf16ps on tiles already in registers (no memory): the
// core's AMX bf16 peak is 4 * 16384 * iters FLOPs over the time. Returns one output of them.
float amx_burn(long iters);

}  // namespace dllmq::kern
