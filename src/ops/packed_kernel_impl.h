// The packed-weight GEMM, written once for every vector width: instantiated by
// packed_kernel_{scalar,avx2,avx512}.cpp with a traits class V (its vector type R, W floats per
// vector, and the handful of operations below), each translation unit compiled for its own
// instruction set. Include nothing here that portable code could also instantiate: the linker
// might keep this unit's (e.g. AVX-512) copy of an inline function for everyone.
//
// Layout (ops/packed_gemm.h): the weight W [n, k] is cut into panels of NR = 2W columns; a panel
// stores, for k = 0, 1, ..., the NR weights of its columns (K-major), in the stored dtype. f32
// and f16 keep column order; bf16 interleaves the two halves (slot 2i = column i, slot 2i+1 =
// column W + i), so one load of 2W bf16 values widens to two f32 vectors with a shift and a mask.
//
// Integer codes: a k row of a panel is its NR codes, one byte each (8 bits, column order) or a
// nibble each (4 bits: byte i holds column i in its low nibble and column W + i in its high one);
// the panel's scales and zero points of each group sit in QuantArgs. kQ8 / kQ4 codes are q
// (unsigned) with zero points z, widened to (q - z) exactly in int32; kS8 / kS4 codes are q - z
// itself (signed, sign-extended). Either way the weight's integer part is converted to f32 exactly
// and multiplied into the activations by FMA; the group's scale waits until the group ends, when
// each output takes y = fma(a_g, s_g, y) once: the inner loop is widen, convert and FMA, the same
// length as bf16's. The reduction runs in the packed k order, where each group is one run, and K
// blocks hold whole groups, so nothing depends on where a block ends.
//
// The micro-kernel is an outer product: for each k, the NR weights of a panel (widened in
// registers) times each of MR broadcast activations, into MR x 2 accumulators by FMA. Every
// float-weight output is one chain fma(x[k], w[k], acc) in ascending k from acc = 0, so its bits
// are the scalar `fmaf` loop's whatever the row tile, panel group, K block (the chain pauses in y
// between K blocks, exactly) or thread; a code output is its chain of per-group chains, likewise.
#pragma once

// Only templates whose every instantiation names a type of the including unit (Fetch below, the
// callers' lambdas), <utility> for std::index_sequence and <type_traits> for
// std::integral_constant alone (types: no code).
#include <type_traits>
#include <utility>

#include "ops/next_group_prefetch.h"

