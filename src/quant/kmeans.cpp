#include "quant/kmeans.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "util/error.h"

namespace dllmq {
namespace {

// Midpoint of two centroids in double: exact for floats of similar magnitude, so `x <= mid`
// decides "closer to (or tied with) the lower centroid" without float rounding.
double midpoint(float lo, float hi) {
  return (static_cast<double>(lo) + hi) * 0.5;
}

}  // namespace

int nearest_centroid(const float* c, int k, float x) {
  // First t with x <= mid(c[t], c[t + 1]); none means the last centroid.
  int lo = 0, hi = k - 1;
  while (lo < hi) {
    const int t = (lo + hi) / 2;
    if (x <= midpoint(c[t], c[t + 1])) {
      hi = t;
    } else {
      lo = t + 1;
    }
  }
  return lo;
}

std::vector<float> weighted_kmeans_1d(std::span<const float> x, std::span<const float> w, int k,
                                      int max_iter) {
  const size_t n = x.size();
  if (n == 0) fail("weighted_kmeans_1d: no data");
  if (k < 1) fail("weighted_kmeans_1d: k = {} must be >= 1", k);
  if (max_iter < 0) fail("weighted_kmeans_1d: max_iter = {} must be >= 0", max_iter);
  if (!w.empty() && w.size() != n) {
    fail("weighted_kmeans_1d: {} weights for {} values", w.size(), n);
  }

  std::vector<std::pair<float, float>> xw(n);  // (value, weight), sorted by value
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) fail("weighted_kmeans_1d: non-finite value {} at index {}", x[i], i);
    const float wi = w.empty() ? 1.0f : w[i];
    if (!std::isfinite(wi) || wi < 0) {
      fail("weighted_kmeans_1d: weight {} at index {} must be finite and >= 0", wi, i);
    }
    xw[i] = {x[i], wi};
  }
  std::sort(xw.begin(), xw.end());
  const float x_min = xw.front().first, x_max = xw.back().first;

  // Prefix sums over the sorted order: W[i] = sum of w, S[i] = sum of w * (x - x_min) over the
  // first i values. Centring on x_min keeps the sums small when |x| is large next to the range.
  std::vector<double> W(n + 1), S(n + 1);
  W[0] = S[0] = 0;
  for (size_t i = 0; i < n; ++i) {
    W[i + 1] = W[i] + xw[i].second;
    S[i + 1] = S[i] + xw[i].second * (static_cast<double>(xw[i].first) - x_min);
  }
  const double total = W[n];
  if (!(total > 0)) fail("weighted_kmeans_1d: the weights sum to {}, must be > 0", total);

  // Initial centroids: weighted quantiles (i + 0.5) / k, i.e. the first sorted value whose
  // cumulative weight reaches the target (always a value of positive weight).
  std::vector<float> c(k);
  for (int i = 0; i < k; ++i) {
    const double target = (i + 0.5) / k * total;
    const size_t j = std::lower_bound(W.begin() + 1, W.end(), target) - (W.begin() + 1);
    c[i] = xw[std::min(j, n - 1)].first;
  }

  // Lloyd on sorted data: cluster t is the run of values in (mid(t-1, t), mid(t, t+1)]
  // (ties to the lower centroid, as in nearest_centroid), found by binary search; its weighted
  // mean comes from the prefix sums, so an iteration costs O(k log n).
  const double tol = 1e-7 * (static_cast<double>(x_max) - x_min);
  std::vector<size_t> end(k);
  for (int iter = 0; iter < max_iter; ++iter) {
    for (int t = 0; t + 1 < k; ++t) {
      const double mid = midpoint(c[t], c[t + 1]);
      end[t] =
          std::upper_bound(xw.begin(), xw.end(), mid,
                           [](double m, const std::pair<float, float>& p) { return m < p.first; }) -
          xw.begin();
    }
    end[k - 1] = n;
    double moved = 0;
    size_t begin = 0;
    for (int t = 0; t < k; ++t) {
      const size_t e = std::max(begin, end[t]);
      const double wsum = W[e] - W[begin];
      if (wsum > 0) {  // an empty (or weightless) cluster keeps its centroid
        const float next = static_cast<float>(x_min + (S[e] - S[begin]) / wsum);
        moved = std::max(moved, std::fabs(static_cast<double>(next) - c[t]));
        c[t] = next;
      }
      begin = e;
    }
    // Means of consecutive runs are already ordered; sorting guards the rounding edge cases.
    std::sort(c.begin(), c.end());
    if (moved <= tol) break;
  }
  return c;
}

double weighted_sq_error(std::span<const float> x, std::span<const float> w,
                         std::span<const float> c) {
  if (c.empty()) fail("weighted_sq_error: no centroids");
  if (!w.empty() && w.size() != x.size()) {
    fail("weighted_sq_error: {} weights for {} values", w.size(), x.size());
  }
  const int k = static_cast<int>(c.size());
  double err = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = static_cast<double>(x[i]) - c[nearest_centroid(c.data(), k, x[i])];
    err += (w.empty() ? 1.0 : static_cast<double>(w[i])) * d * d;
  }
  return err;
}

}  // namespace dllmq
