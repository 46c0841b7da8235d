#include "ops/attention.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace dllmq {

namespace {

constexpr int kQueryChunk = 128;  // bounds the score tile to [128, n_keys] per thread

}  // namespace

void attention(const float* q, int nq, int n_heads, int n_kv_heads, int hd,
               std::span<const KvRowSource* const> sources, float* out) {
  int nk = 0;
  int max_src = 0;
  for (auto* s : sources) {
    nk += s->n_rows();
    max_src = std::max(max_src, s->n_rows());
  }
  const int rep = n_heads / n_kv_heads;
  const int ld = n_heads * hd;
  const int n_chunks = (nq + kQueryChunk - 1) / kQueryChunk;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // Work items: (kv head, query chunk); the heads of a group share the rows a source hands out.
  const bool par = double(nq) * nk * n_heads * hd > 1e6;
#pragma omp parallel if (par)
  {
    thread_local std::vector<float> scores, kscr, vscr;
    const size_t want_s = size_t(kQueryChunk) * rep * nk;
    if (scores.size() < want_s) scores.resize(want_s);
    if (kscr.size() < size_t(max_src) * hd) {
      kscr.resize(size_t(max_src) * hd);
      vscr.resize(size_t(max_src) * hd);
    }
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int g = 0; g < n_kv_heads; ++g) {
      for (int c = 0; c < n_chunks; ++c) {
        const int q0 = c * kQueryChunk, qn = std::min(kQueryChunk, nq - q0);
        // scores: [rep][qn, nk] for the query heads of KV head g.
        int col = 0;
        for (auto* s : sources) {
          const KvRows r = s->rows(g, kscr.data(), vscr.data());
          if (r.n == 0) continue;
          for (int j = 0; j < rep; ++j) {
            const int h = g * rep + j;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, qn, r.n, hd, scale,
                        q + size_t(q0) * ld + size_t(h) * hd, ld, r.k, r.ld, 0.0f,
                        scores.data() + size_t(j) * qn * nk + col, nk);
          }
          col += r.n;
        }
        for (int row = 0; row < rep * qn; ++row) {
          float* sr = scores.data() + size_t(row) * nk;
          float m = -std::numeric_limits<float>::infinity();
          for (int k = 0; k < nk; ++k) m = std::max(m, sr[k]);
          float sum = 0.0f;
          for (int k = 0; k < nk; ++k) {
            sr[k] = std::exp(sr[k] - m);
            sum += sr[k];
          }
          const float inv = 1.0f / sum;
          for (int k = 0; k < nk; ++k) sr[k] *= inv;
        }
        col = 0;
        bool first = true;
        for (auto* s : sources) {
          const KvRows r = s->rows(g, kscr.data(), vscr.data());
          if (r.n == 0) continue;
          for (int j = 0; j < rep; ++j) {
            const int h = g * rep + j;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, qn, hd, r.n, 1.0f,
                        scores.data() + size_t(j) * qn * nk + col, nk, r.v, r.ld,
                        first ? 0.0f : 1.0f, out + size_t(q0) * ld + size_t(h) * hd, ld);
          }
          first = false;
          col += r.n;
        }
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
      std::vector<float> kscr(size_t(s->n_rows()) * hd), vscr(size_t(s->n_rows()) * hd);
      KvRows r = s->rows(g, kscr.data(), vscr.data());
      for (int i = 0; i < r.n; ++i) {
        ks.emplace_back(r.k + size_t(i) * r.ld, r.k + size_t(i) * r.ld + hd);
        vs.emplace_back(r.v + size_t(i) * r.ld, r.v + size_t(i) * r.ld + hd);
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
