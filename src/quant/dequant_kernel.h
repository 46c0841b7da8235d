// Internal: the dequantization kernels of quant/bitpack.h, one per instruction set, and the
// portable pieces they hand tails to. The SIMD kernels are written once (dequant_kernel_impl.h)
// and compiled per instruction set (dequant_kernel_{avx2,avx512}.cpp); bitpack.cpp dispatches.
#pragma once

#include <cstdint>

namespace dllmq::kern {

// A row kernel: out[c] = fma(v, a[c / group], b[c / group]) for c in [0, n), v = table[code] (a
// lookup kernel) or the code itself; codes are a plane-split packed row (quant/bitpack.h). Bit for
// bit the scalar formula.
using DequantRowFn = void (*)(const uint8_t* packed, int n, const float* table, const float* a,
                              const float* b, int group, float* out);

// The kernel of (lookup or not, bits 2, 4 or 8) for each instruction set; call it only where
// cpu_isa.h finds the set. (A pointer, not a call with two more arguments: a 128-code row takes
// 20-40 ns, and a second call layer showed in it.)
DequantRowFn dequant_kernel_avx2(bool lut, int bits);
DequantRowFn dequant_kernel_avx512(bool lut, int bits);

// The portable formula on the pieces a vector cannot take whole (compiled for the base ISA in
// bitpack.cpp): a plane-split chunk of m codes starting at code s, w bytes at p; and `valid`
// codes of one plane (bit shift `shift`) of a chunk starting at code c0, bytes p[0, valid).
void dequant_chunk_scalar(bool lut, const uint8_t* p, int s, int m, int w, int bits,
                          const float* table, const float* a, const float* b, int group,
                          float* out);
void dequant_plane_scalar(bool lut, const uint8_t* p, int c0, int valid, int shift, int bits,
                          const float* table, const float* a, const float* b, int group,
                          float* out);

}  // namespace dllmq::kern