namespace dllmq::kern {

inline constexpr int kPanelGroup = 4;

// The order every packed kernel visits one K block in: panel groups of `group` panels (4, or 2
// where L2 is small: PackedGemm::panel_group; their K block stays cached while every row
// passes), then each block's row tiles of up to MR rows, ceil(m / MR) of them; where the last
// would hold fewer than MR / 2 rows, the last two share their rows evenly (16 rows at MR 12 as
// 8 + 8, not 12 + 4: a 4-row tile keeps 8 accumulators, just the FMA latency's worth, and loads
// its panel's weights for 8 FMAs a k instead of 24; 32 rows keep 12 + 12 + 8: even tiles,
// 11 + 11 + 10, measured no faster; docs/performance.md): fn(block, first row, rows, first panel,
// end panel). row_tiles: one block's tiles, fn(first row, rows).
template <int MR, class Fn>
inline __attribute__((always_inline)) void row_tiles(int m, Fn&& fn) {
  const int tail = m % MR;
  // Where the last two tiles start to share their rows (m when they need not).
  const int split = m > MR && tail > 0 && tail < MR / 2 ? m - MR - tail : m;
  int r = 0;
  for (; r + MR <= split; r += MR) fn(r, MR);
  if (split < m) {
    const int half = (m - split + 1) / 2;
    fn(split, half);
    fn(split + half, m - split - half);
  } else if (r < m) {
    fn(r, m - r);
  }
}

// The tile calls of one row tile over panels [p, pe), in order: as many calls of AT_ONCE panels
// as fit (one or two rows take several, so that their accumulators still cover the FMA latency:
// PackedGemm::panels_at_once), then, where AT_ONCE > 2, pairs (one row in a group of two panels,
// or at a group's end), then single panels.
// fn(first panel, std::integral_constant<int, panels>). One source for the calls PackedGemm::rows
// makes and for the count of their k steps that the next group's prefetch is spread over
// (PackedGemm::tile_calls), so that the two cannot differ.
template <int AT_ONCE, class Fn>
inline __attribute__((always_inline)) void panel_calls(int p, int pe, Fn&& fn) {
  for (; p + AT_ONCE <= pe; p += AT_ONCE) fn(p, std::integral_constant<int, AT_ONCE>{});
  if constexpr (AT_ONCE > 2)
    for (; p + 2 <= pe; p += 2) fn(p, std::integral_constant<int, 2>{});
  for (; p < pe; ++p) fn(p, std::integral_constant<int, 1>{});
}

template <int MR, class Fn>
inline __attribute__((always_inline)) void for_each_tile(const GemmArgs& a, int group, Fn&& fn) {
  for (int pg = a.p0; pg < a.p1; pg += group) {
    const int pe = pg + group < a.p1 ? pg + group : a.p1;
    for (int b = 0; b < a.n_blocks; ++b)
      row_tiles<MR>(a.blocks[b].m, [&](int r, int nr) { fn(a.blocks[b], r, nr, pg, pe); });
  }
}

template <class V, WType T, bool RW>
struct PackedGemm {
  using R = typename V::R;
  using RI = typename V::RI;
  static constexpr int W = V::W;
  static constexpr int NR = 2 * W;
  static constexpr bool Q = is_code(T);
  static constexpr bool SIGNED = T == WType::kS8 || T == WType::kS4;  // no zero points
  static constexpr bool BYTE_CODES = T == WType::kQ8 || T == WType::kS8;
  static constexpr int ESZ = T == WType::kF32 ? 4 : 2;
  // bytes per k of a panel
  static constexpr ptrdiff_t KSTRIDE = !Q ? ptrdiff_t(NR) * ESZ : BYTE_CODES ? NR : NR / 2;
  static constexpr int MR = V::MR;  // rows of a full tile
  // How far ahead in a panel the weights are prefetched into L1 (see outer()).
  static constexpr ptrdiff_t kPrefetchBytes = 2048;
  // k steps per turn of outer()'s loop, between walks of the next group's prefetch, and whether
  // a turn's steps are peeled by hand (V's choice, each measured on its own machine: outer()).
  static constexpr int kStepsPerWalk = V::kStepsPerWalk;
  static constexpr bool kPeelTurns = V::kPeelTurns;
  // The fewest k steps per line of the next group's prefetch (block_pass).
  static constexpr long kStepsPerLine = 2;

  // The next panel group's weights into L2 (ops/next_group_prefetch.h), prefetcht2.
  struct L2Line {
    static inline __attribute__((always_inline)) void line(const unsigned char* p) {
      __builtin_prefetch(p, 0, 1);
    }
  };
  using NextGroup = NextGroupPrefetch<L2Line>;

  // The NR weights of one k of a panel as two f32 vectors (columns [0, W) and [W, 2W)).
  static inline __attribute__((always_inline)) void load_w(const unsigned char* p, R& lo, R& hi) {
    if constexpr (T == WType::kF32) {
      lo = V::load(reinterpret_cast<const float*>(p));
      hi = V::load(reinterpret_cast<const float*>(p) + W);
    } else if constexpr (T == WType::kBF16) {
      V::bf16_pair(reinterpret_cast<const uint16_t*>(p), lo, hi);
    } else {
      lo = V::f16(reinterpret_cast<const uint16_t*>(p));
      hi = V::f16(reinterpret_cast<const uint16_t*>(p) + W);
    }
    if constexpr (RW && T != WType::kBF16) {
      lo = V::round_bf16(lo);
      hi = V::round_bf16(hi);
    }
  }

