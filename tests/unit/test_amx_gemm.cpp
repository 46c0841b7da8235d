// The AMX bf16 kernel (ops/amx_gemm.h) against an exact reference: over shapes that hit every
// tail (rows around the 16-row tile and the 32-row pair, columns around the 16-column halves and
// 32-column panels, reductions around the 32-k block), weights stored as bf16, f16 and f32, every
// output within the bound the header states of the exact sum (in double) of the bf16 products,
// and the untouched parts of y untouched. Then linear() on it: a row's bits do not depend on the
// rows beside it, the blocks or the thread count (a stacked request keeps its own bits), and a
// model's Linear is repacked when it leaves or enters bf16 compute. Skipped where the CPU (or
// DLLMQ_ISA) rules AMX out.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "linear_rows_check.h"
#include "ops/amx_gemm.h"
#include "ops/gemm.h"
#include "ops/linear.h"
#include "test_helpers.h"
#include "util/error.h"
#include "util/half.h"

namespace dllmq {
namespace {

struct Case {
  int m, n, k;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  for (int m : {1, 2, 15, 16, 17, 31, 32, 33, 48, 49, 64, 70}) c.push_back({m, 48, 64});
  for (int n : {1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100}) c.push_back({20, n, 96});
  for (int k : {1, 2, 31, 32, 33, 63, 64, 65, 300, 1024, 4097}) c.push_back({33, 40, k});
  return c;
}

TEST(AmxGemm, WithinTheStatedBoundOfTheExactSumOnEveryTail) {
  if (!amx_available()) GTEST_SKIP() << "no AMX-BF16 here (or DLLMQ_ISA turns it off)";
  std::mt19937 g(77);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  double worst = 0.0;  // the largest error as a share of its bound, reported
  for (const DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (const Case& c : cases()) {
      std::vector<float> wv(size_t(c.n) * c.k);
      for (size_t i = 0; i < wv.size(); ++i)
        wv[i] = i % 37 == 0 ? 0.0f : nd(g) * (i % 101 == 0 ? 30.0f : 0.05f);
      const test_util::OwnedTensor w(wv, {c.n, c.k}, dt);
      const int ldx = c.k + 3, ldy = c.n + 5;
      std::vector<float> x(size_t(c.m) * ldx);
      for (float& v : x) v = nd(g);
      for (size_t i = 5; i < x.size(); i += 97) x[i] = 1e-39f;  // an f32 denormal: read as zero
      std::vector<float> y(size_t(c.m) * ldy, -7.0f);           // the gaps must stay untouched
      const auto pw = pack_weight_amx(w.t.data, dt, c.n, c.k);
      ASSERT_TRUE(pw->amx);
      EXPECT_EQ(pw->bytes(), size_t(pw->panels()) * 32 * pw->k_pad * 2);
      const kern::Block b{x.data(), ldx, c.m, y.data(), ldy};
      const int mid = pw->panels() / 2;  // two panel ranges, as two threads would run them
      packed_gemm_amx(*pw, {&b, 1}, 0, mid);
      packed_gemm_amx(*pw, {&b, 1}, mid, pw->panels());
      const double blocks = (c.k + 31) / 32;
      for (int i = 0; i < c.m; ++i) {
        for (int o = 0; o < ldy; ++o) {
          const float got = y[size_t(i) * ldy + o];
          if (o >= c.n) {
            ASSERT_EQ(got, -7.0f) << "gap written: row " << i << " col " << o;
            continue;
          }
          double sum = 0.0, mag = 0.0;
          for (int kk = 0; kk < c.k; ++kk) {
            const double p = test_util::tile_value(test_util::act_bf16(x[size_t(i) * ldx + kk])) *
                             test_util::tile_value(
                                 f32_to_bf16(w.at(size_t(o) * c.k + kk)));  // stored, then bf16
            sum += p;
            mag += std::fabs(p);
          }
          const double bound = kAmxErrorUlps * (blocks + 5) * std::ldexp(1.0, -24) * mag;
          const double err = std::fabs(double(got) - sum);
          ASSERT_LE(err, bound) << dtype_name(dt) << " m " << c.m << " n " << c.n << " k " << c.k
                                << " row " << i << " col " << o << ": " << got << " vs " << sum;
          if (mag > 0) worst = std::max(worst, err / bound);
        }
      }
    }
  }
  RecordProperty("worst_error_share_of_bound", std::to_string(worst));
  std::printf("worst error: %.3f of the bound\n", worst);
}

// Rows through linear() on the AMX kernel, alone or stacked with others, in any blocks, on 1-3
// threads: each row's bits are those it gets alone.
TEST(AmxGemm, LinearRowsDoNotDependOnNeighboursBlocksOrThreads) {
  if (!amx_available()) GTEST_SKIP() << "no AMX-BF16 here (or DLLMQ_ISA turns it off)";
  const test_util::Bf16PathGuard restore;
  ASSERT_TRUE(gemm_set_bf16_amx(true));
  std::mt19937 g(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int in = 333, out = 200, rows = 70;
  std::vector<float> wv(size_t(out) * in);
  for (float& v : wv) v = 0.05f * nd(g);
  const test_util::OwnedTensor wb(wv, {out, in}, DType::kBF16);
  std::vector<float> x(size_t(rows) * in);
  for (float& v : x) v = nd(g);
  Linear l{&wb.t, nullptr, out, in};
  pack_linear(l, ComputeDType::kBF16);
  ASSERT_TRUE(l.packed->amx);
  EXPECT_TRUE(packed_for(l, ComputeDType::kBF16));
  EXPECT_FALSE(packed_for(l, ComputeDType::kF32));
  std::vector<float> alone(size_t(rows) * out);
  for (int i = 0; i < rows; ++i)
    linear(x.data() + size_t(i) * in, 1, l, alone.data() + size_t(i) * out, 0, ComputeDType::kBF16);
  test_util::expect_rows_equal(l, x, rows, alone, ComputeDType::kBF16);
  // fp32 compute cannot read the AMX layout: it says so rather than multiplying garbage.
  std::vector<float> y(alone.size());
  EXPECT_THROW(linear(x.data(), rows, l, y.data(), 0, ComputeDType::kF32), Error);
  // Repacked for fp32 (what Model::set_compute_dtype does), it runs the exact kernels again.
  l.packed.reset();
  pack_linear(l, ComputeDType::kF32);
  EXPECT_FALSE(l.packed->amx);
  EXPECT_TRUE(packed_for(l, ComputeDType::kF32));
  linear(x.data(), rows, l, y.data(), 0, ComputeDType::kF32);
}

TEST(AmxGemm, PeakIsMeasuredWhereTheCpuHasIt) {
  const double gf = measure_amx_peak_gflops(0.02);
  if (amx_available())
    EXPECT_GT(gf, 1.0);
  else
    EXPECT_EQ(gf, 0.0);
}

}  // namespace
}  // namespace dllmq
