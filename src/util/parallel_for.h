// A loop over independent items that runs on the OpenMP team only when asked, and otherwise on
// the calling thread outside any region.
//
// Why not `#pragma omp parallel for if (parallel)`: a region made inactive by if(false) still
// opens a nesting level, and a parallel region met inside it (RoPE, a KV store's write, a
// product) gets a team of threads of its own, started for each such region, instead of the
// process's pool: 33-45 us a region more than at top level (a probe, 2 threads, 64K floats, the
// Emerald Rapids Xeon), and under a long spin (GOMP_SPINCOUNT=300000) those extra threads spin
// against the pool's on the same cores (docs/performance.md, "Parallel regions inside inactive
// ones").
#pragma once

#include <cstddef>

namespace dllmq {

// body(i) for i in [0, n): on the team, one item at a time to whichever thread is free
// (schedule(dynamic, 1)), when `parallel`; else in order, on this thread.
template <class F>
void for_each_item(size_t n, bool parallel, F&& body) {
  if (!parallel) {
    for (size_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t i = 0; i < n; ++i) body(i);
}

}  // namespace dllmq
