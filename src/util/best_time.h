// The fastest of repeated runs of a piece of code: what a roofline peak or a kernel choice is
// measured by (the fastest run is the one least disturbed by the rest of the machine).
#pragma once

#include <algorithm>
#include <chrono>

namespace dllmq {

// Runs `f` once to warm up (caches, page-ins, primitive creation), then at least `min_runs` times
// and until `min_s` seconds have passed; returns the fastest timed run in seconds.
template <class F>
double best_time(F&& f, double min_s, int min_runs = 3) {
  auto now_s = [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  f();
  double best = 1e30;
  const double start = now_s();
  for (int r = 0; r < min_runs || now_s() - start < min_s; ++r) {
    const double t0 = now_s();
    f();
    best = std::min(best, now_s() - t0);
  }
  return best;
}

}  // namespace dllmq
