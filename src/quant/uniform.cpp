#include "quant/uniform.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"
#include "util/half.h"

namespace dllmq {
namespace {

constexpr uint16_t kF16SignBit = 0x8000;
constexpr uint16_t kF16PosInf = 0x7c00;
constexpr uint16_t kF16NegInf = 0xfc00;

// Next fp16 toward +inf / -inf by stepping the bit pattern: magnitudes grow with the bits, so
// the step direction flips with the sign, and +-0 steps to the smallest denormal.
uint16_t f16_next_up(uint16_t h) {
  if (h == kF16SignBit) return 0x0001;
  return (h & kF16SignBit) ? static_cast<uint16_t>(h - 1) : static_cast<uint16_t>(h + 1);
}

uint16_t f16_next_down(uint16_t h) {
  if (h == 0) return kF16SignBit | 0x0001;
  return (h & kF16SignBit) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h - 1);
}

bool f16_is_inf(uint16_t h) {
  return h == kF16PosInf || h == kF16NegInf;
}

}  // namespace

UniformParams uniform_params(const float* x, int n, int stride, int bits) {
  if (!valid_quant_bits(bits)) fail("uniform_params: unsupported bits {} (2, 3, 4 or 8)", bits);
  if (n < 1) fail("uniform_params: empty group (n = {})", n);
  float lo = x[0], hi = x[0];
  for (int i = 0; i < n; ++i) {
    float v = x[static_cast<size_t>(i) * stride];
    if (!std::isfinite(v)) fail("uniform_params: non-finite value {} at index {}", v, i);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }

  UniformParams p;
  // zero: min rounded toward -inf (nearest, then one ulp down if nearest went above).
  uint16_t z = f32_to_f16(lo);
  if (f16_to_f32(z) > lo) z = f16_next_down(z);
  if (f16_is_inf(z)) fail("uniform_params: min {} is outside the fp16 range (max 65504)", lo);
  p.zero = z;
  if (hi == lo) return p;  // constant group: scale 0, every code 0

  // scale: measured from the rounded zero, not from min, so zero + (2^b - 1) * scale >= max still
  // holds after zero moved down; this is what keeps the clamp from costing more than scale / 2.
  const double zero = f16_to_f32(z);
  const double levels = (1 << bits) - 1;
  const double exact = (static_cast<double>(hi) - zero) / levels;
  uint16_t s = f32_to_f16(static_cast<float>(exact));
  // The loops step at most a few ulps: nearest rounding is within one, and the coverage check
  // only catches the rounding of `exact` itself.
  while (!f16_is_inf(s) && (static_cast<double>(f16_to_f32(s)) < exact ||
                            zero + levels * f16_to_f32(s) < static_cast<double>(hi))) {
    s = f16_next_up(s);
  }
  if (f16_is_inf(s)) {
    fail("uniform_params: scale {} for range [{}, {}] exceeds the fp16 max 65504", exact, lo, hi);
  }
  p.scale = s;
  return p;
}

int uniform_code(float x, float scale, float zero, int bits) {
  if (scale == 0.0f) return 0;
  const float q = std::nearbyint((x - zero) / scale);
  const float top = static_cast<float>((1 << bits) - 1);
  // Written so a NaN q lands on 0 rather than propagating into the int conversion.
  return q > 0.0f ? static_cast<int>(std::min(q, top)) : 0;
}

void uniform_quantize(const float* x, int n, int stride, int bits, UniformParams p,
                      uint8_t* codes) {
  if (!valid_quant_bits(bits)) fail("uniform_quantize: unsupported bits {} (2, 3, 4 or 8)", bits);
  const float scale = f16_to_f32(p.scale);
  const float zero = f16_to_f32(p.zero);
  for (int i = 0; i < n; ++i) {
    codes[i] =
        static_cast<uint8_t>(uniform_code(x[static_cast<size_t>(i) * stride], scale, zero, bits));
  }
}

}  // namespace dllmq
