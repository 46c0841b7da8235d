// Transfer schedule: how many of the ranked candidates a step reveals.
#pragma once

#include <vector>

namespace dllmq {

// LLaDA get_num_transfer_tokens: `masked` tokens over `steps` steps; the first masked % steps
// steps take one extra.
std::vector<int> num_transfer_tokens(int masked, int steps);

// Fast-dLLM threshold rule on confidences sorted descending: rank 0 always, plus every rank
// with conf >= tau (a prefix of the sorted list). Returns the number of ranks revealed.
int threshold_count(const std::vector<double>& sorted_desc, double tau);

// Fast-dLLM factor rule (get_transfer_index_dynamic): thresholds thr_1 = -1,
// thr_n = 1 - f/(n+1); reveal the ranks before the first n with c(n) < thr_n; upstream quirk:
// when that first failure is rank 1 or the last rank (or nothing fails), one more is revealed.
int factor_count(const std::vector<double>& sorted_desc, double factor);

// Dream's timestep schedule: t = linspace(1, eps, steps + 1).
std::vector<double> dream_timesteps(int steps, double eps);

}  // namespace dllmq
