// The packed-weight GEMM on the AVX512-BF16 dot product (vdpbf16ps), for bf16 compute on bf16
// weights (compiled with AVX-512 F/BW + BF16 flags only in this file; called only where the CPU
// has them and the start-up measurement chose it, ops/gemm.cpp). It reads the AVX-512 layout the
// widening kernel reads (ops/packed_kernel_impl.h: 32-column panels, K-major, slot 2i = column i
// and slot 2i + 1 = column 16 + i of a k row), so choosing it packs nothing new.
//
// vdpbf16ps multiplies pairs along k: lane i of acc += a.bf16[2i+1] * b.bf16[2i+1], then
// += a.bf16[2i] * b.bf16[2i], each product exact in f32 and each sum rounded once (an fmaf),
// with bf16 and f32 denormals read as zero and results flushed to zero (measured on 2^20 random
// lanes, normal and denormal-heavy, against that emulation: gemm_bf16dot_ref, ops/packed_gemm.h).
// So the weights of k and k + 1 of one column must share a 32-bit lane: two k rows of a panel,
// e = row k and f = row k + 1 (lane i: column i low, column 16 + i high), give
//   lo = blend(e, f << 16)  (lane i: w[k][i], w[k+1][i])       -> columns 0..15
//   hi = blend(e >> 16, f)  (lane i: w[k][16+i], w[k+1][16+i]) -> columns 16..31
// two shifts and two blends per k pair and panel, shared by the 8 rows of a tile. The
// activations go in as (x[k], x[k+1]) bf16 pairs broadcast per row (vcvtne2ps2bf16: round to
// nearest even, denormals to zero).
//
// Bits: each output is one chain over the k pairs in ascending order from 0 (an odd k's last
// pair is (x, 0) x (w, 0)); K blocks hold whole pairs, and the chain pauses in y between them, so
// a row's bits do not depend on the rows beside it, the tiling or the thread split.
// GCC 12 flags the deliberately undefined registers inside avx512fintrin.h's own intrinsics as
// maybe-uninitialized (GCC bug 105593) once they inline here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "ops/packed_kernel.h"
#include "ops/packed_kernel_impl.h"  // for_each_tile

namespace dllmq::kern {
namespace {

constexpr int W = 16;              // f32 lanes
constexpr int NR = 32;             // columns of a panel
constexpr ptrdiff_t KSTRIDE = 64;  // bytes of one k row of a panel (32 bf16)
constexpr int MR = 8;              // rows of a full tile: 16 accumulators
constexpr int KC_MAX = 4096;       // k values per block: a row tile's pairs take 16 KiB of stack

// x as bf16, the way vcvtne2ps2bf16 converts it: a denormal reads as (signed) zero, then round
// to nearest even. (Activations are finite.)
inline uint32_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0) u &= 0x80000000u;
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

// Rows [0, rows) of x, k values [0, kc): the pairs (x[k], x[k+1]) as 32-bit lanes (x[k] low),
// row r at xp + r * ldp. An odd kc's last pair is (x[kc - 1], 0).
void make_pairs(const float* x, ptrdiff_t ldx, int rows, int kc, uint32_t* xp, int ldp) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + r * ldx;
    uint32_t* d = xp + r * ldp;
    int k = 0;
    // 32 values: the low 16 bf16 of the result are x[k..k+15], the high 16 x[k+16..k+31], so its
    // 32-bit lane j holds (x[k+2j], x[k+2j+1]).
    for (; k + 32 <= kc; k += 32)
      _mm512_storeu_si512(d + k / 2, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(
                                         _mm512_loadu_ps(xr + k + 16), _mm512_loadu_ps(xr + k))));
    for (; k < kc; k += 2)
      d[k / 2] = bf16_bits(xr[k]) | (k + 1 < kc ? bf16_bits(xr[k + 1]) << 16 : 0u);
  }
}

// k rows k and k + 1 of a panel (the second absent when !TWO: zeros) as the two pair vectors.
template <bool TWO>
inline __attribute__((always_inline)) void load_pairs(const unsigned char* p, __m512i& lo,
                                                      __m512i& hi) {
  const __m512i e = _mm512_loadu_si512(p);
  const __m512i f = TWO ? _mm512_loadu_si512(p + KSTRIDE) : _mm512_setzero_si512();
  constexpr __mmask32 kHigh = 0xAAAAAAAAu;  // the high 16 bits of every 32-bit lane
  lo = _mm512_mask_blend_epi16(kHigh, e, _mm512_slli_epi32(f, 16));
  hi = _mm512_mask_blend_epi16(kHigh, _mm512_srli_epi32(e, 16), f);
}

inline __attribute__((always_inline)) __m512 dot(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
}

// Columns [0, cnt) of a vector, cnt in [0, 16].
inline __mmask16 cols_mask(int cnt) {
  return cnt >= W ? __mmask16(0xffff) : __mmask16((1u << (cnt > 0 ? cnt : 0)) - 1u);
}

