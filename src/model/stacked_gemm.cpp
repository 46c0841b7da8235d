#include "model/stacked_gemm.h"

#include <cstring>
#include <random>

namespace dllmq {

StackedLayout stacked_layout(std::span<const int> rows) {
  StackedLayout l;
  l.row0.resize(rows.size());
  for (size_t c = 0; c < rows.size(); ++c)
    if (rows[c] < kMinStackedRows) {
      l.row0[c] = l.small_rows;
      l.small_rows += rows[c];
    }
  l.n = l.small_rows;
  for (size_t c = 0; c < rows.size(); ++c)
    if (rows[c] >= kMinStackedRows) {
      l.row0[c] = l.n;
      l.n += rows[c];
    }
  return l;
}

void stacked_blocks(const StackedLayout& layout, std::span<const int> rows, const float* x, int ldx,
                    float* y, int ldy, std::vector<LinearRows>& out) {
  out.clear();
  for (size_t c = 0; c < rows.size(); ++c)
    if (rows[c] < kMinStackedRows && rows[c] > 0)
      out.push_back({x + size_t(layout.row0[c]) * ldx, rows[c], y + size_t(layout.row0[c]) * ldy});
  for (int r0 = layout.small_rows; r0 < layout.n;) {
    const int m = layout.n - r0 <= kStackedTailRows ? kStackedTailRows : kStackedRows;
    out.push_back({x + size_t(r0) * ldx, m, y + size_t(r0) * ldy, true});
    r0 += m;
  }
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
  std::vector<LinearRows> blocks;
  for (const Linear* l : projections)
    for (const auto& split : splits) {
      const StackedLayout layout = stacked_layout(split);
      const size_t cap = layout.capacity();
      std::vector<float> x(cap * l->in), alone(cap * l->out), stacked(cap * l->out);
      for (float& v : x) v = normal(rng);
      blocks.clear();
      for (size_t c = 0; c < split.size(); ++c)
        blocks.push_back({x.data() + size_t(layout.row0[c]) * l->in, split[c],
                          alone.data() + size_t(layout.row0[c]) * l->out});
      linear_grouped(blocks, *l, l->out, dt);
      stacked_blocks(layout, split, x.data(), l->in, stacked.data(), l->out, blocks);
      linear_grouped(blocks, *l, l->out, dt);
      if (std::memcmp(alone.data(), stacked.data(), size_t(layout.n) * l->out * sizeof(float)))
        return false;
    }
  return true;
}

}  // namespace dllmq
