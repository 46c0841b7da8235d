// The int8-activation kernel on AVX-512 VNNI (compiled with those flags only in this file; called
// only where int8_act_vnni() says the CPU has them). Tiles of up to 4 rows x 4 panels (64
// columns): 16 int32 accumulators, 4 weight vectors (8 for nibbles) and a broadcast, in 26 of
// the 32 registers. Per k quad, each row's 4 activation bytes are broadcast and vpdpbusd adds
// 4 u8 x s8 products into each column's int32 lane. At a group's end the sums are corrected,
// converted, scaled and folded into y (kept in memory between groups: once per 128 k at least).
// GCC 12 flags the deliberately undefined registers inside avx512fintrin.h (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "ops/int8_act_kernel.h"

namespace dllmq::kern {

namespace {

inline __m512i bcast4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

template <int BITS, int R, int P>
void tile(const I8Args& a, int r0, int p, __mmask16 last_mask) {
  const I8Block& b = a.b;
  const size_t panel_bytes = size_t(a.kp) * 16 * BITS / 8;
  const uint8_t* w = a.codes + size_t(p) * panel_bytes;
  const uint8_t* x[R];
  for (int r = 0; r < R; ++r) x[r] = b.xq + (r0 + r) * b.ldx;
  const __m512i low4 = _mm512_set1_epi8(15);
  for (int g = 0; g < a.n_groups; ++g) {
    __m512i acc[R][P];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int j = 0; j < P; ++j) acc[r][j] = _mm512_setzero_si512();
    const int e = a.gstart[g + 1];
    if constexpr (BITS == 8) {
      for (int pos = a.gstart[g]; pos < e; pos += 4) {
        __m512i wv[P];
#pragma GCC unroll 16
        for (int j = 0; j < P; ++j)
          wv[j] = _mm512_loadu_si512(w + j * panel_bytes + size_t(pos / 4) * 64);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const __m512i xb = bcast4(x[r] + pos);
#pragma GCC unroll 16
          for (int j = 0; j < P; ++j) acc[r][j] = _mm512_dpbusd_epi32(acc[r][j], xb, wv[j]);
        }
      }
    } else {
      for (int pos = a.gstart[g]; pos < e; pos += 8) {
        __m512i lo[P], hi[P];
#pragma GCC unroll 16
        for (int j = 0; j < P; ++j) {
          const __m512i v = _mm512_loadu_si512(w + j * panel_bytes + size_t(pos / 8) * 64);
          lo[j] = _mm512_and_si512(v, low4);
          hi[j] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
        }
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const __m512i x0 = bcast4(x[r] + pos), x1 = bcast4(x[r] + pos + 4);
#pragma GCC unroll 16
          for (int j = 0; j < P; ++j) {
            acc[r][j] = _mm512_dpbusd_epi32(acc[r][j], x0, lo[j]);
            acc[r][j] = _mm512_dpbusd_epi32(acc[r][j], x1, hi[j]);
          }
        }
      }
    }
    // Epilogue: A = sum - corr (- z * xsum); y = fma(float(A) * s, sx, y).
#pragma GCC unroll 16
    for (int j = 0; j < P; ++j) {
      const size_t t = (size_t(p + j) * a.n_groups + g) * kI8Cols;
      const __m512i corr = _mm512_loadu_si512(a.corr + t);
      const __m512 s = _mm512_loadu_ps(a.scale + t);
      __m512i z = _mm512_setzero_si512();
      if constexpr (BITS == 4) z = _mm512_loadu_si512(a.zero + t);
      const __mmask16 m = j == P - 1 ? last_mask : __mmask16(0xffff);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        __m512i A = _mm512_sub_epi32(acc[r][j], corr);
        if constexpr (BITS == 4)
          A = _mm512_sub_epi32(
              A, _mm512_mullo_epi32(z, _mm512_set1_epi32(b.xsum[size_t(r0 + r) * a.n_groups + g])));
        const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(A), s);
        float* y = b.y + (r0 + r) * b.ldy + (p + j) * kI8Cols;
        const __m512 prev = g == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, y);
        _mm512_mask_storeu_ps(y, m, _mm512_fmadd_ps(v, _mm512_set1_ps(b.sx[r0 + r]), prev));
      }
    }
  }
}

template <int BITS, int R>
void tile_np(const I8Args& a, int r0, int p, int np, __mmask16 m) {
  switch (np) {
    case 4:
      return tile<BITS, R, 4>(a, r0, p, m);
    case 3:
      return tile<BITS, R, 3>(a, r0, p, m);
    case 2:
      return tile<BITS, R, 2>(a, r0, p, m);
    default:
      return tile<BITS, R, 1>(a, r0, p, m);
  }
}

// Panel groups outside, row tiles inside: a group's weights (64 columns x k) stay in L2 while
// every row tile passes over them.
template <int BITS>
void run(const I8Args& a) {
  for (int p = a.p0; p < a.p1; p += 4) {
    const int np = a.p1 - p < 4 ? a.p1 - p : 4;
    const int cols = a.n - (p + np - 1) * kI8Cols;  // columns of the tile's last panel
    const __mmask16 m = cols >= 16 ? __mmask16(0xffff) : __mmask16((1u << cols) - 1);
    int r0 = 0;
    for (; r0 + 4 <= a.b.m; r0 += 4) tile_np<BITS, 4>(a, r0, p, np, m);
    switch (a.b.m - r0) {
      case 3:
        tile_np<BITS, 3>(a, r0, p, np, m);
        break;
      case 2:
        tile_np<BITS, 2>(a, r0, p, np, m);
        break;
      case 1:
        tile_np<BITS, 1>(a, r0, p, np, m);
        break;
      default:
        break;
    }
  }
}

}  // namespace

void i8gemm_vnni(const I8Args& a) {
  if (a.bits == 8)
    run<8>(a);
  else
    run<4>(a);
}

}  // namespace dllmq::kern
