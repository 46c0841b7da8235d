// Statistics for comparing KV methods on the same problems (docs/eval.md, "Frontier and
// paired statistics"): a seeded bootstrap over problems, McNemar's exact paired test, the
// upper-left Pareto frontier of accuracy against effective bits and interpolation along it.
// Pure functions of numbers; the grid's reading of run directories is cli/grid_frontier.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace dllmq::eval {

// The bootstrap's random stream, fixed so a numpy reference can reproduce it: splitmix64
// (state += 0x9E3779B97F4A7C15; z = state; z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9;
// z = (z ^ z >> 27) * 0x94D049BB133111EB; z ^ z >> 31) from state = seed; a draw in [0, n) is
// floor(((z >> 11) * 2^-53) * n).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : s_(seed) {}
  uint64_t next();
  size_t below(size_t n);  // uniform index in [0, n)

 private:
  uint64_t s_;
};

// Replicate b of `n_replicates`: for each universe u (in order) its sizes[u] draws with
// replacement, taken from one stream in the order (replicate, universe, draw), given as
// counts[u][i] = how often problem i of universe u was drawn. Universes are independent sets of
// problems (one per task); every statistic of a replicate is computed from the same counts, so
// comparisons are paired.
void bootstrap_replicates(
    const std::vector<size_t>& sizes, int n_replicates, uint64_t seed,
    const std::function<void(int b, const std::vector<std::vector<uint32_t>>& counts)>& fn);

// numpy.percentile's default ("linear") rule on `v` (sorted in place); q in [0, 100].
double percentile(std::vector<double>& v, double q);

struct Interval {
  double lo = 0, hi = 0;
};

// The central `level` percentile interval of the replicates.
Interval percentile_interval(std::vector<double> replicates, double level = 0.95);

// Bootstrap interval of the mean of x (one universe).
Interval bootstrap_mean_interval(const std::vector<double>& x, int n_replicates, uint64_t seed,
                                 double level = 0.95);

// McNemar's exact test: b = pairs A right / B wrong, c = A wrong / B right; two-sided p-value
// min(1, 2 * P[Binomial(b + c, 1/2) <= min(b, c)]) (1 when b + c = 0).
double mcnemar_exact_p(int64_t b, int64_t c);

// Indices of the upper-left Pareto frontier of points (bits, acc): those no other point
// dominates (fewer or equal bits and higher or equal accuracy, one of them strictly); of
// identical points the first. Sorted by bits, so accuracy rises strictly along it.
std::vector<size_t> pareto_frontier(const std::vector<double>& bits,
                                    const std::vector<double>& acc);

// Accuracy at `budget` bits along a frontier (xs ascending, ys): linear between the two
// frontier points around it, the last point's accuracy beyond the last (a method may use fewer
// bits than allowed), none below the first (the method cannot get that small).
std::optional<double> interpolate_frontier(const std::vector<double>& xs,
                                           const std::vector<double>& ys, double budget);

}  // namespace dllmq::eval
