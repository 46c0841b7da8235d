#include "ops/panel_split.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace dllmq {

void run_panel_split(std::span<const kern::Block> blocks, int panels, double flops,
                     const std::function<void(std::span<const kern::Block>, int, int)>& fn) {
  const int nt = omp_get_max_threads();
  if (nt == 1 || flops < kParallelFlops) {
    fn(blocks, 0, panels);
    return;
  }
  int rows = 0;
  for (const kern::Block& b : blocks) rows += std::max(b.m, 0);
  const bool by_panels = panels >= 2 * nt;
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), T = omp_get_num_threads();
    if (by_panels) {
      fn(blocks, int(int64_t(panels) * t / T), int(int64_t(panels) * (t + 1) / T));
    } else {
      // Rows [r0, r1) of the blocks laid end to end.
      const int r0 = int(int64_t(rows) * t / T), r1 = int(int64_t(rows) * (t + 1) / T);
      thread_local std::vector<kern::Block> mine;
      mine.clear();
      int start = 0;
      for (const kern::Block& b : blocks) {
        const int lo = std::max(r0, start), hi = std::min(r1, start + b.m);
        if (lo < hi)
          mine.push_back({b.x + size_t(lo - start) * b.ldx, b.ldx, hi - lo,
                          b.y + size_t(lo - start) * b.ldy, b.ldy});
        start += std::max(b.m, 0);
      }
      fn(mine, 0, panels);
    }
  }
}

}  // namespace dllmq
