// exp_shifted_sum on AVX-512 (ops/exp_sum.h): one vector of 8 doubles per step. Compiled with
// AVX-512 F/DQ flags in this file only; called only where cpu_isa.h finds them.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC bug 105593 in avx512fintrin.h
#include <immintrin.h>

#include "ops/exp_constants.h"
#include "ops/exp_kernel.h"

namespace dllmq::kern {
namespace {

struct V512 {
  using D = __m512d;
  static D load(const double* p) { return _mm512_loadu_pd(p); }
  static void store(double* p, D v) { _mm512_storeu_pd(p, v); }
  static D set1(double x) { return _mm512_set1_pd(x); }
  static D add(D a, D b) { return _mm512_add_pd(a, b); }
  static D sub(D a, D b) { return _mm512_sub_pd(a, b); }
  static D mul(D a, D b) { return _mm512_mul_pd(a, b); }
  static D fma(D a, D b, D c) { return _mm512_fmadd_pd(a, b, c); }
  static D round(D a) {
    return _mm512_roundscale_pd(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static D pow2(D k) {
    const __m512i b = _mm512_castpd_si512(_mm512_add_pd(k, _mm512_set1_pd(exp_c::kMagic)));
    return _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_add_epi64(b, _mm512_set1_epi64(1023)), 52));
  }
  static D from_f32_neg(const float* p) {
    return _mm512_sub_pd(_mm512_setzero_pd(), _mm512_cvtps_pd(_mm256_loadu_ps(p)));
  }
  static D from_f32(const float* p) { return _mm512_cvtps_pd(_mm256_loadu_ps(p)); }
  static D from_f32_sub(const float* p, float m) {
    return _mm512_cvtps_pd(_mm256_sub_ps(_mm256_loadu_ps(p), _mm256_set1_ps(m)));
  }
  static D store_f32(float* p, D e) {
    const __m256 f = _mm512_cvtpd_ps(e);
    _mm256_storeu_ps(p, f);
    return _mm512_cvtps_pd(f);
  }
  static D max(D a, D b) { return _mm512_max_pd(a, b); }
  static void silu_store(float* g, D e, const float* up) {
    const __m256 ef = _mm512_cvtpd_ps(e);
    const __m256 den = _mm256_add_ps(_mm256_set1_ps(1.0f), ef);
    _mm256_storeu_ps(g, _mm256_mul_ps(_mm256_div_ps(_mm256_loadu_ps(g), den), _mm256_loadu_ps(up)));
  }
  static bool all_in_range(D x, double lo, double hi) {
    const __mmask8 ok = _mm512_cmp_pd_mask(x, _mm512_set1_pd(lo), _CMP_GE_OQ) &
                        _mm512_cmp_pd_mask(x, _mm512_set1_pd(hi), _CMP_LE_OQ);
    return ok == 0xff;
  }
};

}  // namespace
}  // namespace dllmq::kern

#include "ops/exp_kernel_impl.h"

namespace dllmq::kern {

double exp_sum_avx512(const double* l, int n, double m, double* out) {
  return exp_sum_impl<V512>(l, n, m, out);
}

void silu_mul_avx512(float* gate, const float* up, size_t n) {
  silu_mul_impl<V512>(gate, up, n);
}

float max_f32_avx512(const float* s, int n) {
  return max_f32_impl<V512>(s, n);
}

double exp_sub_f32_avx512(float* s, int n, float m) {
  return exp_sub_f32_impl<V512>(s, n, m);
}

}  // namespace dllmq::kern