// Rows [0, R_) (their pairs at xp, stride ldp) times NP consecutive panels (pstride bytes apart),
// kc values of k from w. `valid`: columns of y from the first panel's first that exist; `first`:
// the chains start here, else they continue from y.
template <int R_, int NP>
void tile(const uint32_t* xp, int ldp, const unsigned char* w, ptrdiff_t pstride, int kc,
          bool first, float* y, ptrdiff_t ldy, int valid) {
  __m512 acc[R_][2 * NP];
#pragma GCC unroll 16
  for (int r = 0; r < R_; ++r)
#pragma GCC unroll 16
    for (int j = 0; j < 2 * NP; ++j)
      acc[r][j] = first ? _mm512_setzero_ps()
                        : _mm512_maskz_loadu_ps(cols_mask(valid - j * W), y + r * ldy + j * W);
  const auto step = [&](int q, auto two) __attribute__((always_inline)) {
    __m512i b[2 * NP];
#pragma GCC unroll 16
    for (int p = 0; p < NP; ++p)
      load_pairs<decltype(two)::value>(w + p * pstride + 2 * q * KSTRIDE, b[2 * p], b[2 * p + 1]);
#pragma GCC unroll 16
    for (int r = 0; r < R_; ++r) {
      const __m512i a = _mm512_set1_epi32(int(xp[r * ldp + q]));
#pragma GCC unroll 16
      for (int j = 0; j < 2 * NP; ++j) acc[r][j] = dot(acc[r][j], a, b[j]);
    }
  };
  const int pairs = kc / 2;
  for (int q = 0; q < pairs; ++q) step(q, std::true_type{});
  if (kc & 1) step(pairs, std::false_type{});
#pragma GCC unroll 16
  for (int r = 0; r < R_; ++r)
#pragma GCC unroll 16
    for (int j = 0; j < 2 * NP; ++j)
      _mm512_mask_storeu_ps(y + r * ldy + j * W, cols_mask(valid - j * W), acc[r][j]);
}

// Panels [p, pe) for rows [0, R_): one or two rows take several panels at once, so that the
// accumulators still cover the dot product's latency.
template <int R_>
void rows(const uint32_t* xp, int ldp, const unsigned char* w, ptrdiff_t pstride, int kc,
          bool first, float* y, ptrdiff_t ldy, int p, int pe, int n) {
  constexpr int NP = R_ == 1 ? 4 : R_ == 2 ? 2 : 1;
  for (; p + NP <= pe; p += NP)
    tile<R_, NP>(xp, ldp, w + p * pstride, pstride, kc, first, y + p * NR, ldy, n - p * NR);
  for (; p < pe; ++p)
    tile<R_, 1>(xp, ldp, w + p * pstride, pstride, kc, first, y + p * NR, ldy, n - p * NR);
}

using RowsFn = void (*)(const uint32_t*, int, const unsigned char*, ptrdiff_t, int, bool, float*,
                        ptrdiff_t, int, int, int);
constexpr RowsFn kRows[] = {&rows<1>, &rows<2>, &rows<3>, &rows<4>,
                            &rows<5>, &rows<6>, &rows<7>, &rows<8>};

// k values per block: the block's activations of every row stay in L2 while the panels stream
// past (as the widening kernel's k_block), even (whole pairs), at most KC_MAX.
int k_block(int total_rows, int k) {
  int kc = 49152 / (total_rows > 0 ? total_rows : 1);
  kc = kc < 128 ? 128 : kc > KC_MAX ? KC_MAX : kc;
  kc = (kc + 7) / 8 * 8;
  return kc > k ? k : kc;
}

}  // namespace

void gemm_bf16dot_avx512(const GemmArgs& a) {
  int total = 0;
  for (int b = 0; b < a.n_blocks; ++b) total += a.blocks[b].m;
  if (total <= 0 || a.p1 <= a.p0) return;
  const int kc = k_block(total, a.k);
  const auto* w0 = static_cast<const unsigned char*>(a.w);
  const ptrdiff_t pstride = ptrdiff_t(a.k) * KSTRIDE;
  alignas(64) uint32_t xp[MR * (KC_MAX / 2)];
  for (int k0 = 0; k0 < a.k; k0 += kc) {
    const int kcur = a.k - k0 < kc ? a.k - k0 : kc;
    const int ldp = (kcur + 1) / 2;
    for_each_tile<MR>(a, kPanelGroup, [&](const Block& bl, int r, int nr, int pg, int pe) {
      make_pairs(bl.x + r * bl.ldx + k0, bl.ldx, nr, kcur, xp, ldp);
      kRows[nr - 1](xp, ldp, w0 + k0 * KSTRIDE, pstride, kcur, k0 == 0, bl.y + r * bl.ldy, bl.ldy,
                    pg, pe, a.n);
    });
  }
}

// kChains independent vdpbf16ps chains: the core's bf16 dot-product peak (2 multiply-adds per
// f32 lane per instruction).
float dp_burn_avx512bf16(long iters, float seed) {
  constexpr int kChains = 24;
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(seed + float(i));
  const __m512i x = _mm512_set1_epi32(0x3f7f3f7f), c = _mm512_set1_epi32(0x33803380);
  for (long t = 0; t < iters; ++t)
#pragma GCC unroll 32
    for (int i = 0; i < kChains; ++i) acc[i] = dot(acc[i], x, c);
  float lane[W], sum = 0.0f;
  for (int i = 0; i < kChains; ++i) {
    _mm512_storeu_ps(lane, acc[i]);
    sum += lane[0] + lane[W - 1];
  }
  return sum;
}

}  // namespace dllmq::kern