  // Codes: the NR values q - z of one k of a panel as two f32 vectors (exact: |q - z| <= 2^8);
  // z: the group's zero points of those columns (two vectors; unused for signed codes).
  static inline __attribute__((always_inline)) void load_q(const unsigned char* p, R& lo, R& hi,
                                                           const RI* z) {
    RI a, b;
    if constexpr (T == WType::kQ8)
      V::codes8(p, a, b);
    else if constexpr (T == WType::kQ4)
      V::codes4(p, a, b);
    else if constexpr (T == WType::kS8)
      V::codes8s(p, a, b);
    else
      V::codes4s(p, a, b);
    if constexpr (!SIGNED) {
      a = V::subi(a, z[0]);
      b = V::subi(b, z[1]);
    }
    lo = V::cvt(a);
    hi = V::cvt(b);
  }

  // Columns [c, c + cnt) of a vector to/from memory, cnt in [0, W].
  static inline void store_cols(float* y, R v, int cnt) {
    if (cnt >= W) {
      V::store(y, v);
      return;
    }
    float t[W];
    V::store(t, v);
    for (int i = 0; i < cnt; ++i) y[i] = t[i];
  }
  static inline R load_cols(const float* y, int cnt) {
    if (cnt >= W) return V::load(y);
    float t[W];
    for (int i = 0; i < W; ++i) t[i] = i < cnt ? y[i] : 0.0f;
    return V::load(t);
  }

  // Rows [0, R_) of x times NP consecutive panels (w: the first, at this K block's first k;
  // pstride bytes apart), kc values of k. `valid`: columns of y from the first panel's first
  // column that exist. `first`: the chains start here (else they continue from y).
  // Where the K block starts in the packed k order, its groups [g0, g1) (codes), and the first
  // panel.
  struct KPos {
    const QuantArgs* q;
    int k0, g0, g1, panel;
  };

  template <int R_, int NP>
  static void tile(const float* x, ptrdiff_t ldx, const unsigned char* w, ptrdiff_t pstride, int kc,
                   bool first, float* y, ptrdiff_t ldy, int valid, const KPos&, NextGroup& ng) {
    R acc[R_][2 * NP];
    const bool full = valid >= NP * NR;
#pragma GCC unroll 16
    for (int r = 0; r < R_; ++r)
#pragma GCC unroll 16
      for (int j = 0; j < 2 * NP; ++j)
        acc[r][j] = first  ? V::zero()
                    : full ? V::load(y + r * ldy + j * W)
                           : load_cols(y + r * ldy + j * W, valid - j * W);
    outer<R_, NP>(acc, x, ldx, w, pstride, 0, kc, nullptr, ng);
    store_tile<R_, NP>(acc, y, ldy, valid);
  }

