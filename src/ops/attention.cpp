#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/attention_amx.h"
#include "ops/attention_tile.h"
#include "ops/exp_sum.h"
#include "ops/gemm.h"

namespace dllmq {

namespace {

// Per-thread buffers of the online-softmax loop, grown on demand and reused across calls.
struct AttnScratch {
  std::vector<float> scores, acc, m, l, k, v;
  void reserve(int rows, int tile, int hd) {
    auto grow = [](std::vector<float>& b, size_t n) {
      if (b.size() < n) b.resize(n);
    };
    grow(scores, size_t(rows) * tile);
    grow(acc, size_t(rows) * hd);
    grow(m, rows);
    grow(l, rows);
    grow(k, size_t(tile) * hd);
    grow(v, size_t(tile) * hd);
  }
};

}  // namespace

// The max and the exponentials run on the vector kernels of ops/exp_sum.h (scalar expf here took
// as long as the two products at a dual-cache step's 32 rows).
void online_softmax_tile(float* s, int rows, int n, int ld, float* m, float* l, float* acc, int hd,
                         int ld_acc, ExpSubFn exp_sub) {
  for (int r = 0; r < rows; ++r) {
    float* sr = s + size_t(r) * ld;
    const float mn = std::max(m[r], max_f32(sr, n));
    const float alpha = std::exp(m[r] - mn);  // 0 on the first tile (m = -inf)
    const float sum = static_cast<float>(exp_sub(sr, n, mn));
    l[r] = l[r] * alpha + sum;
    m[r] = mn;
    if (alpha != 1.0f) {
      float* a = acc + size_t(r) * ld_acc;
#pragma omp simd  // GCC 12 at -O2 leaves loops of unknown length scalar without it
      for (int t = 0; t < hd; ++t) a[t] *= alpha;
    }
  }
}

KeyExtent key_extent(std::span<const KvRowSource* const> sources, int nq, int n_heads, int hd) {
  KeyExtent e;
  for (auto* s : sources) {
    e.rows += s->n_rows();
    e.tile = std::max(e.tile, std::min(s->max_tile(), s->n_rows()));
  }
  e.parallel = double(nq) * e.rows * n_heads * hd > 1e6;
  return e;
}

void normalize_rows(const float* acc, int ld_acc, const float* l, int rows, int hd, float* out,
                    size_t ld_out) {
  for (int i = 0; i < rows; ++i) {
    const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
    const float* a = acc + size_t(i) * ld_acc;
    float* o = out + size_t(i) * ld_out;
#pragma omp simd
    for (int t = 0; t < hd; ++t) o[t] = a[t] * inv;
  }
}

void attention(const float* q, int nq, int n_heads, int n_kv_heads, int hd,
               std::span<const KvRowSource* const> sources, float* out, bool bf16) {
  if (bf16 && attention_amx_enabled()) {
    attention_amx(q, nq, n_heads, n_kv_heads, hd, sources, out);
    return;
  }
  const KeyExtent keys = key_extent(sources, nq, n_heads, hd);
  const int tile = keys.tile;
  const int rep = n_heads / n_kv_heads;
  const int ld = n_heads * hd;
  const int n_chunks = (nq + kQueryChunk - 1) / kQueryChunk;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // Work items: (kv head, query chunk); the query heads of a group share each K/V tile, so a
  // dequantized tile serves all of them.
#pragma omp parallel if (keys.parallel)
  {
    thread_local AttnScratch w;
    w.reserve(rep * std::min(nq, kQueryChunk), tile, hd);
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int g = 0; g < n_kv_heads; ++g) {
      for (int c = 0; c < n_chunks; ++c) {
        const int q0 = c * kQueryChunk, qn = std::min(kQueryChunk, nq - q0);
        const int rows = rep * qn;  // [rep][qn]: the query heads of KV head g
        std::fill_n(w.m.data(), rows, -std::numeric_limits<float>::infinity());
        std::fill_n(w.l.data(), rows, 0.0f);
        std::fill_n(w.acc.data(), size_t(rows) * hd, 0.0f);
        for (auto* s : sources) {
          const int step = std::min(s->max_tile(), tile);
          for (int r0 = 0; r0 < s->n_rows(); r0 += step) {
            const int n = std::min(step, s->n_rows() - r0);
            const KvRows r = s->rows(g, r0, n, w.k.data(), w.v.data());
            for (int j = 0; j < rep; ++j) {
              const int h = g * rep + j;
              sgemm(true, qn, n, hd, scale, q + size_t(q0) * ld + size_t(h) * hd, ld, r.k, r.ld,
                    0.0f, w.scores.data() + size_t(j) * qn * tile, tile);
            }
            online_softmax_tile(w.scores.data(), rows, n, tile, w.m.data(), w.l.data(),
                                w.acc.data(), hd, hd, exp_sub_f32);
            for (int j = 0; j < rep; ++j)
              sgemm(false, qn, hd, n, 1.0f, w.scores.data() + size_t(j) * qn * tile, tile, r.v,
                    r.ld, 1.0f, w.acc.data() + size_t(j) * qn * hd, hd);
          }
        }
        for (int j = 0; j < rep; ++j)
          normalize_rows(w.acc.data() + size_t(j) * qn * hd, hd, w.l.data() + size_t(j) * qn, qn,
                         hd, out + size_t(q0) * ld + size_t(g * rep + j) * hd, ld);
      }
    }
  }
}

void attention_ref(const float* q, int nq, int n_heads, int n_kv_heads, int hd,
                   std::span<const KvRowSource* const> sources, float* out) {
  const int rep = n_heads / n_kv_heads, ld = n_heads * hd;
  for (int h = 0; h < n_heads; ++h) {
    const int g = h / rep;
    std::vector<std::vector<float>> ks, vs;  // gathered rows of head g
    for (auto* s : sources) {
      const int step = s->max_tile();
      std::vector<float> kscr(size_t(step) * hd), vscr(size_t(step) * hd);
      for (int r0 = 0; r0 < s->n_rows(); r0 += step) {
        const KvRows r = s->rows(g, r0, std::min(step, s->n_rows() - r0), kscr.data(), vscr.data());
        for (int i = 0; i < r.n; ++i) {
          ks.emplace_back(r.k + size_t(i) * r.ld, r.k + size_t(i) * r.ld + hd);
          vs.emplace_back(r.v + size_t(i) * r.ld, r.v + size_t(i) * r.ld + hd);
        }
      }
    }
    for (int i = 0; i < nq; ++i) {
      const float* qi = q + size_t(i) * ld + size_t(h) * hd;
      std::vector<double> p(ks.size());
      double m = -1e300;
      for (size_t k = 0; k < ks.size(); ++k) {
        double d = 0;
        for (int t = 0; t < hd; ++t) d += double(qi[t]) * ks[k][t];
        p[k] = d / std::sqrt(double(hd));
        m = std::max(m, p[k]);
      }
      double sum = 0;
      for (auto& x : p) sum += (x = std::exp(x - m));
      for (int t = 0; t < hd; ++t) {
        double acc = 0;
        for (size_t k = 0; k < ks.size(); ++k) acc += p[k] / sum * vs[k][t];
        out[size_t(i) * ld + size_t(h) * hd + t] = float(acc);
      }
    }
  }
}

}  // namespace dllmq
