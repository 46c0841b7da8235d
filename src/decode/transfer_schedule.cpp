#include "decode/transfer_schedule.h"

namespace dllmq {

std::vector<int> num_transfer_tokens(int masked, int steps) {
  std::vector<int> n(steps, masked / steps);
  for (int j = 0; j < masked % steps; ++j) ++n[j];
  return n;
}

int threshold_count(const std::vector<double>& c, double tau) {
  if (c.empty()) return 0;
  int n = 1;
  while (n < int(c.size()) && c[n] >= tau) ++n;
  return n;
}

int factor_count(const std::vector<double>& c, double f) {
  const int n = static_cast<int>(c.size());
  if (n == 0) return 0;
  int top = 0;
  for (top = 0; top < n; ++top) {
    const double thr = top == 0 ? -1.0 : 1.0 - f / double(top + 2);
    if (c[top] < thr) break;
  }
  // The loop variable of the upstream `for` stops at n - 1 when nothing fails.
  if (top == n) top = n - 1;
  if (top == 0 || top == n - 1) ++top;
  return top;
}

std::vector<double> dream_timesteps(int steps, double eps) {
  std::vector<double> t(steps + 1);
  // Same arithmetic as numpy.linspace: start + i * ((stop - start) / num), last = stop.
  const double step = steps == 0 ? 0.0 : (eps - 1.0) / steps;
  for (int i = 0; i <= steps; ++i) t[i] = 1.0 + double(i) * step;
  if (steps > 0) t[steps] = eps;
  return t;
}

}  // namespace dllmq
