// Stacked GEMMs of batched forwards: the canvases' rows multiplied together in tiles of a fixed
// row count, and the check that this gives every row the bits that the canvas's own GEMM gives
// it (what batched decoding needs to stay exact when it stacks). GEMM libraries promise no such
// thing: a kernel may block or split the reduction differently for another row count. On the
// shared test machine OpenBLAS 0.3.21 failed 30 of 36 stacked products, and oneDNN's brgemm
// gave products of fewer than 16 rows other bits (K = 1024) while all larger ones matched
// (docs/server.md). So small canvases keep their own GEMM, and the rest is checked, not assumed.
#pragma once

#include <span>
#include <vector>

#include "model/weights.h"
#include "ops/linear.h"

namespace dllmq {

// Rows per stacked GEMM. The stacked rows are cut into one share per thread, equal to within
// kTileQuantum rows, and each share into tiles of at most kStackedRows rows, multiples of
// kTileQuantum, of near-equal size: every thread then multiplies the same number of rows.
// (Fixed 128-row tiles with a 64-row tail left a thread idle for a third of each product when ten
// 16-row canvases made 160 rows: one tile of 128 against one of 64.) A tile may run on past the
// canvases' rows into spare rows of the buffers, whose results nobody reads. A server sees at
// most kStackedRows / kTileQuantum product shapes per weight matrix, not one per total row count,
// so it compiles and keeps few kernels: with any row count allowed a busy server's RSS grew by
// 37 MiB over 8 passes of the load test (bench/serve_load.py), with a few fixed shapes it levels
// off. 128-row tiles were 5-10% faster than 64-row ones on a d 1024 model (the weights stream
// from memory once per tile) and 256-row ones slower (docs/server.md).
constexpr int kStackedRows = 128;
constexpr int kTileQuantum = 16;
// Canvases with fewer rows keep a GEMM of their own (see above).
constexpr int kMinStackedRows = 16;

// Where a stacked forward puts each canvas's rows: canvases of fewer than kMinStackedRows rows
// first (rows [0, small_rows), a GEMM each), then the others (rows [small_rows, n), in tiles).
struct StackedLayout {
  struct Tile {
    int row0 = 0, rows = 0;
  };
  std::vector<int> row0;    // first row of each canvas, in canvas order
  std::vector<Tile> tiles;  // covering [small_rows, n), thread shares in order
  int small_rows = 0;
  int n = 0;
  // Rows the buffers must hold (the last tile's spare rows included).
  int capacity() const { return tiles.empty() ? n : tiles.back().row0 + tiles.back().rows; }
};
// `threads`: the threads a stacked product is spread over (gemm_threads()).
StackedLayout stacked_layout(std::span<const int> rows, int threads);

// The GEMM blocks of a stacked product over buffers laid out by `layout` (x: [capacity, ldx],
// y: [capacity, ldy]); `rows` as given to stacked_layout.
void stacked_blocks(const StackedLayout& layout, std::span<const int> rows, const float* x, int ldx,
                    float* y, int ldy, std::vector<LinearRows>& out);

// Checks the model's layer-0 projections at `dt` on seeded random activations: split the ways a
// batched forward splits its rows (equal cached-step blocks, a long canvas beside short ones,
// single rows), stacked as forward_batch stacks them (for 1, 2 and `threads` threads) against one
// block per canvas; and every tile shape a layout can make (kTileQuantum to kStackedRows rows, at
// several offsets) against one product over all the rows, so a row's bits are shown not to depend
// on the tile that holds it. True when every row is identical.
bool stacked_gemm_exact(const ModelWeights& w, ComputeDType dt, int threads);

}  // namespace dllmq
