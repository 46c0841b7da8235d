// The AMX bf16 micro-kernel (ops/amx_gemm.h): compiled with the AMX-TILE/AMX-BF16 and
// AVX512-BF16 flags in this file only, called only where the CPU has them.
//
// Tiles: eight 16 x 64-byte registers. A 32-row x 32-column block of y lives in four f32
// accumulator tiles (0-3); per k block of 32, two A tiles (4, 5: rows r .. r + 15 and r + 16 ..
// r + 31 of the converted activations, 32 bf16 each) and two B tiles (6, 7: the panel's two
// 16-column halves, 16 k pairs each) make four tdpbf16ps, so every weight byte loaded feeds 32
// rows. A last group of 16 rows or fewer uses tiles 0, 1, 4, 6, 7.
//
// Bits: each output is the chain of one tdpbf16ps per k block in ascending order, from a zeroed
// tile. The instruction's own summation of its 16 pairs is not documented to the bit (a probe
// matched none of fmaf in pair order, the pairs summed exactly, or a tree); ops/amx_gemm.h states
// the bound the tests hold it to. A row's sequence of instructions does not depend on the rows
// beside it (every row of a tile is computed alike), the tiling or the thread split, so a
// stacked request keeps its bits.
// GCC 12 flags the deliberately undefined registers inside avx512fintrin.h's own intrinsics as
// maybe-uninitialized (GCC bug 105593) once they inline here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "ops/amx_kernel.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

namespace dllmq::kern {
namespace {

// The 64-byte operand of LDTILECFG, palette 1 (Intel SDM vol. 1, 3.2.x, "Tile configuration").
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Every kernel here uses all eight tiles at their full 16 rows x 64 bytes.
void load_full_tiles() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  _tile_loadconfig(&cfg);
}

// a denormal as zero, then round to nearest even (vcvtne2ps2bf16's conversion, for the tails)
inline uint16_t to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0) u &= 0x80000000u;
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// The rows < m and columns < n of a 16 x 16 f32 tile stored in buf, into y rows r.., columns c...
void copy_part(const float* buf, float* y, ptrdiff_t ldy, int r, int c, int m, int n) {
  const int rows = std::min(16, m - r), cols = std::min(16, n - c);
  for (int i = 0; i < rows; ++i)
    std::memcpy(y + (r + i) * ldy + c, buf + i * 16, cols * sizeof(float));
}

// Accumulator tile T into y rows r.., columns c..: straight where the tile is whole inside y,
// else through a buffer; nothing for a padding half of the last panel (c >= n). A macro: the
// tile number must be a literal in the instruction (GCC's _tile_stored pastes it in).
#define DLLMQ_STORE_TILE(T, y, ldy, r, c, m, n)                                   \
  do {                                                                            \
    if ((c) < (n)) {                                                              \
      if ((r) + 16 <= (m) && (c) + 16 <= (n)) {                                   \
        _tile_stored(T, (y) + (r) * (ldy) + (c), (ldy)*ptrdiff_t(sizeof(float))); \
      } else {                                                                    \
        alignas(64) float buf_[16 * 16];                                          \
        _tile_stored(T, buf_, 64);                                                \
        copy_part(buf_, y, ldy, r, c, m, n);                                      \
      }                                                                           \
    }                                                                             \
  } while (0)

// Weights are prefetched this far ahead of the block being multiplied (four 2 KiB blocks). At 16
// to 64 rows the kernel asks for far more weight bytes a cycle than memory gives (each 2 KiB
// block feeds four tdpbf16ps), and tile loads alone left the stream at half the machine's read
// rate: with the prefetch a chain of products over 384 MiB of bf16 weights ran 1.2-1.8x faster
// (bench/weight_stream_bench; 4 and 16 KiB ahead measured close to 8; docs/performance.md).
constexpr ptrdiff_t kPrefetchBytes = 8192;

