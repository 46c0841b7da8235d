// Bit packing of b-bit codes into a row of bytes, and fused dequantization of packed rows.
//
// Layout of one packed row of n codes (b = 2, 4, 8: "plane-split" chunks, so SIMD unpacking
// is a shift and a mask that yields consecutive channels, no shuffles):
//   k = 8 / b codes per byte; the row is split into chunks of up to 16 * k codes (16 bytes);
//   a chunk holding m codes is w = ceil(m / k) bytes wide and byte j of it holds the codes
//   j, j + w, j + 2w, ... (those < m) of the chunk, code i * w + j at bit shift b * i.
//   Full chunks (m = 16k) have w = 16: a 16-lane load gives 16 consecutive codes per shift.
// b = 3: a plain little-endian bit stream, code i at bit 3 * i (bits 3i .. 3i + 2 of the row).
// Unused high bits of the last byte are zero. packed_row_bytes(n, b) = ceil(n * b / 8).
#pragma once

#include <cstddef>
#include <cstdint>

namespace dllmq {

size_t packed_row_bytes(int n, int bits);

void pack_codes(const uint8_t* codes, int n, int bits, uint8_t* packed);
void unpack_codes(const uint8_t* packed, int n, int bits, uint8_t* codes);

// Uniform dequantization of one packed row:
//   out[c] = code[c] * scale[c / group] + zero[c / group]  for c in [0, n)
// group = 1: per-element parameters (per-channel K groups); group = G: one pair per G
// consecutive codes (per-token V groups); group = n: one pair for the row.
void dequant_uniform_row(const uint8_t* packed, int n, int bits, const float* scale,
                         const float* zero, int group, float* out);

// Codebook (non-uniform) dequantization of one packed row:
//   out[c] = lut[code[c]] * range[c / group] + offset[c / group]
// lut has 2^bits entries.
void dequant_lut_row(const uint8_t* packed, int n, int bits, const float* lut, const float* range,
                     const float* offset, int group, float* out);

// Instruction set the dequantization kernels run with: "avx512", "avx2" or "scalar". Chosen
// once at run time from the CPU (util/cpu_features); DLLMQ_QUANT_ISA=scalar|avx2|avx512
// in the environment forces a path (one the CPU lacks is an error), so tests compare paths.
const char* quant_isa();

}  // namespace dllmq
