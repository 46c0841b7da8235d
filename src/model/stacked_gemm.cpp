#include "model/stacked_gemm.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

namespace dllmq {

void stacked_row_blocks(const float* x, int ldx, float* y, int ldy, int n,
                        std::vector<LinearRows>& out) {
  out.clear();
  for (int r0 = 0; r0 < n; r0 += kStackedRows)
    out.push_back({x + size_t(r0) * ldx, kStackedRows, y + size_t(r0) * ldy});
}

bool stacked_gemm_exact(const ModelWeights& w, ComputeDType dt) {
  if (w.layers.empty()) return false;
  const LayerWeights& L = w.layers[0];
  const Linear* projections[] = {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down};
  // Row counts of the canvases of one batched forward.
  const std::vector<std::vector<int>> splits = {
      {16, 16, 16, 16, 16, 16, 16, 16}, {1, 2, 3, 5, 8, 13, 21, 34}, {79, 32, 7}, {130, 16, 33}};
  std::mt19937 rng(20240611);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const Linear* l : projections)
    for (const auto& split : splits) {
      int n = 0;
      for (int r : split) n += r;
      const size_t cap = stacked_rows_capacity(n);
      std::vector<float> x(cap * l->in), alone(size_t(n) * l->out), stacked(cap * l->out);
      for (float& v : x) v = normal(rng);
      std::vector<LinearRows> blocks;
      int r0 = 0;
      for (int r : split) {
        blocks.push_back({x.data() + size_t(r0) * l->in, r, alone.data() + size_t(r0) * l->out});
        r0 += r;
      }
      linear_grouped(blocks, *l, l->out, dt);
      stacked_row_blocks(x.data(), l->in, stacked.data(), l->out, n, blocks);
      linear_grouped(blocks, *l, l->out, dt);
      if (std::memcmp(alone.data(), stacked.data(), alone.size() * sizeof(float)) != 0)
        return false;
    }
  return true;
}

}  // namespace dllmq