// The 32 lines of one 2 KiB weight block, into L1. Past a panel's end it fetches the next
// panel's first blocks, which a thread walking consecutive panels reads next (and a prefetch
// past the buffer's end does not fault).
inline void prefetch_block(const uint8_t* p) {
#pragma GCC unroll 32
  for (int i = 0; i < 2048; i += 64)
    _mm_prefetch(reinterpret_cast<const char*>(p + i), _MM_HINT_T0);
}

}  // namespace

void amx_convert_rows(const float* x, ptrdiff_t ldx, int m, int k, uint16_t* dst, int k_pad) {
  const int m_pad = (m + 15) / 16 * 16, nkb = k_pad / 32;
  for (int r = 0; r < m_pad; ++r) {
    // row r's 64 bytes of block kb: tile r / 16, row r % 16
    uint16_t* d = dst + size_t(r / 16) * nkb * 512 + (r % 16) * 32;
    if (r >= m) {  // a padding row of the last tile
      for (int kb = 0; kb < nkb; ++kb) std::memset(d + size_t(kb) * 512, 0, 64);
      continue;
    }
    const float* xr = x + r * ldx;
    int j = 0;
    for (; j + 32 <= k; j += 32) {
      const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(xr + j + 16), _mm512_loadu_ps(xr + j));
      _mm512_store_si512(d + size_t(j / 32) * 512, reinterpret_cast<__m512i>(v));
    }
    if (j < k) {  // the last block: its k values, then zeros to k_pad
      uint16_t* tail = d + size_t(j / 32) * 512;
      std::memset(tail, 0, 64);
      for (int t = 0; j + t < k; ++t) tail[t] = to_bf16(xr[j + t]);
    }
  }
}

void amx_gemm_bf16(const uint16_t* xb, int m, int k_pad, const uint16_t* w, int n, int p0, int p1,
                   float* y, ptrdiff_t ldy) {
  load_full_tiles();
  const int nkb = k_pad / 32;
  for (int p = p0; p < p1; ++p) {
    const auto* wp = reinterpret_cast<const uint8_t*>(w) + size_t(p) * nkb * kAmxBlockBytes;
    const int c = p * 32;
    int r = 0;
    for (; r + 16 < m; r += 32) {  // 17 to 32 rows: two row tiles (the buffer is padded to 16)
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      const uint16_t* x0 = xb + size_t(r / 16) * nkb * 512;
      const uint16_t* x1 = x0 + size_t(nkb) * 512;
      for (int kb = 0; kb < nkb; ++kb) {
        const uint8_t* b = wp + size_t(kb) * kAmxBlockBytes;
        prefetch_block(b + kPrefetchBytes);
        _tile_loadd(4, x0 + kb * 512, 64);
        _tile_loadd(6, b, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_loadd(5, x1 + kb * 512, 64);
        _tile_dpbf16ps(2, 5, 6);
        _tile_loadd(7, b + 1024, 64);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(3, 5, 7);
      }
      DLLMQ_STORE_TILE(0, y, ldy, r, c, m, n);
      DLLMQ_STORE_TILE(1, y, ldy, r, c + 16, m, n);
      DLLMQ_STORE_TILE(2, y, ldy, r + 16, c, m, n);
      DLLMQ_STORE_TILE(3, y, ldy, r + 16, c + 16, m, n);
    }
    if (r < m) {  // 1 to 16 rows left: one row tile
      _tile_zero(0);
      _tile_zero(1);
      const uint16_t* x0 = xb + size_t(r / 16) * nkb * 512;
      for (int kb = 0; kb < nkb; ++kb) {
        const uint8_t* b = wp + size_t(kb) * kAmxBlockBytes;
        prefetch_block(b + kPrefetchBytes);
        _tile_loadd(4, x0 + kb * 512, 64);
        _tile_loadd(6, b, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_loadd(7, b + 1024, 64);
        _tile_dpbf16ps(1, 4, 7);
      }
      DLLMQ_STORE_TILE(0, y, ldy, r, c, m, n);
      DLLMQ_STORE_TILE(1, y, ldy, r, c + 16, m, n);
    }
  }
  _tile_release();
}

namespace {

// The (dim 2i, dim 2i + 1) pairs of up to 16 keys (rows ldk values apart) as one B tile row, in
// key order: from f32 rows by two 64-bit gathers of 8 keys and a conversion to bf16 pairs, from
// bf16 rows by one 32-bit gather. Keys >= `keys` are zero. `one` is the same for one value.
struct F32KeyPairs {
  __m256i lo, hi;  // row offsets in floats
  __mmask8 mlo, mhi;
  F32KeyPairs(ptrdiff_t ldk, int keys) {
    alignas(32) int off[16];
    for (int c = 0; c < 16; ++c) off[c] = c < keys ? int(c * ldk) : 0;
    lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(off));
    hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(off + 8));
    mlo = keys >= 8 ? 0xff : __mmask8((1u << keys) - 1);
    mhi = keys <= 8 ? 0 : keys >= 16 ? 0xff : __mmask8((1u << (keys - 8)) - 1);
  }
  __m512i row(const float* base) const {
    const __m512i a = _mm512_mask_i32gather_epi64(_mm512_setzero_si512(), mlo, lo, base, 4);
    const __m512i b = _mm512_mask_i32gather_epi64(_mm512_setzero_si512(), mhi, hi, base, 4);
    // the second operand's values go first: keys 0-7 (a), then 8-15 (b)
    return reinterpret_cast<__m512i>(
        _mm512_cvtne2ps_pbh(_mm512_castsi512_ps(b), _mm512_castsi512_ps(a)));
  }
  static uint32_t one(float x) { return to_bf16(x); }
};

struct Bf16KeyPairs {
  __m512i idx;  // row offsets in bytes
  __mmask16 mk;
  Bf16KeyPairs(ptrdiff_t ldk, int keys) {
    alignas(64) int off[16];
    for (int c = 0; c < 16; ++c) off[c] = c < keys ? int(c * ldk * 2) : 0;
    idx = _mm512_load_si512(off);
    mk = keys >= 16 ? 0xffff : __mmask16((1u << keys) - 1);
  }
  __m512i row(const uint16_t* base) const {
    return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mk, idx, base, 1);
  }
  static uint32_t one(uint16_t x) { return x; }
};

