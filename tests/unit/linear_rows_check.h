// Shared by the bf16 kernel tests (the vdpbf16ps and AMX paths): a row's bits through linear()
// must not depend on the rows beside it, the blocks of a grouped product (a stacked server tile
// among them) or the thread count, and a test that forces a bf16 product path puts the one it
// found back.
#pragma once

#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <vector>

#include "ops/gemm.h"
#include "ops/linear.h"

namespace dllmq::test_util {

// Restores bf16 compute's product path (native, dot, AMX or widening) on scope exit.
class Bf16PathGuard {
 public:
  Bf16PathGuard()
      : native_(gemm_info().bf16_native), dot_(gemm_info().bf16_dot), amx_(gemm_info().bf16_amx) {}
  ~Bf16PathGuard() {
    if (native_)
      gemm_set_bf16_native(true);
    else if (dot_)
      gemm_set_bf16_dot(true);
    else
      gemm_set_bf16_amx(amx_);
  }
  Bf16PathGuard(const Bf16PathGuard&) = delete;
  Bf16PathGuard& operator=(const Bf16PathGuard&) = delete;

 private:
  bool native_, dot_, amx_;
};

// x [rows, l.in] through linear() in one call and through linear_grouped() as blocks of 1, 16 (a
// stacked tile) and rows - 17 rows, on 1, 2 and 3 threads: every output equals `want` bit for
// bit. rows > 17.
inline void expect_rows_equal(const Linear& l, const std::vector<float>& x, int rows,
                              const std::vector<float>& want, ComputeDType dt) {
  const int in = l.in, out = l.out;
  const int saved = omp_get_max_threads();
  for (const int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    std::vector<float> y(want.size()), yg(want.size());
    linear(x.data(), rows, l, y.data(), 0, dt);
    EXPECT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * 4)) << threads;
    const LinearRows blocks[] = {{x.data(), 1, yg.data()},
                                 {x.data() + in, 16, yg.data() + out, true},
                                 {x.data() + 17 * in, rows - 17, yg.data() + 17 * out}};
    linear_grouped(blocks, l, 0, dt);
    EXPECT_EQ(0, std::memcmp(yg.data(), want.data(), yg.size() * 4)) << threads;
  }
  omp_set_num_threads(saved);
}

}  // namespace dllmq::test_util
