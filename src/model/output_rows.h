// The rows of a forward whose final hidden states anything reads, and the last layer run on them
// alone after its attention. Every row's K and V feed attention, so every layer computes q, k, v
// and attention for every row; but after the last layer only the rows that reach the LM head are
// read, and a row's output projection, residual and MLP depend on no other row's. So the last
// layer runs those on the output rows only (llama.cpp drops the unused rows before its last
// layer's output projection the same way). Attention stays whole: its products (oneDNN's sgemm)
// give a row other bits beside other rows, so fewer query rows would change the output rows' bits.
// The output rows get the bits they get when every row is computed wherever the projections' bits
// do not depend on their row count (the packed and AMX kernels; ops/packed_gemm.h). A decode step
// of LLaDA needs logits for its block's masked rows only: with no cache 32 of 256 rows at most,
// with the dual cache the masked ones of 32. On a 4-layer model that is most of a quarter of the
// projections' work; on LLaDA-8B's 32 layers, most of 1/32 of it.
#pragma once

#include <span>
#include <vector>

namespace dllmq {

struct ForwardArgs;
struct CanvasForward;

// The output rows of a canvas: its LM-head rows (ForwardArgs::logits, or its logit_rows where it
// names them). A canvas that asks for no logits, or that an observer watches (observers see every
// row of every layer), keeps every row: a forward run for its store writes or its whole-layer
// timing computes what it always did.
int output_row_count(const ForwardArgs& a);

// The output rows of a batched forward, laid out compactly in canvas order.
struct OutputRows {
  std::vector<int> row0;   // canvas c's rows are compact rows [row0[c], row0[c] + count[c])
  std::vector<int> count;  // output_row_count of each canvas
  std::vector<int> src;    // each compact row's row in the forward's activation buffers
  int total() const { return static_cast<int>(src.size()); }
};

// canvases[c]'s rows start at row `row0[c]` of the activation buffers. Checks every canvas's
// logit_rows (ascending, inside its logits rows) and fails naming the bad one.
OutputRows select_output_rows(std::span<const CanvasForward> canvases, std::span<const int> row0);

// dst row i = src row rows[i] (gather), or dst row rows[i] = src row i (scatter); rows of `ld`
// floats.
void gather_rows(const float* src, int ld, std::span<const int> rows, float* dst);
void scatter_rows(const float* src, int ld, std::span<const int> rows, float* dst);

}  // namespace dllmq
