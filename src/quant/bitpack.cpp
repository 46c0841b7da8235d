#include "quant/bitpack.h"

// GCC 12 flags the deliberately undefined registers inside avx512fintrin.h's own intrinsics as
// maybe-uninitialized (GCC bug 105593) once they inline here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "quant/dequant_isa.h"
#include "quant/uniform.h"
#include "util/error.h"

namespace dllmq {
namespace {

// Codes per chunk of the b = 3 bit stream in the scalar kernel: 64 * 3 bits = 24 whole bytes.
constexpr int kBits3Block = 64;
// The largest chunk: 16 bytes of 2-bit codes.
constexpr int kMaxChunkCodes = 64;

void check_bits(const char* what, int bits) {
  if (!valid_quant_bits(bits)) fail("{}: unsupported bits {} (2, 3, 4 or 8)", what, bits);
}

// Codes of one plane-split chunk (m codes, w bytes wide) into codes[0..m).
void unpack_chunk(const uint8_t* p, int m, int w, int bits, uint8_t* codes) {
  const int k = 8 / bits;
  const unsigned mask = (1u << bits) - 1;
  for (int i = 0; i < k; ++i) {
    const int lim = std::min(w, m - i * w);
    for (int j = 0; j < lim; ++j) codes[i * w + j] = (p[j] >> (bits * i)) & mask;
  }
}

// Codes [0, m) of a 3-bit stream that starts at a byte boundary.
void unpack_bits3(const uint8_t* p, int m, uint8_t* codes) {
  for (int i = 0; i < m; ++i) {
    const int bit = 3 * i;
    unsigned v = p[bit >> 3];
    if ((bit & 7) > 5) v |= static_cast<unsigned>(p[(bit >> 3) + 1]) << 8;
    codes[i] = (v >> (bit & 7)) & 7u;
  }
}

// ---- scalar ------------------------------------------------------------------------------------

// The reference formula every SIMD path must reproduce bit for bit:
//   uniform: fma(code, a[g], b[g]);  lut: fma(lut[code], a[g], b[g]);  g = c / group.
template <bool kLut>
void apply_scalar(const uint8_t* codes, int c0, int m, const float* lut, const float* a,
                  const float* b, int group, float* out) {
  // The group index advances with a running boundary instead of a division per element.
  int g = c0 / group;
  int next = (g + 1) * group;
  for (int t = 0; t < m; ++t) {
    const int c = c0 + t;
    if (c == next) {
      ++g;
      next += group;
    }
    const float v = kLut ? lut[codes[t]] : static_cast<float>(codes[t]);
    out[c] = std::fmaf(v, a[g], b[g]);
  }
}

// One plane-split chunk (codes s .. s + m, w bytes at p) through the scalar formula.
template <bool kLut>
void chunk_scalar(const uint8_t* p, int s, int m, int w, int bits, const float* lut, const float* a,
                  const float* b, int group, float* out) {
  uint8_t codes[kMaxChunkCodes];
  unpack_chunk(p, m, w, bits, codes);
  apply_scalar<kLut>(codes, s, m, lut, a, b, group, out);
}

// The codes of plane i of a chunk whose plane run is only partly filled.
template <bool kLut>
void plane_scalar(const uint8_t* p, int c0, int valid, int shift, int bits, const float* lut,
                  const float* a, const float* b, int group, float* out) {
  uint8_t codes[16];
  const unsigned mask = (1u << bits) - 1;
  for (int j = 0; j < valid; ++j) codes[j] = (p[j] >> shift) & mask;
  apply_scalar<kLut>(codes, c0, valid, lut, a, b, group, out);
}

template <bool kLut>
void dequant_scalar(const uint8_t* packed, int n, int bits, const float* lut, const float* a,
                    const float* b, int group, float* out) {
  uint8_t codes[kMaxChunkCodes];
  if (bits == 3) {
    for (int s = 0; s < n; s += kBits3Block) {
      const int m = std::min(kBits3Block, n - s);
      unpack_bits3(packed + s / 8 * 3, m, codes);
      apply_scalar<kLut>(codes, s, m, lut, a, b, group, out);
    }
    return;
  }
  const int k = 8 / bits;
  const uint8_t* p = packed;
  for (int s = 0; s < n; s += 16 * k) {
    const int m = std::min(16 * k, n - s);
    const int w = (m + k - 1) / k;
    chunk_scalar<kLut>(p, s, m, w, bits, lut, a, b, group, out);
    p += w;
  }
}

// ---- AVX2
// ---------------------------------------------------------------------------------------- Helpers
// carry only "avx2,fma" so they can inline into both the AVX2 and the AVX-512 kernels.

// Parameters of the 8 outputs c .. c + 7: per lane (group 1), one broadcast pair when they share
// a group, else gathered lane by lane.
__attribute__((target("avx2,fma"))) inline void params8(const float* a, const float* b, int group,
                                                        int n, int c, __m256* va, __m256* vb) {
  if (group == 1) {
    *va = _mm256_loadu_ps(a + c);
    *vb = _mm256_loadu_ps(b + c);
    return;
  }
  if (group >= n) {
    *va = _mm256_set1_ps(a[0]);
    *vb = _mm256_set1_ps(b[0]);
    return;
  }
  const int g0 = c / group;
  if (group % 8 == 0 || g0 == (c + 7) / group) {  // c is a multiple of 8
    *va = _mm256_set1_ps(a[g0]);
    *vb = _mm256_set1_ps(b[g0]);
    return;
  }
  alignas(32) float ta[8], tb[8];
  for (int l = 0; l < 8; ++l) {
    ta[l] = a[(c + l) / group];
    tb[l] = b[(c + l) / group];
  }
  *va = _mm256_load_ps(ta);
  *vb = _mm256_load_ps(tb);
}

// lut[codes] for 8 lanes: 16 entries live in two registers; permutevar8x32 reads the low 3 bits
// of each index and bit 3 picks the register (blendv looks at the sign bit, hence << 28).
__attribute__((target("avx2,fma"))) inline __m256 lut8(__m256i codes, int bits, __m256 lo,
                                                       __m256 hi, const float* lut) {
  if (bits > 4) return _mm256_i32gather_ps(lut, codes, 4);
  const __m256 from_lo = _mm256_permutevar8x32_ps(lo, codes);
  if (bits < 4) return from_lo;
  const __m256 from_hi = _mm256_permutevar8x32_ps(hi, codes);
  return _mm256_blendv_ps(from_lo, from_hi, _mm256_castsi256_ps(_mm256_slli_epi32(codes, 28)));
}

template <bool kLut>
__attribute__((target("avx2,fma"))) inline void run8(__m256i codes, int c, int bits,
                                                     const float* lut, __m256 lut_lo, __m256 lut_hi,
                                                     const float* a, const float* b, int group,
                                                     int n, float* out) {
  __m256 va, vb;
  params8(a, b, group, n, c, &va, &vb);
  const __m256 v = kLut ? lut8(codes, bits, lut_lo, lut_hi, lut) : _mm256_cvtepi32_ps(codes);
  _mm256_storeu_ps(out + c, _mm256_fmadd_ps(v, va, vb));
}

// A chunk of w = 8 bytes: one 8-lane run per shift.
template <bool kLut>
__attribute__((target("avx2,fma"))) inline void chunk8_avx2(const uint8_t* p, int s, int m,
                                                            int bits, const float* lut,
                                                            __m256 lut_lo, __m256 lut_hi,
                                                            const float* a, const float* b,
                                                            int group, int n, float* out) {
  const int k = 8 / bits;
  const __m256i mask = _mm256_set1_epi32((1 << bits) - 1);
  const __m256i raw = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  for (int i = 0; i < k; ++i) {
    const int c = s + i * 8;
    const int valid = std::min(8, m - i * 8);
    if (valid == 8) {
      const __m128i sh = _mm_cvtsi32_si128(bits * i);
      const __m256i codes = _mm256_and_si256(_mm256_srl_epi32(raw, sh), mask);
      run8<kLut>(codes, c, bits, lut, lut_lo, lut_hi, a, b, group, n, out);
    } else if (valid > 0) {
      plane_scalar<kLut>(p, c, valid, bits * i, bits, lut, a, b, group, out);
    }
  }
}

// kBits is 2, 4 or 8 (b = 3 goes to the scalar kernel); a compile-time width lets the plane
// loop unroll with constant shifts.
template <bool kLut, int kBits>
__attribute__((target("avx2,fma,f16c"))) void dequant_avx2(const uint8_t* packed, int n,
                                                           const float* lut, const float* a,
                                                           const float* b, int group, float* out) {
  constexpr int bits = kBits;
  alignas(32) float table[16] = {};
  if (kLut && bits <= 4) std::memcpy(table, lut, sizeof(float) << bits);
  const __m256 lut_lo = _mm256_load_ps(table), lut_hi = _mm256_load_ps(table + 8);
  const int k = 8 / bits;
  const __m256i mask = _mm256_set1_epi32((1 << bits) - 1);
  const uint8_t* p = packed;
  for (int s = 0; s < n; s += 16 * k) {
    const int m = std::min(16 * k, n - s);
    const int w = (m + k - 1) / k;
    if (w == 16) {
      const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      const __m256i lo = _mm256_cvtepu8_epi32(raw);
      const __m256i hi = _mm256_cvtepu8_epi32(_mm_srli_si128(raw, 8));
      for (int i = 0; i < k; ++i) {
        const int c = s + i * 16;
        const int valid = std::min(16, m - i * 16);
        if (valid == 16) {
          const __m128i sh = _mm_cvtsi32_si128(bits * i);
          const __m256i c_lo = _mm256_and_si256(_mm256_srl_epi32(lo, sh), mask);
          const __m256i c_hi = _mm256_and_si256(_mm256_srl_epi32(hi, sh), mask);
          run8<kLut>(c_lo, c, bits, lut, lut_lo, lut_hi, a, b, group, n, out);
          run8<kLut>(c_hi, c + 8, bits, lut, lut_lo, lut_hi, a, b, group, n, out);
        } else if (valid > 0) {
          plane_scalar<kLut>(p, c, valid, bits * i, bits, lut, a, b, group, out);
        }
      }
    } else if (w == 8) {
      chunk8_avx2<kLut>(p, s, m, bits, lut, lut_lo, lut_hi, a, b, group, n, out);
    } else {
      chunk_scalar<kLut>(p, s, m, w, bits, lut, a, b, group, out);
    }
    p += w;
  }
}

// ---- AVX-512
// -------------------------------------------------------------------------------------

__attribute__((target("avx512f,avx512bw,avx512vl,fma"))) inline void params16(
    const float* a, const float* b, int group, int n, int c, __m512* va, __m512* vb) {
  if (group == 1) {
    *va = _mm512_loadu_ps(a + c);
    *vb = _mm512_loadu_ps(b + c);
    return;
  }
  if (group >= n) {
    *va = _mm512_set1_ps(a[0]);
    *vb = _mm512_set1_ps(b[0]);
    return;
  }
  const int g0 = c / group;
  if (group % 16 == 0 || g0 == (c + 15) / group) {  // c is a multiple of 16
    *va = _mm512_set1_ps(a[g0]);
    *vb = _mm512_set1_ps(b[g0]);
    return;
  }
  alignas(64) float ta[16], tb[16];
  for (int l = 0; l < 16; ++l) {
    ta[l] = a[(c + l) / group];
    tb[l] = b[(c + l) / group];
  }
  *va = _mm512_load_ps(ta);
  *vb = _mm512_load_ps(tb);
}

template <bool kLut, int kBits>
__attribute__((target("avx512f,avx512bw,avx512vl,fma"))) void dequant_avx512(
    const uint8_t* packed, int n, const float* lut, const float* a, const float* b, int group,
    float* out) {
  constexpr int bits = kBits;
  alignas(64) float table[16] = {};
  if (kLut && bits <= 4) std::memcpy(table, lut, sizeof(float) << bits);
  const __m512 lut16 = _mm512_load_ps(table);
  const __m256 lut_lo = _mm256_load_ps(table), lut_hi = _mm256_load_ps(table + 8);
  const int k = 8 / bits;
  const __m512i mask = _mm512_set1_epi32((1 << bits) - 1);
  const uint8_t* p = packed;
  for (int s = 0; s < n; s += 16 * k) {
    const int m = std::min(16 * k, n - s);
    const int w = (m + k - 1) / k;
    if (w == 16) {
      const __m512i raw =
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      for (int i = 0; i < k; ++i) {
        const int c = s + i * 16;
        const int valid = std::min(16, m - i * 16);
        if (valid == 16) {
          const __m512i codes =
              _mm512_and_si512(_mm512_srl_epi32(raw, _mm_cvtsi32_si128(bits * i)), mask);
          __m512 va, vb;
          params16(a, b, group, n, c, &va, &vb);
          __m512 v;
          if (!kLut) {
            v = _mm512_cvtepi32_ps(codes);
          } else if (bits <= 4) {
            v = _mm512_permutexvar_ps(codes, lut16);
          } else {
            v = _mm512_i32gather_ps(codes, lut, 4);
          }
          _mm512_storeu_ps(out + c, _mm512_fmadd_ps(v, va, vb));
        } else if (valid > 0) {
          plane_scalar<kLut>(p, c, valid, bits * i, bits, lut, a, b, group, out);
        }
      }
    } else if (w == 8) {
      chunk8_avx2<kLut>(p, s, m, bits, lut, lut_lo, lut_hi, a, b, group, n, out);
    } else {
      chunk_scalar<kLut>(p, s, m, w, bits, lut, a, b, group, out);
    }
    p += w;
  }
}

// ---- dispatch
// ------------------------------------------------------------------------------------

// Runs the kernel of `isa` (which the caller has checked the CPU supports).
template <bool kLut>
void dequant_row(Isa isa, const uint8_t* packed, int n, int bits, const float* lut, const float* a,
                 const float* b, int group, float* out) {
  if (isa == Isa::kScalar || bits == 3) {
    dequant_scalar<kLut>(packed, n, bits, lut, a, b, group, out);
  } else if (isa == Isa::kAvx512) {
    if (bits == 2) dequant_avx512<kLut, 2>(packed, n, lut, a, b, group, out);
    if (bits == 4) dequant_avx512<kLut, 4>(packed, n, lut, a, b, group, out);
    if (bits == 8) dequant_avx512<kLut, 8>(packed, n, lut, a, b, group, out);
  } else {
    if (bits == 2) dequant_avx2<kLut, 2>(packed, n, lut, a, b, group, out);
    if (bits == 4) dequant_avx2<kLut, 4>(packed, n, lut, a, b, group, out);
    if (bits == 8) dequant_avx2<kLut, 8>(packed, n, lut, a, b, group, out);
  }
}

// DLLMQ_QUANT_ISA (kept from before the shared switch) overrides DLLMQ_ISA for the dequantization
// kernels alone; otherwise they follow the engine's dispatch (util/cpu_isa.h).
Isa select_isa() {
  const char* env = std::getenv("DLLMQ_QUANT_ISA");
  if (env != nullptr && *env != '\0') return parse_isa("DLLMQ_QUANT_ISA", env);
  return dispatch_isa();
}

// Chosen on first use; a bad DLLMQ_QUANT_ISA throws on every call since the static stays unset.
Isa active_isa() {
  static const Isa isa = select_isa();
  return isa;
}

void check_dequant_args(const char* what, int n, int bits, int group) {
  check_bits(what, bits);
  if (n < 0) fail("{}: negative row length {}", what, n);
  if (group < 1) fail("{}: group {} must be >= 1", what, group);
}

}  // namespace

size_t packed_row_bytes(int n, int bits) {
  return (static_cast<size_t>(n) * static_cast<size_t>(bits) + 7) / 8;
}

void pack_codes(const uint8_t* codes, int n, int bits, uint8_t* packed) {
  check_bits("pack_codes", bits);
  if (n < 0) fail("pack_codes: negative row length {}", n);
  const unsigned mask = (1u << bits) - 1;
  if (bits == 3) {
    std::memset(packed, 0, packed_row_bytes(n, bits));
    for (int i = 0; i < n; ++i) {
      assert(codes[i] <= mask);
      const int bit = 3 * i;
      const unsigned v = (codes[i] & mask) << (bit & 7);
      packed[bit >> 3] |= static_cast<uint8_t>(v);
      if ((bit & 7) > 5) packed[(bit >> 3) + 1] |= static_cast<uint8_t>(v >> 8);
    }
    return;
  }
  const int k = 8 / bits;
  uint8_t* p = packed;
  for (int s = 0; s < n; s += 16 * k) {
    const int m = std::min(16 * k, n - s);
    const int w = (m + k - 1) / k;
    for (int j = 0; j < w; ++j) {
      unsigned byte = 0;
      for (int i = 0; i < k && i * w + j < m; ++i) {
        assert(codes[s + i * w + j] <= mask);
        byte |= (codes[s + i * w + j] & mask) << (bits * i);
      }
      p[j] = static_cast<uint8_t>(byte);
    }
    p += w;
  }
}

void unpack_codes(const uint8_t* packed, int n, int bits, uint8_t* codes) {
  check_bits("unpack_codes", bits);
  if (n < 0) fail("unpack_codes: negative row length {}", n);
  if (bits == 3) {
    unpack_bits3(packed, n, codes);
    return;
  }
  const int k = 8 / bits;
  const uint8_t* p = packed;
  for (int s = 0; s < n; s += 16 * k) {
    const int m = std::min(16 * k, n - s);
    const int w = (m + k - 1) / k;
    unpack_chunk(p, m, w, bits, codes + s);
    p += w;
  }
}

void dequant_uniform_row_isa(Isa isa, const uint8_t* packed, int n, int bits, const float* scale,
                             const float* zero, int group, float* out) {
  check_dequant_args("dequant_uniform_row", n, bits, group);
  if (!isa_available(isa)) fail("dequant_uniform_row: this CPU does not support {}", isa_name(isa));
  dequant_row<false>(isa, packed, n, bits, nullptr, scale, zero, group, out);
}

void dequant_lut_row_isa(Isa isa, const uint8_t* packed, int n, int bits, const float* lut,
                         const float* range, const float* offset, int group, float* out) {
  check_dequant_args("dequant_lut_row", n, bits, group);
  if (!isa_available(isa)) fail("dequant_lut_row: this CPU does not support {}", isa_name(isa));
  dequant_row<true>(isa, packed, n, bits, lut, range, offset, group, out);
}

void dequant_uniform_row(const uint8_t* packed, int n, int bits, const float* scale,
                         const float* zero, int group, float* out) {
  const Isa isa = active_isa();
  check_dequant_args("dequant_uniform_row", n, bits, group);
  dequant_row<false>(isa, packed, n, bits, nullptr, scale, zero, group, out);
}

void dequant_lut_row(const uint8_t* packed, int n, int bits, const float* lut, const float* range,
                     const float* offset, int group, float* out) {
  const Isa isa = active_isa();
  check_dequant_args("dequant_lut_row", n, bits, group);
  dequant_row<true>(isa, packed, n, bits, lut, range, offset, group, out);
}

const char* quant_isa() {
  return isa_name(active_isa());
}

}  // namespace dllmq
