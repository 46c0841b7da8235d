// ops/panel_split.h: whatever the thread count, the rows and the panel count, every (row, panel)
// pair of a product is handed to exactly one call (split by panels, or by rows where the weight has
// fewer than two panels a thread), so no output is computed twice or left out.
#include "ops/panel_split.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <mutex>
#include <vector>

namespace dllmq {
namespace {

TEST(PanelSplit, EveryRowAndPanelOnceAtAnyThreadCount) {
  const int saved = omp_get_max_threads();
  for (const int threads : {1, 2, 3, 4})
    for (const int panels : {1, 2, 5, 8, 13, 64, 177})
      for (const int rows : {1, 7, 32, 256}) {
        omp_set_num_threads(threads);
        // Two blocks of rows; x and y only identify rows here (row r of block b at y + r).
        std::vector<float> y(size_t(rows) + 3), x(1);
        const int m0 = rows / 3, m1 = rows - m0;
        const kern::Block blocks[] = {{x.data(), 0, m0, y.data(), 1},
                                      {x.data(), 0, m1, y.data() + m0, 1}};
        std::vector<int> seen(size_t(rows) * panels, 0);
        std::mutex mu;
        run_panel_split(blocks, panels, 1e12, [&](std::span<const kern::Block> b, int p0, int p1) {
          std::lock_guard<std::mutex> lock(mu);
          ASSERT_LE(0, p0);
          ASSERT_LE(p1, panels);
          for (const kern::Block& bl : b)
            for (int r = 0; r < bl.m; ++r)
              for (int p = p0; p < p1; ++p) ++seen[size_t(bl.y + r - y.data()) * panels + p];
        });
        for (size_t i = 0; i < seen.size(); ++i)
          ASSERT_EQ(seen[i], 1) << "threads " << threads << " panels " << panels << " rows " << rows
                                << " row " << i / panels << " panel " << i % panels;
      }
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace dllmq
