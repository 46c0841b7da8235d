// The AVX2 + FMA + F16C vector traits (8 floats per vector) that the kernels written once for
// every width instantiate: the packed-weight GEMM (ops/packed_kernel_impl.h) and the KV codes'
// dequantization (quant/dequant_kernel_impl.h). Include it only from files compiled with
// -mavx2 -mfma -mf16c (CMakeLists.txt), which run only where cpu_isa.h finds those features.
// Internal linkage (an anonymous namespace): each such file gets its own copy, so no function
// compiled for AVX2 can be picked by the linker for a portable caller.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace dllmq::kern {
namespace {

struct Avx2 {
  static constexpr int W = 8;
  static constexpr int MR = 6;
  // The packed kernels' k loop (ops/packed_kernel_impl.h, outer()): turns of 32 k between walks of
  // the next group's prefetch, unrolled by the compiler (Zen 4: turns of 8 and 16 measured 1-3
  // points of the FMA peak below 32, about the noise).
  static constexpr int kStepsPerWalk = 32;
  static constexpr bool kPeelTurns = false;
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

  // ---- for the dequantization kernels (quant/dequant_kernel_impl.h) ----
  // 8 one-byte codes zero-extended to int32.
  static inline __attribute__((always_inline)) RI widen_u8(const uint8_t* p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  static inline __attribute__((always_inline)) RI set1i(int v) { return _mm256_set1_epi32(v); }
  static inline __attribute__((always_inline)) RI andi(RI a, RI b) {
    return _mm256_and_si256(a, b);
  }
  static inline __attribute__((always_inline)) RI srl(RI a, int n) {
    return _mm256_srl_epi32(a, _mm_cvtsi32_si128(n));
  }
  // A table of 16 floats in two registers: permutevar8x32 reads the low 3 bits
  // of each index and bit 3 picks the register (blendv looks at the sign bit, hence << 28).
  struct Table {
    R lo, hi;
  };
  static inline __attribute__((always_inline)) Table table16(const float* t) {
    return {_mm256_loadu_ps(t), _mm256_loadu_ps(t + 8)};
  }
  // t[idx] for indices below 2^bits (bits <= 4).
  static inline __attribute__((always_inline)) R lookup16(const Table& t, RI idx, int bits) {
    const R from_lo = _mm256_permutevar8x32_ps(t.lo, idx);
    if (bits < 4) return from_lo;
    const R from_hi = _mm256_permutevar8x32_ps(t.hi, idx);
    return _mm256_blendv_ps(from_lo, from_hi, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
  }
  static inline __attribute__((always_inline)) R gather(const float* t, RI idx) {
    return _mm256_i32gather_ps(t, idx, 4);
  }
};

}  // namespace
}  // namespace dllmq::kern