  // The outer product over k in [kb, ke): per k the NR weights of each of NP panels (widened in
  // registers; codes less their zero points z, two vectors per panel) times each of R_
  // broadcast activations, into acc by FMA.
  template <int R_, int NP>
  static inline __attribute__((always_inline)) void outer(R (&acc)[R_][2 * NP], const float* x,
                                                          ptrdiff_t ldx, const unsigned char* w,
                                                          ptrdiff_t pstride, int kb, int ke,
                                                          const RI* z, NextGroup& ng) {
    NextGroup g = ng;
    // The activations of rows 3i, 3i + 1, 3i + 2 at k, from one pointer per three rows: [p],
    // [p + 4 ldx], [p + 8 ldx] are one addressing mode each, so a 12-row tile keeps 4 pointers
    // and ldx in integer registers. Written as x + r ldx + k, GCC kept every row offset apart.
    constexpr int NB = (R_ + 2) / 3;
    const float* xr[NB];
#pragma GCC unroll 8
    for (int i = 0; i < NB; ++i) xr[i] = x + 3 * i * ldx + kb;
    // One k: the weights of each panel widened, times each row's broadcast activation.
    auto k_step = [&](int kk) __attribute__((always_inline)) {
      // The panels' weights 2 KiB ahead, into L1: a 32-row dual-cache product streams every
      // weight once per step from L3 (the embedded and benchmark models do not fit L2), and the
      // hardware prefetchers alone left it at 188-200 GFLOP/s on two cores, 224-240 with this
      // (d 1024 benchmark model, dual cache; docs/performance.md). Every 64-byte line of a k row:
      // AVX-512 panels of f32 weights take two lines a k. No effect on the bits.
#pragma GCC unroll 16
      for (int p = 0; p < NP; ++p)
#pragma GCC unroll 2
        for (ptrdiff_t line = 0; line < KSTRIDE; line += 64)
          __builtin_prefetch(w + p * pstride + kk * KSTRIDE + kPrefetchBytes + line, 0, 3);
      R b[2 * NP];
#pragma GCC unroll 16
      for (int p = 0; p < NP; ++p) {
        if constexpr (Q)
          load_q(w + p * pstride + kk * KSTRIDE, b[2 * p], b[2 * p + 1], z + 2 * p);
        else
          load_w(w + p * pstride + kk * KSTRIDE, b[2 * p], b[2 * p + 1]);
      }
#pragma GCC unroll 16
      for (int r = 0; r < R_; ++r) {
        const R a = V::bcast(xr[r / 3] + (r % 3) * ldx);
#pragma GCC unroll 16
        for (int j = 0; j < 2 * NP; ++j) acc[r][j] = V::fma(a, b[j], acc[r][j]);
      }
#pragma GCC unroll 8
      for (int i = 0; i < NB; ++i) ++xr[i];
    };
    // The next group's prefetch is walked once per turn of kStepsPerWalk k steps, not every k:
    // walked every k, its state took integer registers the row pointers needed, and GCC moved
    // them in and out of vector registers every k, port-0 moves beside the FMAs (AVX-512 8-row
    // tiles in L2 at 32-256 rows: 55-66% of the FMA peak before, 71-92% after;
    // docs/performance.md).
    if constexpr (kPeelTurns) {
      // AVX-512 (the form measured on the Xeon) and the scalar twins: four k a turn, peeled.
      int kk = kb;
      for (; kk + kStepsPerWalk <= ke; kk += kStepsPerWalk) {
#pragma GCC unroll 4
        for (int u = 0; u < kStepsPerWalk; ++u) k_step(kk + u);
        g.advance(kStepsPerWalk);
      }
      for (; kk < ke; ++kk) {
        k_step(kk);
        g.advance(1);
      }
    } else {
      // AVX2 (measured on Zen 4): a turn's steps are a loop GCC unrolls itself. With the four
      // steps peeled by hand, its register allocator kept the 15 live vectors (12 accumulators,
      // two weights, a broadcast) in rotating registers, with a move every few FMAs and an
      // accumulator spilled every turn. Tiles of 6 to 252 rows with their weights in L2 ran at
      // 71-86% of the FMA peak, where a plain 6 x 16 loop runs at 92-98%; this form at 77-94%
      // (packed_gemm_bench's BM_Avx2InL2 on Zen 4; docs/performance.md).
      // w itself advances one k a step (so each step is k_step(0)): with the address computed
      // from kk, GCC rebuilt it every k from values it kept on the stack.
      w += ptrdiff_t(kb) * KSTRIDE;
      for (int kk = kb; kk < ke;) {
        const int e = ke - kk < kStepsPerWalk ? ke : kk + kStepsPerWalk;
        const int n = e - kk;
#pragma GCC unroll 4
        for (; kk < e; ++kk, w += KSTRIDE) k_step(0);
        g.advance(n);
      }
    }
    ng = g;
  }

  template <int R_, int NP>
  static inline __attribute__((always_inline)) void store_tile(R (&acc)[R_][2 * NP], float* y,
                                                               ptrdiff_t ldy, int valid) {
    const bool full = valid >= NP * NR;
#pragma GCC unroll 16
    for (int r = 0; r < R_; ++r)
#pragma GCC unroll 16
      for (int j = 0; j < 2 * NP; ++j) {
        if (full)
          V::store(y + r * ldy + j * W, acc[r][j]);
        else
          store_cols(y + r * ldy + j * W, acc[r][j], valid - j * W);
      }
  }

