// The AVX-512 (F, BW, VL, DQ) + FMA + F16C vector traits (16 floats per vector) that the kernels
// written once for every width instantiate: the packed-weight GEMM (ops/packed_kernel_impl.h) and
// the KV codes' dequantization (quant/dequant_kernel_impl.h). Include it only from files compiled
// with those flags (CMakeLists.txt), which run only where cpu_isa.h finds the features. Internal
// linkage (an anonymous namespace): each such file gets its own copy, so no function compiled for
// AVX-512 can be picked by the linker for a portable caller.
#pragma once

// GCC 12 flags the deliberately undefined registers inside avx512fintrin.h's own intrinsics as
// maybe-uninitialized (GCC bug 105593) once they inline.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

namespace dllmq::kern {
namespace {

struct Avx512 {
  static constexpr int W = 16;
  static constexpr int MR = 12;  // rows of a full tile (packed_kernel_avx512.cpp)
  // The packed kernels' k loop (ops/packed_kernel_impl.h, outer()): four k a turn, peeled by hand,
  // the next group's prefetch walked once a turn (the form measured on the Xeon).
  static constexpr int kStepsPerWalk = 4;
  static constexpr bool kPeelTurns = true;
  using R = __m512;
  using RI = __m512i;
  static inline __attribute__((always_inline)) R zero() { return _mm512_setzero_ps(); }
  static inline __attribute__((always_inline)) R bcast(const float* p) {
    return _mm512_set1_ps(*p);
  }
  static inline __attribute__((always_inline)) R fma(R a, R b, R c) {
    return _mm512_fmadd_ps(a, b, c);
  }
  static inline __attribute__((always_inline)) R load(const float* p) { return _mm512_loadu_ps(p); }
  static inline __attribute__((always_inline)) void store(float* p, R v) { _mm512_storeu_ps(p, v); }
  // 32 bf16 as 16 pairs: the low halves (columns 0..15) shifted up, the high ones masked.
  static inline __attribute__((always_inline)) void bf16_pair(const uint16_t* p, R& lo, R& hi) {
    const __m512i v = _mm512_loadu_si512(p);
    lo = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    hi = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(-65536)));
  }
  static inline __attribute__((always_inline)) R f16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static inline __attribute__((always_inline)) RI loadi(const int32_t* p) {
    return _mm512_loadu_si512(p);
  }
  // 32 one-byte codes: bytes 0..15 and 16..31 zero-extended to int32.
  static inline __attribute__((always_inline)) void codes8(const unsigned char* p, RI& lo, RI& hi) {
    lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    hi = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)));
  }
  // 32 nibbles in 16 bytes: low nibbles are columns 0..15, high ones 16..31.
  static inline __attribute__((always_inline)) void codes4(const unsigned char* p, RI& lo, RI& hi) {
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    lo = _mm512_and_si512(v, _mm512_set1_epi32(15));
    hi = _mm512_srli_epi32(v, 4);
  }
  // 32 signed one-byte codes (q - z), sign-extended.
  static inline __attribute__((always_inline)) void codes8s(const unsigned char* p, RI& lo,
                                                            RI& hi) {
    lo = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    hi = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)));
  }
  // 32 signed nibbles in 16 bytes: each byte sign-extended, the high nibble by an arithmetic
  // shift, the low one shifted to the top first.
  static inline __attribute__((always_inline)) void codes4s(const unsigned char* p, RI& lo,
                                                            RI& hi) {
    const __m512i v = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    lo = _mm512_srai_epi32(_mm512_slli_epi32(v, 28), 28);
    hi = _mm512_srai_epi32(v, 4);
  }
  static inline __attribute__((always_inline)) RI subi(RI a, RI b) {
    return _mm512_sub_epi32(a, b);
  }
  static inline __attribute__((always_inline)) R cvt(RI a) { return _mm512_cvtepi32_ps(a); }
  // Nearest bf16, ties to even (finite values), as round_to_bf16 in ops/linear.h.
  static inline __attribute__((always_inline)) R round_bf16(R x) {
    const __m512i u = _mm512_castps_si512(x);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), odd);
    return _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32(-65536)));
  }

  // ---- for the dequantization kernels (quant/dequant_kernel_impl.h) ----
  // 16 one-byte codes zero-extended to int32.
  static inline __attribute__((always_inline)) RI widen_u8(const uint8_t* p) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static inline __attribute__((always_inline)) RI set1i(int v) { return _mm512_set1_epi32(v); }
  static inline __attribute__((always_inline)) RI andi(RI a, RI b) {
    return _mm512_and_si512(a, b);
  }
  static inline __attribute__((always_inline)) RI srl(RI a, int n) {
    return _mm512_srl_epi32(a, _mm_cvtsi32_si128(n));
  }
  // A table of 16 floats in one register.
  struct Table {
    R v;
  };
  static inline __attribute__((always_inline)) Table table16(const float* t) {
    return {_mm512_loadu_ps(t)};
  }
  // t[idx] for indices below 2^bits (bits <= 4).
  static inline __attribute__((always_inline)) R lookup16(const Table& t, RI idx, int) {
    return _mm512_permutexvar_ps(idx, t.v);
  }
  static inline __attribute__((always_inline)) R gather(const float* t, RI idx) {
    return _mm512_i32gather_ps(idx, t, 4);
  }
};

}  // namespace
}  // namespace dllmq::kern
