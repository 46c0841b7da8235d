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

// Rows per stacked GEMM. Every stacked product has one of two row counts: tiles of kStackedRows,
// and a last tile of kStackedTailRows when the rest fits in it (a tile runs on past the canvases'
// rows into spare rows of the buffers, whose results nobody reads). A server then sees two
// product shapes per weight matrix, not one per total row count, so it compiles and keeps few
// kernels: with a variable last tile a busy server's RSS grew by 37 MiB over 8 passes of the load
// test (bench/serve_load.py), with fixed tiles by 13 MiB, levelling off. 64-row tiles cost 10%
// less CPU than 32-row ones on the embedded model; 128-row tiles were another 5-10% faster on a
// d 1024 model (8 canvases of 16 rows: the weights stream from memory once per tile) and 256-row
// ones slower (padding); the 64-row tail keeps small batches from computing 128 rows for 32
// (docs/server.md).
constexpr int kStackedRows = 128;
constexpr int kStackedTailRows = 64;
// Canvases with fewer rows keep a GEMM of their own (see above).
constexpr int kMinStackedRows = 16;

// Where a stacked forward puts each canvas's rows: canvases of fewer than kMinStackedRows rows
// first (rows [0, small_rows), a GEMM each), then the others (rows [small_rows, n), in tiles).
struct StackedLayout {
  std::vector<int> row0;  // first row of each canvas, in canvas order
  int small_rows = 0;
  int n = 0;
  // Rows the buffers must hold (the last tile's spare rows included).
  int capacity() const {
    const int rest = n - small_rows, full = rest / kStackedRows * kStackedRows;
    const int tail = rest == full                      ? 0
                     : rest - full <= kStackedTailRows ? kStackedTailRows
                                                       : kStackedRows;
    return small_rows + full + tail;
  }
};
StackedLayout stacked_layout(std::span<const int> rows);

// The GEMM blocks of a stacked product over buffers laid out by `layout` (x: [capacity, ldx],
// y: [capacity, ldy]); `rows` as given to stacked_layout.
void stacked_blocks(const StackedLayout& layout, std::span<const int> rows, const float* x, int ldx,
                    float* y, int ldy, std::vector<LinearRows>& out);

// Checks the model's layer-0 projections at `dt` on seeded random activations, split the ways a
// batched forward splits its rows (equal cached-step blocks, a long canvas beside short ones,
// single rows), stacked as forward_batch stacks them against one block per canvas. True when
// every canvas's rows are identical.
bool stacked_gemm_exact(const ModelWeights& w, ComputeDType dt);

}  // namespace dllmq
