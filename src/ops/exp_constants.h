// The constants of ops/exp_sum.h's exp and its scalar form, shared by every instruction set's
// kernel (exp_kernel_impl.h) and the portable path, so that all compute each term alike. The
// functions have internal linkage: each file compiled with its own target flags keeps its own
// copy, so the linker cannot hand a portable caller one compiled for AVX-512.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace dllmq::kern::exp_c {

inline constexpr double kLo = -708.0;  // 2^k stays a normal double: k >= -1022
inline constexpr double kHi = 708.0;
inline constexpr double kInvLn2 = 1.4426950408889634074;
// ln 2 in two parts: kLn2Hi has its low 11 bits zero, so k * kLn2Hi is exact for |k| <= 1022.
inline constexpr double kLn2Hi = 6.93147180369123816490e-01;
inline constexpr double kLn2Lo = 1.90821492927058770002e-10;
// 1 / i!, i = 0 .. 13: the Taylor polynomial of exp on |r| <= ln(2) / 2, whose truncation error
// (r^14 / 14! < 5e-18) is below half an ulp.
inline constexpr double kC[14] = {1.0,
                                  1.0,
                                  1.0 / 2,
                                  1.0 / 6,
                                  1.0 / 24,
                                  1.0 / 120,
                                  1.0 / 720,
                                  1.0 / 5040,
                                  1.0 / 40320,
                                  1.0 / 362880,
                                  1.0 / 3628800,
                                  1.0 / 39916800,
                                  1.0 / 479001600,
                                  1.0 / 6227020800.0};
// k + 1.5 * 2^52 holds the integer k in its low mantissa bits (|k| < 2^51).
inline constexpr double kMagic = 6755399441055744.0;

namespace {

// 2^k for an integer-valued double k in [-1022, 1023]: the low 12 bits of k's magic form, plus the
// exponent bias, shifted into the exponent field (the higher bits shift out).
inline double pow2_scalar(double k) {
  const double t = k + kMagic;
  uint64_t b;
  std::memcpy(&b, &t, 8);
  b = (b + 1023) << 52;
  double r;
  std::memcpy(&r, &b, 8);
  return r;
}

// One term, the scalar twin of the vector lanes (the same operations in the same order).
inline double exp_scalar(double x) {
  if (!(x >= kLo && x <= kHi)) return std::exp(x);
  const double k = std::nearbyint(x * kInvLn2);
  double r = std::fma(k, -kLn2Hi, x);
  r = std::fma(k, -kLn2Lo, r);
  double p = kC[13];
  for (int i = 12; i >= 0; --i) p = std::fma(p, r, kC[i]);
  return p * pow2_scalar(k);
}

}  // namespace

}  // namespace dllmq::kern::exp_c
