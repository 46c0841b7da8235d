// bf16 / f16 <-> f32 conversions. Weights stay in their stored 16-bit dtype; compute is f32.
#pragma once

#include <cstdint>
#include <cstring>

namespace dllmq {

inline float bf16_to_f32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even, NaN preserved (quiet).
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

#if defined(__FLT16_MAX__)
// IEEE half via the compiler's _Float16 (g++ 12 on x86-64; F16C instructions where enabled).
inline float f16_to_f32(uint16_t h) {
  _Float16 v;
  std::memcpy(&v, &h, 2);
  return static_cast<float>(v);
}

inline uint16_t f32_to_f16(float f) {
  _Float16 v = static_cast<_Float16>(f);
  uint16_t h;
  std::memcpy(&h, &v, 2);
  return h;
}
#else
// Compilers without _Float16 on x86 (clang < 15: the fuzz build): exact bit conversions, round
// to nearest even, subnormals, infinities and NaN kept (F. Giesen's public-domain method).
inline float f16_to_f32(uint16_t h) {
  const uint32_t shifted_exp = 0x7c00u << 13;
  uint32_t o = (uint32_t(h) & 0x7fffu) << 13;
  const uint32_t exp = shifted_exp & o;
  o += uint32_t(127 - 15) << 23;
  if (exp == shifted_exp) {
    o += uint32_t(128 - 16) << 23;  // Inf / NaN
  } else if (exp == 0) {            // zero / subnormal: renormalise through a float subtraction
    const uint32_t magic_u = 113u << 23;
    float of, magic;
    o += 1u << 23;
    std::memcpy(&of, &o, 4);
    std::memcpy(&magic, &magic_u, 4);
    of -= magic;
    std::memcpy(&o, &of, 4);
  }
  o |= (uint32_t(h) & 0x8000u) << 16;
  float r;
  std::memcpy(&r, &o, 4);
  return r;
}

inline uint16_t f32_to_f16(float f) {
  const uint32_t f32infty = 255u << 23, f16max = (127u + 16) << 23;
  const uint32_t denorm_magic_u = ((127u - 15) + (23 - 10) + 1) << 23;
  uint32_t fu;
  std::memcpy(&fu, &f, 4);
  const uint32_t sign = fu & 0x80000000u;
  fu ^= sign;
  uint16_t o;
  if (fu >= f16max) {
    o = fu > f32infty ? 0x7e00 : 0x7c00;
  } else if (fu < (113u << 23)) {
    float ff, magic;
    std::memcpy(&ff, &fu, 4);
    std::memcpy(&magic, &denorm_magic_u, 4);
    ff += magic;
    std::memcpy(&fu, &ff, 4);
    o = uint16_t(fu - denorm_magic_u);
  } else {
    const uint32_t mant_odd = (fu >> 13) & 1;
    fu -= uint32_t(127 - 15) << 23;  // rebias the exponent
    fu += 0xfffu + mant_odd;         // round to nearest even at bit 13
    o = uint16_t(fu >> 13);
  }
  return uint16_t(o | (sign >> 16));
}
#endif

}  // namespace dllmq