// amx_pack_keys for f32 (Pairs = F32KeyPairs) or bf16 rows.
template <class Pairs, class T>
void pack_keys(const T* k, ptrdiff_t ldk, int n, int hd, int hd_pad, uint16_t* dst) {
  const int nkb = hd_pad / 32, groups = (n + 15) / 16;
  for (int g = 0; g < groups; ++g) {
    const int keys = std::min(16, n - g * 16);
    const T* kg = k + size_t(g) * 16 * ldk;
    const Pairs pairs(ldk, keys);
    for (int kb = 0; kb < nkb; ++kb) {
      uint16_t* t = dst + (size_t(g) * nkb + kb) * 512;
      for (int i = 0; i < 16; ++i) {
        const int dim = kb * 32 + 2 * i;
        uint32_t* row = reinterpret_cast<uint32_t*>(t + i * 32);
        if (dim + 2 <= hd) {
          _mm512_store_si512(row, pairs.row(kg + dim));
        } else {  // the pair straddles hd or lies past it
          for (int c = 0; c < 16; ++c)
            row[c] = c < keys && dim < hd ? Pairs::one(kg[c * ldk + dim]) : 0;
        }
      }
    }
  }
}

}  // namespace

void amx_pack_keys(const float* k, ptrdiff_t ldk, int n, int hd, int hd_pad, uint16_t* dst) {
  pack_keys<F32KeyPairs>(k, ldk, n, hd, hd_pad, dst);
}

void amx_pack_keys_bf16(const uint16_t* k, ptrdiff_t ldk, int n, int hd, int hd_pad,
                        uint16_t* dst) {
  pack_keys<Bf16KeyPairs>(k, ldk, n, hd, hd_pad, dst);
}

