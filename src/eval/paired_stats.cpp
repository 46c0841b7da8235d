#include "eval/paired_stats.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace dllmq::eval {

uint64_t SplitMix64::next() {
  uint64_t z = (s_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

size_t SplitMix64::below(size_t n) {
  const double u = double(next() >> 11) * 0x1.0p-53;
  return std::min(n - 1, size_t(u * double(n)));
}

void bootstrap_replicates(
    const std::vector<size_t>& sizes, int n_replicates, uint64_t seed,
    const std::function<void(int b, const std::vector<std::vector<uint32_t>>& counts)>& fn) {
  if (n_replicates < 1) fail("bootstrap: {} replicates; at least 1 is needed", n_replicates);
  SplitMix64 rng(seed);
  std::vector<std::vector<uint32_t>> counts(sizes.size());
  for (int b = 0; b < n_replicates; ++b) {
    for (size_t u = 0; u < sizes.size(); ++u) {
      counts[u].assign(sizes[u], 0);
      for (size_t i = 0; i < sizes[u]; ++i) ++counts[u][rng.below(sizes[u])];
    }
    fn(b, counts);
  }
}

double percentile(std::vector<double>& v, double q) {
  if (v.empty()) fail("percentile of no values");
  std::sort(v.begin(), v.end());
  const double pos = q / 100.0 * double(v.size() - 1);
  const size_t i = size_t(std::floor(pos));
  if (i + 1 >= v.size()) return v.back();
  return v[i] + (pos - double(i)) * (v[i + 1] - v[i]);
}

Interval percentile_interval(std::vector<double> r, double level) {
  const double tail = (1.0 - level) / 2.0 * 100.0;
  Interval iv;
  iv.lo = percentile(r, tail);
  iv.hi = percentile(r, 100.0 - tail);
  return iv;
}

Interval bootstrap_mean_interval(const std::vector<double>& x, int n_replicates, uint64_t seed,
                                 double level) {
  if (x.empty()) fail("bootstrap of no values");
  std::vector<double> means(n_replicates);
  bootstrap_replicates({x.size()}, n_replicates, seed, [&](int b, const auto& counts) {
    double s = 0;
    for (size_t i = 0; i < x.size(); ++i) s += counts[0][i] * x[i];
    means[b] = s / double(x.size());
  });
  return percentile_interval(std::move(means), level);
}

double mcnemar_exact_p(int64_t b, int64_t c) {
  if (b < 0 || c < 0) fail("mcnemar: negative counts {} / {}", b, c);
  const int64_t n = b + c, k = std::min(b, c);
  if (n == 0) return 1.0;
  // P[X <= k] for X ~ Binomial(n, 1/2), summed in log space (n may be in the thousands).
  const double ln_half_n = double(n) * std::log(0.5);
  double sum = 0;
  for (int64_t i = 0; i <= k; ++i)
    sum += std::exp(std::lgamma(double(n) + 1) - std::lgamma(double(i) + 1) -
                    std::lgamma(double(n - i) + 1) + ln_half_n);
  return std::min(1.0, 2.0 * sum);
}

std::vector<size_t> pareto_frontier(const std::vector<double>& bits,
                                    const std::vector<double>& acc) {
  std::vector<size_t> out;
  for (size_t i = 0; i < bits.size(); ++i) {
    bool dominated = false;
    for (size_t j = 0; j < bits.size() && !dominated; ++j) {
      if (j == i) continue;
      const bool as_good = bits[j] <= bits[i] && acc[j] >= acc[i];
      const bool better = bits[j] < bits[i] || acc[j] > acc[i];
      dominated = as_good && (better || j < i);  // identical points: the first stays
    }
    if (!dominated) out.push_back(i);
  }
  std::sort(out.begin(), out.end(), [&](size_t a, size_t b) { return bits[a] < bits[b]; });
  return out;
}

std::optional<double> interpolate_frontier(const std::vector<double>& xs,
                                           const std::vector<double>& ys, double budget) {
  if (xs.empty() || budget < xs.front()) return std::nullopt;
  if (budget >= xs.back()) return ys.back();
  size_t i = 1;
  while (xs[i] < budget) ++i;  // xs[i - 1] <= budget < ... <= xs[i]
  const double t = (budget - xs[i - 1]) / (xs[i] - xs[i - 1]);
  return ys[i - 1] + t * (ys[i] - ys[i - 1]);
}

}  // namespace dllmq::eval