  // Codes: the same outer product per group into fresh accumulators a_g, then y = fma(a_g, s_g,
  // y) per output (y = fma(a_g, s_g, 0) for the first group of the reduction).
  template <int R_, int NP>
  static void tile_q(const float* x, ptrdiff_t ldx, const unsigned char* w, ptrdiff_t pstride, int,
                     bool first, float* y, ptrdiff_t ldy, int valid, const KPos& kp,
                     NextGroup& ng) {
    const QuantArgs& q = *kp.q;
    const bool full = valid >= NP * NR;
    for (int g = kp.g0; g < kp.g1; ++g, first = false) {
      const int kb = q.gstart[g] - kp.k0, ke = q.gstart[g + 1] - kp.k0;
      RI z[2 * NP];
      if constexpr (!SIGNED) {
#pragma GCC unroll 16
        for (int p = 0; p < NP; ++p) {
          const size_t o = (size_t(kp.panel + p) * q.n_groups + g) * NR;
          z[2 * p] = V::loadi(q.zero + o);
          z[2 * p + 1] = V::loadi(q.zero + o + W);
        }
      }
      R acc[R_][2 * NP];
#pragma GCC unroll 16
      for (int r = 0; r < R_; ++r)
#pragma GCC unroll 16
        for (int j = 0; j < 2 * NP; ++j) acc[r][j] = V::zero();
      outer<R_, NP>(acc, x, ldx, w, pstride, kb, ke, z, ng);
#pragma GCC unroll 16
      for (int j = 0; j < 2 * NP; ++j) {
        const R sc =
            V::load(q.scale + (size_t(kp.panel + j / 2) * q.n_groups + g) * NR + (j % 2) * W);
#pragma GCC unroll 16
        for (int r = 0; r < R_; ++r) {
          float* yp = y + r * ldy + j * W;
          const R prev = first ? V::zero() : full ? V::load(yp) : load_cols(yp, valid - j * W);
          acc[r][j] = V::fma(acc[r][j], sc, prev);
        }
      }
      store_tile<R_, NP>(acc, y, ldy, valid);
    }
  }

  // Codes run per group (tile_q), float weights as one chain (tile).
  template <int R_, int NP>
  static inline __attribute__((always_inline)) void tile_any(const float* x, ptrdiff_t ldx,
                                                             const unsigned char* w,
                                                             ptrdiff_t pstride, int kc, bool first,
                                                             float* y, ptrdiff_t ldy, int valid,
                                                             const KPos& kp, NextGroup& ng) {
    if constexpr (Q)
      tile_q<R_, NP>(x, ldx, w, pstride, kc, first, y, ldy, valid, kp, ng);
    else
      tile<R_, NP>(x, ldx, w, pstride, kc, first, y, ldy, valid, kp, ng);
  }

  // Panels a tile of r rows takes at once in rows(): one or two rows take several, so that the
  // accumulators still cover the FMA latency. Codes with zero points: 2 panels at 1 row (the zero
  // points also take registers).
  static constexpr int panels_at_once(int r) {
    return r == 1 ? (Q && !SIGNED ? 2 : 4) : r == 2 ? 2 : 1;
  }

  // Panels [p, pe) for rows [0, R_), panels_at_once(R_) at a time (panel_calls).
  template <int R_>
  static void rows(const float* x, ptrdiff_t ldx, const unsigned char* w, ptrdiff_t pstride, int kc,
                   bool first, float* y, ptrdiff_t ldy, int p, int pe, int n, KPos kp,
                   NextGroup& ng) {
    panel_calls<panels_at_once(R_)>(
        p, pe, [&](int pc, auto np) __attribute__((always_inline)) {
          kp.panel = pc;
          tile_any<R_, decltype(np)::value>(x, ldx, w + pc * pstride, pstride, kc, first,
                                            y + pc * NR, ldy, n - pc * NR, kp, ng);
        });
  }

