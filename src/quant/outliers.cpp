#include "quant/outliers.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"
#include "util/finite_scan.h"
#include "util/half.h"

namespace dllmq {

float percentile_inplace(std::span<float> v, double q) {
  if (v.empty()) fail("percentile_inplace: no values");
  if (!(q >= 0 && q <= 100)) fail("percentile_inplace: q = {} outside [0, 100]", q);
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) fail("percentile_inplace: NaN at index {}", i);
  }
  const double pos = q / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = std::min(static_cast<size_t>(pos), v.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  std::nth_element(v.begin(), v.begin() + lo, v.end());
  const double a = v[lo];
  if (frac <= 0 || lo + 1 >= v.size()) return static_cast<float>(a);
  // After nth_element everything past lo is >= v[lo]; the next order statistic is their minimum.
  const double b = *std::min_element(v.begin() + lo + 1, v.end());
  return static_cast<float>(a + frac * (b - a));
}

int split_outliers(const float* x, int n, float lower, float upper, std::vector<SparseEntry>& out) {
  // SparseEntry::index is 16 bits.
  if (n > 65536) fail("split_outliers: vector length {} exceeds 65536", n);
  int count = 0;
  for (int i = 0; i < n; ++i) {
    if (x[i] < lower || x[i] > upper) {
      out.push_back({static_cast<uint16_t>(i), f32_to_f16(x[i])});
      ++count;
    }
  }
  return count;
}

void check_finite(const float* x, size_t n, int row_len, int layer, int pos0, const char* what) {
  // The vectorised scan (util/finite_scan.h); the index is located only on failure.
  const size_t i = first_non_finite(x, n);
  if (i == n) return;
  const size_t len = row_len > 0 ? static_cast<size_t>(row_len) : 1;
  fail("{}: non-finite value ({}) at layer {}, position {}, channel {}", what,
       std::isnan(x[i]) ? "nan" : "inf", layer, pos0 + static_cast<long long>(i / len), i % len);
}

}  // namespace dllmq
