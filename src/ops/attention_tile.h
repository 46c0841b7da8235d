// Pieces the f32 and AMX attention paths share (ops/attention.cpp, ops/attention_amx.cpp).
#pragma once

#include <cstddef>
#include <span>

#include "ops/attention.h"

namespace dllmq {

// Query rows one work item (KV head, query chunk) takes: bounds the per-thread score and
// accumulator tiles (8 AMX row tiles on the tile path).
inline constexpr int kQueryChunk = 128;

// The keys of all sources (rows) and the largest tile any hands out (tile, at least 1), and
// whether the work (nq queries x those keys x n_heads x hd) is worth a parallel region.
struct KeyExtent {
  int rows = 0;
  int tile = 1;
  bool parallel = false;
};
KeyExtent key_extent(std::span<const KvRowSource* const> sources, int nq, int n_heads, int hd);

// s[k] = exp(s[k] - m) over a row of n scores, returning the sum of the terms.
using ExpSubFn = double (*)(float* s, int n, float m);

// Folds one tile of scores (rows x n, row stride ld) into the running max m, sum l and
// accumulator acc (rows x hd, row stride ld_acc): rescales what was accumulated so far and turns
// the scores into unnormalised probabilities with exp_sub (the f32 path: ops/exp_sum.h's
// exp_sub_f32).
void online_softmax_tile(float* s, int rows, int n, int ld, float* m, float* l, float* acc, int hd,
                         int ld_acc, ExpSubFn exp_sub);

// out row i (row stride ld_out) = acc row i (row stride ld_acc) / l[i], hd values, for `rows`
// rows (0 where l is 0).
void normalize_rows(const float* acc, int ld_acc, const float* l, int rows, int hd, float* out,
                    size_t ld_out);

}  // namespace dllmq