  // The tile() / tile_q() calls rows<r> makes over np panels, each of which runs the K block's k
  // steps once: the same panel_calls, counted.
  template <int R_>
  static int calls_of(int np) {
    int calls = 0;
    panel_calls<panels_at_once(R_)>(0, np, [&](int, auto) { ++calls; });
    return calls;
  }
  template <size_t... I>
  static int tile_calls_of(int r, int np, std::index_sequence<I...>) {
    static constexpr int (*fns[])(int) = {&calls_of<int(I) + 1>...};
    return fns[r - 1](np);
  }
  static int tile_calls(int r, int np) {
    return tile_calls_of(r, np, std::make_index_sequence<MR>{});
  }

  // The k steps of every row tile of every block over np panels of one K block of kc values: what
  // a group's prefetch of the next one is spread over.
  static long group_steps(const GemmArgs& a, int np, int kc) {
    long calls = 0;
    for (int b = 0; b < a.n_blocks; ++b)
      row_tiles<MR>(a.blocks[b].m, [&](int, int nr) { calls += tile_calls(nr, np); });
    return calls * kc;
  }

  using RowsFn = void (*)(const float*, ptrdiff_t, const unsigned char*, ptrdiff_t, int, bool,
                          float*, ptrdiff_t, int, int, int, KPos, NextGroup&);
  // rows<r> for r in [1, MR], whatever the vector width's MR.
  template <size_t... I>
  static RowsFn rows_fn_of(int r, std::index_sequence<I...>) {
    static constexpr RowsFn fns[] = {&rows<int(I) + 1>...};
    return fns[r - 1];
  }
  static RowsFn rows_fn(int r) {
    return rows_fn_of(r, std::make_index_sequence<MR>{});
  }

  // Reduction values per K block: the larger of two lengths.
  // - The block's activations of every row (rows x kc floats) stay in L2 (3/8 of it,
  //   k_block_budget_floats) while the panels stream past them once. A fixed 192 KiB was 6-8%
  //   slower with no cache on the 2 MiB-L2 Xeon (256 rows: 192-value blocks, each reloading and
  //   storing the accumulators) and no faster at 32 rows (docs/performance.md).
  // - A panel group's weights of the block take a quarter of L2 (l2_cache_bytes): 512 values of
  //   k for f32 on AVX2 at a 512 KiB L2 (the AMD EPYC's), 1,024 for bf16 (1,024 / 2,048 on the
  //   Xeon's 2 MiB with AVX-512 panels). At many rows the first rule alone cut K into
  //   short blocks (192 values at 256 rows there), and whole forwards at 256 rows ran 3-13%
  //   slower than with blocks this long, which read the rows from L3 once per panel group
  //   (forwards alternated call by call; packed_gemm_bench's BM_PackedKBlock;
  //   docs/performance.md). Integer codes keep the first rule alone: not measured at many rows.
  static int k_block(int total_rows, int k) {
    int kc = k_block_budget_floats() / (total_rows > 0 ? total_rows : 1);
    const long kw = Q ? 0 : l2_cache_bytes() / 4 / (kPanelGroup * KSTRIDE);
    if (kc < kw) kc = int(kw);
    kc = kc < 128 ? 128 : kc;
    kc = (kc + 7) / 8 * 8;
    return kc > k ? k : kc;
  }

  // The rows of all blocks and their row tiles (a panel group's tiles).
  struct RowCount {
    int rows = 0, tiles = 0;
  };

  // L2 left for panel weights (this group's and the next one's, prefetched) once a K block's
  // activations of every row are in: 7/8 of it, some slack. One expression for panel_group's
  // choice and block_pass's prefetch budget, so that the two agree.
  static long l2_room(int rows, int kc) {
    return l2_cache_bytes() / 8 * 7 - long(rows) * kc * long(sizeof(float));
  }

