// Dense-and-sparse split (KVQuant §3.1.4, METHODS.md §2): values outside per-vector thresholds
// [lower, upper] are outliers, stored sparsely at fp16 and excluded from the dense range.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace dllmq {

// Percentile q in [0, 100] of the values with linear interpolation between order statistics
// (numpy.percentile / torch.quantile default): position q/100 * (n - 1). Reorders v.
float percentile_inplace(std::span<float> v, double q);

struct SparseEntry {
  uint16_t index;  // position in the vector
  uint16_t value;  // fp16 bits
};

// Splits x[0..n) at [lower, upper]: appends the outliers (x < lower or x > upper) to `out` in
// index order and returns their count.
int split_outliers(const float* x, int n, float lower, float upper, std::vector<SparseEntry>& out);

// Throws dllmq::Error "<what>: non-finite value (nan|inf) at layer L, position P, ..." if any of
// x[0..n) is NaN or Inf. row_len tells how to turn an index into (position, channel).
void check_finite(const float* x, size_t n, int row_len, int layer, int pos0, const char* what);

}  // namespace dllmq
