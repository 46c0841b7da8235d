// Uniform asymmetric b-bit quantization over a group (KIVI's arithmetic, METHODS.md §1):
//   zero = min(x), scale = (max(x) - zero) / (2^b - 1), both stored as fp16;
//   q = clamp(round_half_even((x - zero) / scale), 0, 2^b - 1),  x_hat = q * scale + zero.
// The fp16 parameters are rounded so the fp16 grid still covers [min, max]: zero is min rounded
// toward -inf, and scale is computed from that rounded zero, (max - zero) / (2^b - 1) in f32,
// then rounded toward +inf (never below the exact value). This keeps the round-trip
// error <= scale / 2 for every element even when |min| is large next to the range (with
// round-to-nearest fp16 parameters the clamp at code 0 or 2^b - 1 could cost more).
// A constant group (max == min) gets scale 0; every code is 0 and x_hat == zero. With zero
// rounded toward -inf such a group dequantizes to min rounded down to fp16 (exact when min is
// representable in fp16, within fp16 rounding otherwise).
#pragma once

#include <cstdint>

namespace dllmq {

struct UniformParams {
  uint16_t scale = 0;  // fp16 bits
  uint16_t zero = 0;   // fp16 bits
};

// Supported code widths for uniform and codebook codecs.
inline bool valid_quant_bits(int bits) {
  return bits == 2 || bits == 3 || bits == 4 || bits == 8;
}

// Parameters for the n values x[0], x[stride], ..., x[(n-1)*stride] (all finite, n >= 1).
UniformParams uniform_params(const float* x, int n, int stride, int bits);

// Code of one value for f32 copies of the fp16 parameters (scale 0 gives code 0).
int uniform_code(float x, float scale, float zero, int bits);

// Quantizes n values (strided input) into codes[0..n) (one code per byte, unpacked).
void uniform_quantize(const float* x, int n, int stride, int bits, UniformParams p, uint8_t* codes);

}  // namespace dllmq