  // Panels per group at K blocks of kc values: kPanelGroup, or 2 where two groups of 4 (the one
  // computing and the next one, prefetched: block_pass) would not fit in 7/8 of L2 beside the
  // block's activations. On a 512 KiB L2 (the AMD EPYC's, measured) 32 rows over f32 weights at
  // K 1,024 take groups of 2: with 4, the next group's prefetch had room for a quarter of it, and
  // whole 32-row forwards ran about 3% slower (median of eight alternated runs). Groups of 1
  // measured about as 2 at 32 rows and 17% slower than 4 at 128 in one run, so 2 is the floor
  // (docs/performance.md). On the Xeon's 2 MiB the d 1,024 products keep 4. No effect on the
  // bits: a group only orders the tiles, each output is still one chain.
  static int panel_group(RowCount rc, int kc) {
    // One row tile: groups of 4 (one row takes 4 panels at once: rows()); it prefetches the next
    // group where L2 has room for it (block_pass), not measured against groups of 2 on a small
    // L2.
    if (rc.tiles <= 1) return kPanelGroup;
    const long room = l2_room(rc.rows, kc);
    const long seg = long(kc) * KSTRIDE;
    // No room for two panels (many rows: block_pass then prefetches nothing): groups of 4, which
    // the many-row K blocks are sized for (k_block).
    if (2 * seg > room) return kPanelGroup;
    return 2 * kPanelGroup * seg <= room ? kPanelGroup : 2;
  }

  // One K block [k0, k0 + kcur) (codes: groups [g0, g1)) of every panel and row.
  static void block_pass(const GemmArgs& a, int k0, int kcur, int g0, int g1, RowCount rc,
                         int group_size) {
    const auto* w0 = static_cast<const unsigned char*>(a.w);
    const ptrdiff_t pstride = ptrdiff_t(a.k) * KSTRIDE;
    const bool first = k0 == 0;
    const KPos kp{&a.q, k0, g0, g1, 0};
    const long l2_free = l2_room(rc.rows, kcur);
    NextGroup ng;
    int group = -1;
    for_each_tile<MR>(a, group_size, [&](const Block& bl, int r, int nr, int pg, int pe) {
      if (pg != group) {
        group = pg;
        ng = NextGroup{};
        if (a.prefetch_next_group) {
          // The next group's panels at this K block, spread over the k steps of every row tile
          // of this group, the first included (it reads this group from L2 where the group
          // before fetched it):
          // - Every tile: spread over the later tiles alone (sessions 14-25), two tiles (16
          //   rows) fetched in turns: the first tile streamed its group while the next group's
          //   lines waited, then the second computed from L2 while they came.
          // - At most one line per two k steps: denser, the prefetches hold the line-fill
          //   buffers the tiles' loads need (one 8-row tile over f32 weights from DRAM, two lines
          //   a step, ran about 10% slower than with no prefetch; docs/performance.md, session
          //   26). Where a group has more lines than that, its first lines are fetched.
          // - At most what L2 holds beside this group's weights and the rows' activations: more
          //   would evict what the later tiles read (f32 weights at K 4,096, 2 MiB a group, ran
          //   25% slower). (Also fetching the next K block's first group after the last group
          //   measured no faster: docs/performance.md.)
          const int np = pe - pg;
          const int ne = pe + group_size < a.p1 ? pe + group_size : a.p1;
          const ptrdiff_t seg = ptrdiff_t(kcur) * KSTRIDE;  // a panel's bytes in this K block
          const long steps = group_steps(a, np, kcur);      // O(tiles), once a group
          long room = l2_free - np * seg;
          if (room > steps / kStepsPerLine * 64) room = steps / kStepsPerLine * 64;
          ng = NextGroup::over(w0 + pe * pstride + ptrdiff_t(k0) * KSTRIDE, pstride, seg, ne - pe,
                               steps, room);
        }
      }
      rows_fn(nr)(bl.x + r * bl.ldx + k0, bl.ldx, w0 + k0 * KSTRIDE, pstride, kcur, first,
                  bl.y + r * bl.ldy, bl.ldy, pg, pe, a.n, kp, ng);
    });
  }

