#include "model/stacked_gemm.h"

#include <algorithm>
#include <cstring>
#include <random>

namespace dllmq {

namespace {

int round_up(int x, int q) {
  return (x + q - 1) / q * q;
}

}  // namespace

StackedLayout stacked_layout(std::span<const int> rows, int threads) {
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
  const int rest = l.n - l.small_rows;
  if (rest == 0) return l;
  const int nt = std::max(threads, 1);
  const int share = round_up((rest + nt - 1) / nt, kTileQuantum);
  for (int s0 = 0; s0 < rest; s0 += share) {
    const int s_rows = round_up(std::min(share, rest - s0), kTileQuantum);
    const int k = (s_rows + kStackedRows - 1) / kStackedRows;  // tiles in this share
    const int tile = round_up((s_rows + k - 1) / k, kTileQuantum);
    for (int t0 = 0; t0 < s_rows; t0 += tile)
      l.tiles.push_back({l.small_rows + s0 + t0, std::min(tile, s_rows - t0)});
  }
  return l;
}

void stacked_blocks(const StackedLayout& layout, std::span<const int> rows, const float* x, int ldx,
                    float* y, int ldy, std::vector<LinearRows>& out) {
  out.clear();
  for (size_t c = 0; c < rows.size(); ++c)
    if (rows[c] < kMinStackedRows && rows[c] > 0)
      out.push_back({x + size_t(layout.row0[c]) * ldx, rows[c], y + size_t(layout.row0[c]) * ldy});
  for (const StackedLayout::Tile& t : layout.tiles)
    out.push_back({x + size_t(t.row0) * ldx, t.rows, y + size_t(t.row0) * ldy, true});
}

bool stacked_gemm_exact(const ModelWeights& w, ComputeDType dt, int threads) {
  if (w.layers.empty()) return false;
  const LayerWeights& L = w.layers[0];
  const Linear* projections[] = {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down};
  // Row counts of the canvases of one batched forward.
  const std::vector<std::vector<int>> splits = {{16, 16, 16, 16, 16, 16, 16, 16},
                                                {1, 2, 3, 5, 8, 13, 21, 34},
                                                {79, 32, 7},
                                                {130, 16, 33},
                                                {16, 16, 16, 16, 16, 16, 16, 16, 16, 16}};
  std::mt19937 rng(20240611);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<LinearRows> blocks;
  for (const Linear* l : projections) {
    if (l->empty()) continue;  // a MoE layer's dense MLP (its experts never stack)
    for (const auto& split : splits)
      for (const int nt : {1, 2, threads}) {
        const StackedLayout layout = stacked_layout(split, nt);
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
    // Every tile shape at a few offsets against one product over all rows: a canvas's rows may
    // sit anywhere in a tile of any of these shapes, or span two tiles.
    constexpr int kRows = 2 * kStackedRows + kTileQuantum;
    std::vector<float> x(size_t(kRows) * l->in), all(size_t(kRows) * l->out),
        tiled(size_t(kRows) * l->out);
    for (float& v : x) v = normal(rng);
    linear(x.data(), kRows, *l, all.data(), l->out, dt);
    for (int m = kTileQuantum; m <= kStackedRows; m += kTileQuantum)
      for (const int r0 : {0, kTileQuantum, kRows - m}) {
        const LinearRows tile{x.data() + size_t(r0) * l->in, m, tiled.data() + size_t(r0) * l->out,
                              true};
        linear_grouped({&tile, 1}, *l, l->out, dt);
        if (std::memcmp(all.data() + size_t(r0) * l->out, tiled.data() + size_t(r0) * l->out,
                        size_t(m) * l->out * sizeof(float)))
          return false;
      }
  }
  return true;
}

}  // namespace dllmq
