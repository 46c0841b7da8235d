// The integer micro-kernels of the int8-activation product (ops/int8_act_gemm.h): one AVX-512
// VNNI kernel (vpdpbusd, in its own translation unit with that set's flags) and its portable
// scalar twin, which gives the same bits (the sums are exact integers; the epilogue is the same
// three f32 operations in the same order).
#pragma once

#include <cstddef>
#include <cstdint>

namespace dllmq::kern {

// Columns per panel of the VNNI layout: one 512-bit vector of int32 sums.
inline constexpr int kI8Cols = 16;

// One block of quantized activation rows: xq [m, kp] bytes (u8 = int8 code + 128, the packed k
// order, padding 128), sx [m] row scales, xsum [m, n_groups] per-group sums of the int8 codes
// (4-bit weights only) -> y [m, n] (row stride ldy), f32.
struct I8Block {
  const uint8_t* xq;
  ptrdiff_t ldx;
  const float* sx;
  const int32_t* xsum;
  int m;
  float* y;
  ptrdiff_t ldy;
};

// Panels [p0, p1) of an Int8ActWeight (layout in int8_act_gemm.h) applied to one block.
struct I8Args {
  I8Block b;
  const uint8_t* codes;   // the first panel
  const float* scale;     // [panels][n_groups][16]
  const int32_t* corr;    // [panels][n_groups][16]
  const int32_t* zero;    // [panels][n_groups][16]; null for 8-bit symmetric codes
  const int32_t* gstart;  // [n_groups + 1], multiples of 8
  int bits, n, kp, n_groups;
  int p0, p1;
};

// Per output (row r, column c) and group g of packed positions [gstart[g], gstart[g + 1]):
//   A = sum over the group of u8[r, k] * code[k, c]  (int32, exact: the u8 times the stored
//       signed byte (8 bits) or unsigned nibble (4 bits), as vpdpbusd forms it)
//       - corr[g, c]                       (= 128 * the group's sum of codes: undoes the + 128)
//       - zero[g, c] * xsum[r, g]          (the stored zero point times the int8 codes' sum;
//                                           none for 8-bit symmetric codes)
//   y = fmaf(float(A) * scale[g, c], sx[r], y), over the groups in order from y = 0.
void i8gemm_scalar(const I8Args& a);
void i8gemm_vnni(const I8Args& a);

// One activation row quantized as the definition says (int8_act_gemm.h): returns sx and writes
// u8[k] = xq[k] + 128; a non-finite row gives NaN and codes 0 (u8 128). The AVX-512 version (the
// same divisions, roundings and clamps, lane by lane) gives the same bytes.
float quantize_row_u8_scalar(const float* x, int k, uint8_t* u8);
float quantize_row_u8_avx512(const float* x, int k, uint8_t* u8);

}  // namespace dllmq::kern