  static void run(const GemmArgs& a) {
    RowCount rc;
    for (int b = 0; b < a.n_blocks; ++b) {
      rc.rows += a.blocks[b].m;
      rc.tiles += (a.blocks[b].m + MR - 1) / MR;
    }
    if (rc.rows <= 0 || a.p1 <= a.p0) return;
    const int kc = a.kc > 0 ? (a.kc < a.k ? a.kc : a.k) : k_block(rc.rows, a.k);
    const int group_size = a.group > 0 ? a.group : panel_group(rc, kc);
    if constexpr (Q) {
      // Whole groups per K block, as many as fit in kc (at least one).
      const int32_t* gs = a.q.gstart;
      const int G = a.q.n_groups;
      for (int g0 = 0, g1; g0 < G; g0 = g1) {
        for (g1 = g0 + 1; g1 < G && gs[g1 + 1] - gs[g0] <= kc;) ++g1;
        block_pass(a, gs[g0], gs[g1] - gs[g0], g0, g1, rc, group_size);
      }
    } else {
      for (int k0 = 0; k0 < a.k; k0 += kc)
        block_pass(a, k0, a.k - k0 < kc ? a.k - k0 : kc, 0, 0, rc, group_size);
    }
  }
};

template <class V>
void run_gemm(const GemmArgs& a) {
  const bool rw = a.round_w;
  switch (a.wtype) {
    case WType::kF32:
      return rw ? PackedGemm<V, WType::kF32, true>::run(a)
                : PackedGemm<V, WType::kF32, false>::run(a);
    case WType::kBF16:
      return PackedGemm<V, WType::kBF16, false>::run(a);  // bf16 weights need no rounding
    case WType::kF16:
      return rw ? PackedGemm<V, WType::kF16, true>::run(a)
                : PackedGemm<V, WType::kF16, false>::run(a);
    // Codes need no rounding for bf16 compute: q - z is an integer of at most 9 bits, exact in
    // bf16, and the scale multiplies the f32 group sum.
    case WType::kQ8:
      return PackedGemm<V, WType::kQ8, false>::run(a);
    case WType::kQ4:
      return PackedGemm<V, WType::kQ4, false>::run(a);
    case WType::kS8:
      return PackedGemm<V, WType::kS8, false>::run(a);
    case WType::kS4:
      return PackedGemm<V, WType::kS4, false>::run(a);
  }
}

// kChains independent FMA chains for `iters` rounds, no memory traffic: the core's FMA peak.
template <class V, int kChains>
float fma_burn(long iters, float seed) {
  typename V::R acc[kChains];
  float lane[V::W];
  for (int i = 0; i < kChains; ++i) {
    for (float& l : lane) l = seed + float(i);
    acc[i] = V::load(lane);
  }
  const float mf = 0.999999f, cf = 1e-7f;
  const typename V::R m = V::bcast(&mf), c = V::bcast(&cf);
  for (long t = 0; t < iters; ++t)
#pragma GCC unroll 32
    for (int i = 0; i < kChains; ++i) acc[i] = V::fma(acc[i], m, c);
  float sum = 0.0f;
  for (int i = 0; i < kChains; ++i) {
    V::store(lane, acc[i]);
    sum += lane[0] + lane[V::W - 1];
  }
  return sum;
}

// Sum of n floats (n a multiple of 4 * V::W) in four vector chains: a streaming read at the width
// the kernels load weights with. The load width matters for a read from DRAM: on a KVM Emerald
// Rapids, 16-byte loads streamed 14 GB/s on two cores where 32- and 64-byte loads streamed 24-28
// (more bytes in flight per load the core can hold).
template <class V>
float read_sum(const float* p, size_t n) {
  typename V::R a0 = V::zero(), a1 = a0, a2 = a0, a3 = a0;
  const float one_f = 1.0f;
  const typename V::R one = V::bcast(&one_f);
  for (size_t i = 0; i < n; i += 4 * V::W) {
    a0 = V::fma(V::load(p + i), one, a0);
    a1 = V::fma(V::load(p + i + V::W), one, a1);
    a2 = V::fma(V::load(p + i + 2 * V::W), one, a2);
    a3 = V::fma(V::load(p + i + 3 * V::W), one, a3);
  }
  float lane[4][V::W];
  V::store(lane[0], a0);
  V::store(lane[1], a1);
  V::store(lane[2], a2);
  V::store(lane[3], a3);
  float sum = 0.0f;
  for (auto& l : lane)
    for (float v : l) sum += v;
  return sum;
}

}  // namespace dllmq::kern
