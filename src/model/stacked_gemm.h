// Stacked GEMMs of batched forwards: the canvases' rows multiplied together in tiles of a fixed
// row count, and the check that this gives every row the bits that the canvas's own GEMM gives
// it (what batched decoding needs to stay exact when it stacks). GEMM
// libraries promise no such thing: a kernel may block or split the reduction differently for
// another row count. On the shared test machine oneDNN's f32 brgemm kernels passed for every split
// tried and OpenBLAS 0.3.21 failed 30 of 36 (docs/server.md), so it is checked, not assumed.
#pragma once

#include "model/weights.h"
#include "ops/linear.h"

#include <vector>

namespace dllmq {

// Rows per stacked GEMM. Every stacked product has exactly this many rows (the last tile runs on
// past the canvases' rows into spare rows of the buffers, whose results nobody reads): a server
// then sees one product shape per weight matrix, not one per total row count, so it compiles
// and keeps few kernels. With a variable last tile a busy server's RSS grew by 37 MiB over 8
// passes of the load test (bench/serve_load.py), with fixed tiles by 13 MiB, levelling off;
// 64-row tiles cost 10% less CPU than 32-row ones on the embedded model (docs/server.md).
constexpr int kStackedRows = 64;

// Rows the buffers of a stacked product over `n` rows must hold.
inline int stacked_rows_capacity(int n) {
  return (n + kStackedRows - 1) / kStackedRows * kStackedRows;
}

// `n` contiguous rows (x: [n, ldx], y: [n, ldy], both holding stacked_rows_capacity(n) rows) as
// GEMM blocks of kStackedRows rows.
void stacked_row_blocks(const float* x, int ldx, float* y, int ldy, int n,
                        std::vector<LinearRows>& out);

// Checks the model's layer-0 projections at `dt` on seeded random activations, split the ways a
// batched forward splits its rows (equal cached-step blocks, a long canvas beside short ones,
// single rows), stacked as forward_batch stacks them against one block per canvas. True when
// all are identical.
bool stacked_gemm_exact(const ModelWeights& w, ComputeDType dt);

}  // namespace dllmq
