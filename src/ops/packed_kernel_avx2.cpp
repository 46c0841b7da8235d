// The packed-weight GEMM for AVX2 + FMA + F16C (compiled with -mavx2 -mfma -mf16c only in this
// file; called only where cpu_isa.h says the CPU has them). 8 floats per vector, 16-column
// panels, 6-row tiles: 12 accumulators cover the 4-cycle FMA latency on two FMA pipes, with the
// two widened weight vectors and a broadcast in the 16 registers.
#include <immintrin.h>

#include "ops/packed_kernel.h"
#include "ops/packed_kernel_impl.h"

namespace dllmq::kern {
namespace {

struct Avx2 {
  static constexpr int W = 8;
  static constexpr int MR = 6;
  using R = __m256;
  using RI = __m256i;
  static inline __attribute__((always_inline)) R zero() { return _mm256_setzero_ps(); }
  static inline __attribute__((always_inline)) R bcast(const float* p) {
    return _mm256_broadcast_ss(p);
  }
  static inline __attribute__((always_inline)) R fma(R a, R b, R c) {
    return _mm256_fmadd_ps(a, b, c);
  }
  static inline __attribute__((always_inline)) R load(const float* p) { return _mm256_loadu_ps(p); }
  static inline __attribute__((always_inline)) void store(float* p, R v) { _mm256_storeu_ps(p, v); }
  // 16 bf16 as 8 pairs: the low halves (columns 0..7) shifted up, the high ones masked.
  static inline __attribute__((always_inline)) void bf16_pair(const uint16_t* p, R& lo, R& hi) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    lo = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    hi = _mm256_and_ps(_mm256_castsi256_ps(v), _mm256_castsi256_ps(_mm256_set1_epi32(-65536)));
  }
  static inline __attribute__((always_inline)) R f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static inline __attribute__((always_inline)) RI loadi(const int32_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  // 16 one-byte codes: bytes 0..7 and 8..15 zero-extended to int32.
  static inline __attribute__((always_inline)) void codes8(const unsigned char* p, RI& lo, RI& hi) {
    lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    hi = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8)));
  }
  // 16 nibbles in 8 bytes: low nibbles are columns 0..7, high ones 8..15.
  static inline __attribute__((always_inline)) void codes4(const unsigned char* p, RI& lo, RI& hi) {
    const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    lo = _mm256_and_si256(v, _mm256_set1_epi32(15));
    hi = _mm256_srli_epi32(v, 4);
  }
  // 16 signed one-byte codes (q - z), sign-extended.
  static inline __attribute__((always_inline)) void codes8s(const unsigned char* p, RI& lo,
                                                            RI& hi) {
    lo = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    hi = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8)));
  }
  // 16 signed nibbles in 8 bytes: each byte sign-extended, the high nibble by an arithmetic
  // shift, the low one shifted to the top first.
  static inline __attribute__((always_inline)) void codes4s(const unsigned char* p, RI& lo,
                                                            RI& hi) {
    const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    lo = _mm256_srai_epi32(_mm256_slli_epi32(v, 28), 28);
    hi = _mm256_srai_epi32(v, 4);
  }
  static inline __attribute__((always_inline)) RI subi(RI a, RI b) {
    return _mm256_sub_epi32(a, b);
  }
  static inline __attribute__((always_inline)) R cvt(RI a) { return _mm256_cvtepi32_ps(a); }
  // Nearest bf16, ties to even (finite values), as round_to_bf16 in ops/linear.h.
  static inline __attribute__((always_inline)) R round_bf16(R x) {
    const __m256i u = _mm256_castps_si256(x);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), odd);
    return _mm256_castsi256_ps(_mm256_and_si256(r, _mm256_set1_epi32(-65536)));
  }
};

}  // namespace

void gemm_avx2(const GemmArgs& a) {
  run_gemm<Avx2>(a);
}

float fma_burn_avx2(long iters, float seed) {
  return fma_burn<Avx2, 12>(iters, seed);
}

}  // namespace dllmq::kern
