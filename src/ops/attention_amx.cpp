#include "ops/attention_amx.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "ops/amx_gemm.h"
#include "ops/amx_kernel.h"
#include "ops/attention_tile.h"
#include "ops/gemm.h"

namespace dllmq {

namespace {

int round_up(int x, int m) {
  return (x + m - 1) / m * m;
}

// 64-byte aligned storage grown on demand (tile loads want aligned 1 KiB tiles).
template <class T>
struct Aligned {
  std::vector<T> v;
  T* get(size_t n) {
    const size_t slack = 64 / sizeof(T);
    if (v.size() < n + slack) v.resize(n + slack);
    return reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(v.data()) + 63) & ~uintptr_t(63));
  }
};

// Per-thread buffers, reused across calls.
struct AmxAttnScratch {
  Aligned<uint16_t> qb, kb, vb, pb;  // the operands in tile order
  Aligned<float> scores, acc;        // [rep][qn_pad][ld] each
  std::vector<float> k, v, m, l;     // a source's f32 rows, the running max and sum
};

}  // namespace

bool attention_amx_enabled() {
  return gemm_info().bf16_amx && amx_available();
}

void attention_amx(const float* q, int nq, int n_heads, int n_kv_heads, int hd,
                   std::span<const KvRowSource* const> sources, float* out) {
  const KeyExtent keys = key_extent(sources, nq, n_heads, hd);
  const int tile = keys.tile;
  const int rep = n_heads / n_kv_heads, ld = n_heads * hd;
  const int n_chunks = (nq + kQueryChunk - 1) / kQueryChunk;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int hd_pad = round_up(hd, 32);      // k of the score product
  const int hd_cols = round_up(hd, 16);     // columns of the output product
  const int tile_pad = round_up(tile, 32);  // k of the output product; score columns
#pragma omp parallel if (keys.parallel)
  {
    thread_local AmxAttnScratch w;
    const int qn_max = round_up(std::min(nq, kQueryChunk), 16);
    uint16_t* qb = w.qb.get(size_t(rep) * qn_max * hd_pad);
    uint16_t* kb = w.kb.get(size_t(tile_pad) * hd_pad);
    uint16_t* vb = w.vb.get(size_t(tile_pad) * hd_cols);
    uint16_t* pb = w.pb.get(size_t(qn_max) * tile_pad);
    float* scores = w.scores.get(size_t(rep) * qn_max * tile_pad);
    float* acc = w.acc.get(size_t(rep) * qn_max * hd_cols);
    if (w.k.size() < size_t(tile) * hd) {
      w.k.resize(size_t(tile) * hd);
      w.v.resize(size_t(tile) * hd);
    }
    if (w.m.size() < size_t(rep) * qn_max) {
      w.m.resize(size_t(rep) * qn_max);
      w.l.resize(size_t(rep) * qn_max);
    }
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int g = 0; g < n_kv_heads; ++g) {
      for (int c = 0; c < n_chunks; ++c) {
        const int q0 = c * kQueryChunk, qn = std::min(kQueryChunk, nq - q0);
        const int qn_pad = round_up(qn, 16), rt = qn_pad / 16;
        // [rep][qn_pad] rows: the query heads of KV head g, each padded to whole row tiles
        for (int j = 0; j < rep; ++j)
          kern::amx_convert_rows(q + size_t(q0) * ld + size_t(g * rep + j) * hd, ld, qn, hd,
                                 qb + size_t(j) * qn_pad * hd_pad, hd_pad);
        std::fill_n(w.m.data(), size_t(rep) * qn_pad, -std::numeric_limits<float>::infinity());
        std::fill_n(w.l.data(), size_t(rep) * qn_pad, 0.0f);
        std::fill_n(acc, size_t(rep) * qn_pad * hd_cols, 0.0f);
        for (auto* s : sources) {
          const int step = std::min(s->max_tile(), tile);
          for (int r0 = 0; r0 < s->n_rows(); r0 += step) {
            const int n = std::min(step, s->n_rows() - r0), n_pad = round_up(n, 32);
            // A bf16 store's rows go in as they are; others are read as f32 and rounded.
            if (const KvRowsBf16 h = s->rows_bf16(g, r0, n); h.k != nullptr) {
              kern::amx_pack_keys_bf16(h.k, h.ld, n, hd, hd_pad, kb);
              kern::amx_pack_values_bf16(h.v, h.ld, n, hd, n_pad, vb);
            } else {
              const KvRows r = s->rows(g, r0, n, w.k.data(), w.v.data());
              kern::amx_pack_keys(r.k, r.ld, n, hd, hd_pad, kb);
              kern::amx_pack_values(r.v, r.ld, n, hd, n_pad, vb);
            }
            for (int j = 0; j < rep; ++j) {
              float* sj = scores + size_t(j) * qn_pad * tile_pad;
              kern::amx_tiles_mm(qb + size_t(j) * qn_pad * hd_pad, rt, kb, (n + 15) / 16,
                                 hd_pad / 32, sj, tile_pad, false);
              for (int i = 0; i < qn; ++i) {
                float* si = sj + size_t(i) * tile_pad;
#pragma omp simd  // GCC 12 at -O2 leaves loops of unknown length scalar without it
                for (int t = 0; t < n; ++t) si[t] *= scale;
              }
              float* aj = acc + size_t(j) * qn_pad * hd_cols;
              online_softmax_tile(sj, qn, n, tile_pad, w.m.data() + size_t(j) * qn_pad,
                                  w.l.data() + size_t(j) * qn_pad, aj, hd, hd_cols,
                                  kern::amx_exp_sub_f32);
              kern::amx_convert_rows(sj, tile_pad, qn, n, pb, n_pad);
              kern::amx_tiles_mm(pb, rt, vb, hd_cols / 16, n_pad / 32, aj, hd_cols, true);
            }
          }
        }
        for (int j = 0; j < rep; ++j)
          normalize_rows(acc + size_t(j) * qn_pad * hd_cols, hd_cols,
                         w.l.data() + size_t(j) * qn_pad, qn, hd,
                         out + size_t(q0) * ld + size_t(g * rep + j) * hd, ld);
      }
    }
  }
}

}  // namespace dllmq