namespace {

// Rows 2i and 2i + 1 (v0, v0 + ldv; zero where absent) of a column tile's dims (mask dm) as 32
// bf16 values: row 2i's 16, then row 2i + 1's.
inline __m512i value_rows(const float* v0, ptrdiff_t ldv, bool e_ok, bool f_ok, __mmask16 dm) {
  const __m512 e = e_ok ? _mm512_maskz_loadu_ps(dm, v0) : _mm512_setzero_ps();
  const __m512 f = f_ok ? _mm512_maskz_loadu_ps(dm, v0 + ldv) : _mm512_setzero_ps();
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(f, e));  // the second operand goes first
}
inline __m512i value_rows(const uint16_t* v0, ptrdiff_t ldv, bool e_ok, bool f_ok, __mmask16 dm) {
  const __m256i e = e_ok ? _mm256_maskz_loadu_epi16(dm, v0) : _mm256_setzero_si256();
  const __m256i f = f_ok ? _mm256_maskz_loadu_epi16(dm, v0 + ldv) : _mm256_setzero_si256();
  return _mm512_inserti64x4(_mm512_castsi256_si512(e), f, 1);
}

// amx_pack_values for f32 or bf16 rows.
template <class T>
void pack_values(const T* v, ptrdiff_t ldv, int n, int hd, int n_pad, uint16_t* dst) {
  const int nkb = n_pad / 32, ctiles = (hd + 15) / 16;
  // interleaves (row 2i's 16 values, row 2i + 1's) into the 16 pairs of a tile row
  alignas(64) uint16_t idx[32];
  for (int c = 0; c < 16; ++c) {
    idx[2 * c] = uint16_t(c);
    idx[2 * c + 1] = uint16_t(16 + c);
  }
  const __m512i perm = _mm512_load_si512(idx);
  for (int ct = 0; ct < ctiles; ++ct) {
    const int dims = std::min(16, hd - ct * 16);
    const __mmask16 dm = dims >= 16 ? 0xffff : __mmask16((1u << dims) - 1);
    for (int kb = 0; kb < nkb; ++kb) {
      uint16_t* t = dst + (size_t(ct) * nkb + kb) * 512;
      for (int i = 0; i < 16; ++i) {
        const int r = kb * 32 + 2 * i;
        const __m512i both = value_rows(v + size_t(r) * ldv + ct * 16, ldv, r < n, r + 1 < n, dm);
        _mm512_store_si512(t + i * 32, _mm512_permutexvar_epi16(perm, both));
      }
    }
  }
}

}  // namespace

void amx_pack_values(const float* v, ptrdiff_t ldv, int n, int hd, int n_pad, uint16_t* dst) {
  pack_values(v, ldv, n, hd, n_pad, dst);
}

void amx_pack_values_bf16(const uint16_t* v, ptrdiff_t ldv, int n, int hd, int n_pad,
                          uint16_t* dst) {
  pack_values(v, ldv, n, hd, n_pad, dst);
}

namespace {

// exp(x) for x <= 0 on 16 lanes: x = j ln 2 + r (two-part ln 2, FMA), 2^j by vscalefps, the
// polynomial by Horner's rule; below -126 ln 2 (where exp is under the smallest normal float)
// 0.
inline __m512 exp_nonpositive(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.33654475f);
  const __mmask16 tiny = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  x = _mm512_max_ps(x, lo);
  const __m512 j = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(j, _mm512_set1_ps(0.693145751953125f), x);  // ln 2, high part
  r = _mm512_fnmadd_ps(j, _mm512_set1_ps(1.4286068202862268e-06f), r);    // and the rest
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_maskz_mov_ps(__mmask16(~tiny), _mm512_scalef_ps(p, j));
}

}  // namespace

double amx_exp_sub_f32(float* s, int n, float m) {
  const __m512 mv = _mm512_set1_ps(m);
  __m512 acc = _mm512_setzero_ps();
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(s + i), mv));
    _mm512_storeu_ps(s + i, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (i < n) {
    const __mmask16 k = __mmask16((1u << (n - i)) - 1);
    const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + i), mv));
    _mm512_mask_storeu_ps(s + i, k, e);
    acc = _mm512_add_ps(acc, _mm512_maskz_mov_ps(k, e));
  }
  alignas(64) float a[16];
  _mm512_store_ps(a, acc);
  for (int w = 8; w >= 1; w /= 2)  // a tree over the 16 partial sums
    for (int t = 0; t < w; ++t) a[t] += a[t + w];
  return a[0];
}

