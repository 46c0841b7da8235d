#include "util/finite_scan.h"

#include <cmath>

namespace dllmq {

namespace {

// Lanes of the fold: 16 independent sums, which GCC turns into vector adds even at the portable
// -march=x86-64-v2 (SSE, four lanes an instruction): each lane adds only its own values, so no
// reassociation is needed to vectorise it.
constexpr size_t kLanes = 16;

}  // namespace

size_t first_non_finite(const float* p, size_t n) {
  float acc[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) acc[j] += p[i + j] * 0.0f;
  bool any = false;
  for (size_t j = 0; j < kLanes; ++j) any |= acc[j] != acc[j];
  for (size_t k = i; k < n; ++k) any |= !std::isfinite(p[k]);
  if (!any) return n;
  for (size_t k = 0; k < n; ++k)
    if (!std::isfinite(p[k])) return k;
  return n;
}

}  // namespace dllmq
