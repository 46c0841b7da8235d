// The int8-activation kernel on AVX-512 VNNI (compiled with those flags only in this file; called
// only where int8_act_vnni() says the CPU has them). Tiles of up to 8 rows x 2 panels (32
// columns): 16 int32 accumulators, 2 weight vectors (4 for nibbles) and a broadcast. Per k quad,
// each row's 4 activation bytes are broadcast and vpdpbusd adds 4 u8 x s8 products into each
// column's int32 lane. At a group's end the sums are corrected, converted, scaled and folded into y
// (kept in memory between groups: once per 128 k at least). GCC 12 flags the deliberately undefined
// registers inside avx512fintrin.h (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "ops/int8_act_kernel.h"

namespace dllmq::kern {

namespace {

// Tile shape (rows x 16-column panels). Measured on an Emerald Rapids core, [4096, 4096] int8 at
// 8 / 32 rows (weight_quant_bench): 4 x 4 ran 1063 / 3086 us, 6 x 3 1002 / 3167, 8 x 2 868 / 2961:
// more rows per weight load halve the weights' L2 traffic, which bounds the kernel before the
// dot products do.
constexpr int kMR8 = 8, kNP8 = 2, kMR4 = 8, kNP4 = 2;

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
      const bool hz = a.zero != nullptr;
      const __m512i z = hz ? _mm512_loadu_si512(a.zero + t) : _mm512_setzero_si512();
      const __mmask16 m = j == P - 1 ? last_mask : __mmask16(0xffff);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        __m512i A = _mm512_sub_epi32(acc[r][j], corr);
        if (hz)
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

// Tile shape: rows x panels. More rows per panel load halve the L2 traffic of the weights
// (a 32-row product passes over each slice of weights once per row tile).
template <int BITS>
struct Shape {
  static constexpr int MR = BITS == 8 ? kMR8 : kMR4;
  static constexpr int NP = BITS == 8 ? kNP8 : kNP4;
};

template <int BITS, int R, int P>
void tile_p(const I8Args& a, int r0, int p, int np, __mmask16 m) {
  if constexpr (P > 1)
    if (np < P) return tile_p<BITS, R, P - 1>(a, r0, p, np, m);
  tile<BITS, R, P>(a, r0, p, m);
}

template <int BITS, int R>
void tile_r(const I8Args& a, int r0, int p, int np, __mmask16 m, int rows) {
  if constexpr (R > 1)
    if (rows < R) return tile_r<BITS, R - 1>(a, r0, p, np, m, rows);
  tile_p<BITS, R, Shape<BITS>::NP>(a, r0, p, np, m);
}

// Panel groups outside, row tiles inside: a group's weights (NP x 16 columns x k) stay in L2
// while every row tile passes over them.
template <int BITS>
void run(const I8Args& a) {
  constexpr int MR = Shape<BITS>::MR, NP = Shape<BITS>::NP;
  for (int p = a.p0; p < a.p1; p += NP) {
    const int np = a.p1 - p < NP ? a.p1 - p : NP;
    const int cols = a.n - (p + np - 1) * kI8Cols;  // columns of the tile's last panel
    const __mmask16 m = cols >= 16 ? __mmask16(0xffff) : __mmask16((1u << cols) - 1);
    for (int r0 = 0; r0 < a.b.m; r0 += MR) {
      const int rows = a.b.m - r0 < MR ? a.b.m - r0 : MR;
      tile_r<BITS, MR>(a, r0, p, np, m, rows);
    }
  }
}

}  // namespace

float quantize_row_u8_avx512(const float* x, int k, uint8_t* u8) {
  const __m512 zero = _mm512_setzero_ps();
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  __m512 amax = zero;
  __mmask16 bad = 0;
  for (int i = 0; i < k; i += 16) {
    const __mmask16 m = k - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (k - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    // x * 0 is NaN exactly where x is NaN or infinite
    bad |= _mm512_mask_cmp_ps_mask(m, _mm512_mul_ps(v, zero), zero, _CMP_NEQ_UQ);
    amax = _mm512_max_ps(amax,
                         _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), abs_mask)));
  }
  const float a = _mm512_reduce_max_ps(amax);
  if (bad != 0 || a == 0.0f) {
    for (int i = 0; i < k; ++i) u8[i] = 128;
    return bad != 0 ? __builtin_nanf("") : 0.0f;
  }
  const float sx = a / 127.0f;
  const __m512 sv = _mm512_set1_ps(sx), lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  const __m512i off = _mm512_set1_epi32(128);
  for (int i = 0; i < k; i += 16) {
    const __mmask16 m = k - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (k - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    __m512 q =
        _mm512_roundscale_ps(_mm512_div_ps(v, sv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    q = _mm512_min_ps(_mm512_max_ps(q, lo), hi);
    const __m512i c = _mm512_add_epi32(_mm512_cvtps_epi32(q), off);
    _mm_mask_storeu_epi8(u8 + i, m, _mm512_cvtepi32_epi8(c));
  }
  return sx;
}

void i8gemm_vnni(const I8Args& a) {
  if (a.bits == 8)
    run<8>(a);
  else
    run<4>(a);
}

}  // namespace dllmq::kern
