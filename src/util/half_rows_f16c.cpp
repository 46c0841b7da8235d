// The F16C conversions of util/half_rows.h, compiled with AVX2/F16C flags in this file only and
// called only where the CPU has them. Tails go through a zero-padded vector rather than the
// scalar formula, so every value takes the same instruction.
#include <immintrin.h>

#include <cstring>

#include "util/half_rows.h"

namespace dllmq::kern {

void f16_to_f32_f16c(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  if (i < n) {
    alignas(16) uint16_t in[8] = {};
    alignas(32) float out[8];
    std::memcpy(in, src + i, (n - i) * sizeof(uint16_t));
    _mm256_store_ps(out, _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(in))));
    std::memcpy(dst + i, out, (n - i) * sizeof(float));
  }
}

void f32_to_f16_f16c(const float* src, uint16_t* dst, size_t n) {
  constexpr int kNearestEven = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), kNearestEven));
  if (i < n) {
    alignas(32) float in[8] = {};
    alignas(16) uint16_t out[8];
    std::memcpy(in, src + i, (n - i) * sizeof(float));
    _mm_store_si128(reinterpret_cast<__m128i*>(out),
                    _mm256_cvtps_ph(_mm256_load_ps(in), kNearestEven));
    std::memcpy(dst + i, out, (n - i) * sizeof(uint16_t));
  }
}

}  // namespace dllmq::kern