namespace {

// One block of R row tiles x C column tiles (R, C in 1..2) of amx_tiles_mm: accumulators 0-3,
// A tiles 4-5, B tiles 6-7 (tile numbers are literals in the instructions).
template <int R, int C>
void tiles_block(const uint16_t* a, const uint16_t* b, int nkb, float* c, ptrdiff_t ldc,
                 bool accumulate) {
  const ptrdiff_t stride = ldc * ptrdiff_t(sizeof(float));
  float* c01 = c + 16;
  float* c10 = c + 16 * ldc;
  float* c11 = c10 + 16;
  if (accumulate) {
    _tile_loadd(0, c, stride);
    if constexpr (C == 2) _tile_loadd(1, c01, stride);
    if constexpr (R == 2) _tile_loadd(2, c10, stride);
    if constexpr (R == 2 && C == 2) _tile_loadd(3, c11, stride);
  } else {
    _tile_zero(0);
    if constexpr (C == 2) _tile_zero(1);
    if constexpr (R == 2) _tile_zero(2);
    if constexpr (R == 2 && C == 2) _tile_zero(3);
  }
  const uint16_t* a1 = a + size_t(nkb) * 512;
  const uint16_t* b1 = b + size_t(nkb) * 512;
  for (int kb = 0; kb < nkb; ++kb) {
    _tile_loadd(4, a + kb * 512, 64);
    _tile_loadd(6, b + kb * 512, 64);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (R == 2) {
      _tile_loadd(5, a1 + kb * 512, 64);
      _tile_dpbf16ps(2, 5, 6);
    }
    if constexpr (C == 2) {
      _tile_loadd(7, b1 + kb * 512, 64);
      _tile_dpbf16ps(1, 4, 7);
      if constexpr (R == 2) _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, c, stride);
  if constexpr (C == 2) _tile_stored(1, c01, stride);
  if constexpr (R == 2) _tile_stored(2, c10, stride);
  if constexpr (R == 2 && C == 2) _tile_stored(3, c11, stride);
}

}  // namespace

void amx_tiles_mm(const uint16_t* a, int row_tiles, const uint16_t* b, int col_tiles, int nkb,
                  float* c, ptrdiff_t ldc, bool accumulate) {
  load_full_tiles();
  const size_t tile = size_t(nkb) * 512;  // values of one row (column) tile's k blocks
  for (int rt = 0; rt < row_tiles; rt += 2) {
    const bool r2 = rt + 1 < row_tiles;
    for (int ct = 0; ct < col_tiles; ct += 2) {
      const bool c2 = ct + 1 < col_tiles;
      const uint16_t* ap = a + rt * tile;
      const uint16_t* bp = b + ct * tile;
      float* cp = c + size_t(rt) * 16 * ldc + ct * 16;
      if (r2 && c2)
        tiles_block<2, 2>(ap, bp, nkb, cp, ldc, accumulate);
      else if (r2)
        tiles_block<2, 1>(ap, bp, nkb, cp, ldc, accumulate);
      else if (c2)
        tiles_block<1, 2>(ap, bp, nkb, cp, ldc, accumulate);
      else
        tiles_block<1, 1>(ap, bp, nkb, cp, ldc, accumulate);
    }
  }
  _tile_release();
}

#undef DLLMQ_STORE_TILE

float amx_burn(long iters) {
  load_full_tiles();
  alignas(64) uint16_t ones[16 * 32];
  for (uint16_t& v : ones) v = 0x3f80;  // 1.0
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, ones, 64);
  _tile_loadd(5, ones, 64);
  _tile_loadd(6, ones, 64);
  _tile_loadd(7, ones, 64);
  for (long i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float out[16 * 16];
  _tile_stored(3, out, 64);
  _tile_release();
  return out[0];
}

}  // namespace dllmq::kern
