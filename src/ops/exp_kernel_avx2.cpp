// exp_shifted_sum on AVX2 + FMA (ops/exp_sum.h): two vectors of 4 doubles per step, lanes 0-3
// and 4-7 of the 8 partial sums. Compiled with AVX2/FMA flags in this file only; called only
// where cpu_isa.h finds them.
#include <immintrin.h>

#include "ops/exp_constants.h"
#include "ops/exp_kernel.h"

namespace dllmq::kern {
namespace {

struct V256x2 {
  struct D {
    __m256d a, b;
  };
  static D load(const double* p) { return {_mm256_loadu_pd(p), _mm256_loadu_pd(p + 4)}; }
  static void store(double* p, D v) {
    _mm256_storeu_pd(p, v.a);
    _mm256_storeu_pd(p + 4, v.b);
  }
  static D set1(double x) { return {_mm256_set1_pd(x), _mm256_set1_pd(x)}; }
  static D add(D x, D y) { return {_mm256_add_pd(x.a, y.a), _mm256_add_pd(x.b, y.b)}; }
  static D sub(D x, D y) { return {_mm256_sub_pd(x.a, y.a), _mm256_sub_pd(x.b, y.b)}; }
  static D mul(D x, D y) { return {_mm256_mul_pd(x.a, y.a), _mm256_mul_pd(x.b, y.b)}; }
  static D fma(D x, D y, D z) {
    return {_mm256_fmadd_pd(x.a, y.a, z.a), _mm256_fmadd_pd(x.b, y.b, z.b)};
  }
  static D round(D x) {
    constexpr int kMode = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    return {_mm256_round_pd(x.a, kMode), _mm256_round_pd(x.b, kMode)};
  }
  static __m256d pow2_half(__m256d k) {
    const __m256i b = _mm256_castpd_si256(_mm256_add_pd(k, _mm256_set1_pd(exp_c::kMagic)));
    return _mm256_castsi256_pd(
        _mm256_slli_epi64(_mm256_add_epi64(b, _mm256_set1_epi64x(1023)), 52));
  }
  static D pow2(D k) { return {pow2_half(k.a), pow2_half(k.b)}; }
  static D from_f32_neg(const float* p) {
    const __m256d z = _mm256_setzero_pd();
    return {_mm256_sub_pd(z, _mm256_cvtps_pd(_mm_loadu_ps(p))),
            _mm256_sub_pd(z, _mm256_cvtps_pd(_mm_loadu_ps(p + 4)))};
  }
  static D from_f32(const float* p) {
    return {_mm256_cvtps_pd(_mm_loadu_ps(p)), _mm256_cvtps_pd(_mm_loadu_ps(p + 4))};
  }
  static D from_f32_sub(const float* p, float m) {
    const __m128 mv = _mm_set1_ps(m);
    return {_mm256_cvtps_pd(_mm_sub_ps(_mm_loadu_ps(p), mv)),
            _mm256_cvtps_pd(_mm_sub_ps(_mm_loadu_ps(p + 4), mv))};
  }
  static D store_f32(float* p, D e) {
    const __m128 a = _mm256_cvtpd_ps(e.a), b = _mm256_cvtpd_ps(e.b);
    _mm_storeu_ps(p, a);
    _mm_storeu_ps(p + 4, b);
    return {_mm256_cvtps_pd(a), _mm256_cvtps_pd(b)};
  }
  static D max(D x, D y) { return {_mm256_max_pd(x.a, y.a), _mm256_max_pd(x.b, y.b)}; }
  static void silu_store(float* g, D e, const float* up) {
    const __m256 ef = _mm256_set_m128(_mm256_cvtpd_ps(e.b), _mm256_cvtpd_ps(e.a));
    const __m256 den = _mm256_add_ps(_mm256_set1_ps(1.0f), ef);
    _mm256_storeu_ps(g, _mm256_mul_ps(_mm256_div_ps(_mm256_loadu_ps(g), den), _mm256_loadu_ps(up)));
  }
  static bool all_in_range(D x, double lo, double hi) {
    const __m256d l = _mm256_set1_pd(lo), h = _mm256_set1_pd(hi);
    const __m256d ok = _mm256_and_pd(
        _mm256_and_pd(_mm256_cmp_pd(x.a, l, _CMP_GE_OQ), _mm256_cmp_pd(x.a, h, _CMP_LE_OQ)),
        _mm256_and_pd(_mm256_cmp_pd(x.b, l, _CMP_GE_OQ), _mm256_cmp_pd(x.b, h, _CMP_LE_OQ)));
    return _mm256_movemask_pd(ok) == 0xf;
  }
};

}  // namespace
}  // namespace dllmq::kern

#include "ops/exp_kernel_impl.h"

namespace dllmq::kern {

double exp_sum_avx2(const double* l, int n, double m, double* out) {
  return exp_sum_impl<V256x2>(l, n, m, out);
}

void silu_mul_avx2(float* gate, const float* up, size_t n) {
  silu_mul_impl<V256x2>(gate, up, n);
}

float max_f32_avx2(const float* s, int n) {
  return max_f32_impl<V256x2>(s, n);
}

double exp_sub_f32_avx2(float* s, int n, float m) {
  return exp_sub_f32_impl<V256x2>(s, n, m);
}

}  // namespace dllmq::kern
