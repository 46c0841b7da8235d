// Every kernel against its scalar reference twin.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ops/attention.h"
#include "ops/linear.h"
#include "ops/norm_act.h"
#include "ops/rope.h"
#include "test_helpers.h"
#include "util/half.h"

namespace dllmq {
namespace {

using test_util::max_abs_diff;
using test_util::OwnedTensor;
using test_util::randn;

class LinearTest : public ::testing::TestWithParam<std::tuple<DType, int, bool>> {};

TEST_P(LinearTest, MatchesReference) {
  auto [dt, n, bias] = GetParam();
  const int in = 96, out = 1100;  // out spans several panels plus a partial one
  OwnedTensor w(randn(size_t(out) * in, 1, 0.1f), {out, in}, dt);
  OwnedTensor b(randn(out, 2), {out}, dt);
  Linear l{&w.t, bias ? &b.t : nullptr, out, in};
  auto x = randn(size_t(n) * in, 3);
  std::vector<float> y(size_t(n) * out), yr(size_t(n) * out);
  linear(x.data(), n, l, y.data());
  linear_ref(x.data(), n, l, yr.data());
  EXPECT_LT(max_abs_diff(y, yr), 1e-4f);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LinearTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kF16,
                                                              DType::kBF16),
                                            ::testing::Values(1, 7, 64), ::testing::Bool()));

TEST(RmsNorm, MatchesReference) {
  const int n = 33, d = 200;
  auto x = randn(size_t(n) * d, 4, 3.0f), w = randn(d, 5);
  std::vector<float> y(x.size()), yr(x.size());
  rmsnorm(x.data(), n, d, w.data(), 1e-5f, y.data());
  rmsnorm_ref(x.data(), n, d, w.data(), 1e-5f, yr.data());
  EXPECT_LT(max_abs_diff(y, yr), 1e-5f);
}

// The fused residual add and norm must give the bits of the two steps it replaces in the forward
// (add_in_place, then rmsnorm), for x and for the norm, with the norm written over y as the model
// does: rows of odd widths (the vector loops' tails), and enough rows to split over the threads.
TEST(AddRmsNorm, SameBitsAsAddThenNorm) {
  for (auto [n, d] : {std::pair{1, 1}, {3, 7}, {33, 200}, {5, 1023}, {64, 1024}, {40, 2817}}) {
    auto x = randn(size_t(n) * d, 8, 3.0f), y = randn(size_t(n) * d, 9), w = randn(d, 10);
    auto x2 = x, y2 = y;
    std::vector<float> want(y.size());
    add_in_place(x.data(), y.data(), x.size());
    rmsnorm(x.data(), n, d, w.data(), 1e-5f, want.data());
    add_rmsnorm(x2.data(), y2.data(), n, d, w.data(), 1e-5f, y2.data());
    EXPECT_EQ(0, std::memcmp(x.data(), x2.data(), x.size() * sizeof(float))) << n << "x" << d;
    EXPECT_EQ(0, std::memcmp(want.data(), y2.data(), want.size() * sizeof(float))) << n << "x" << d;
  }
}

TEST(SiluMul, MatchesReference) {
  auto g = randn(1000, 6, 4.0f), u = randn(1000, 7);
  auto gr = g;
  silu_mul(g.data(), u.data(), g.size());
  silu_mul_ref(gr.data(), u.data(), gr.size());
  EXPECT_LT(max_abs_diff(g, gr), 1e-5f);
}

TEST(Rope, MatchesReferenceAtLargePositions) {
  const int n = 9, heads = 3, hd = 128, pos0 = 3000;
  auto x = randn(size_t(n) * heads * hd, 8);
  auto xr = x;
  RopeTable t(hd, 500000.0);
  t.reserve(pos0 + n);
  t.apply(x.data(), n, heads, pos0);
  rope_ref(xr.data(), n, heads, hd, pos0, 500000.0);
  EXPECT_LT(max_abs_diff(x, xr), 2e-4f);
}

TEST(Rope, PositionZeroIsIdentity) {
  auto x = randn(64, 9);
  auto y = x;
  RopeTable t(64, 1e6);
  t.reserve(1);
  t.apply(y.data(), 1, 1, 0);
  EXPECT_EQ(max_abs_diff(x, y), 0.0f);
}

class AttentionTest : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(AttentionTest, MultiSourceMatchesReference) {
  auto [nq, heads, kv_heads] = GetParam();
  const int hd = 16, kvd = kv_heads * hd;
  const int n_a = 50, n_b = 200;  // two key sources (e.g. cached prefix + fresh rows)
  auto q = randn(size_t(nq) * heads * hd, 10);
  auto ka = randn(size_t(n_a) * kvd, 11), va = randn(size_t(n_a) * kvd, 12);
  auto kb = randn(size_t(n_b) * kvd, 13), vb = randn(size_t(n_b) * kvd, 14);
  FreshKvRows a(ka.data(), va.data(), n_a, kvd, hd), b(kb.data(), vb.data(), n_b, kvd, hd);
  const KvRowSource* srcs[] = {&a, &b};
  std::vector<float> o(size_t(nq) * heads * hd), orf(o.size());
  attention(q.data(), nq, heads, kv_heads, hd, srcs, o.data());
  attention_ref(q.data(), nq, heads, kv_heads, hd, srcs, orf.data());
  EXPECT_LT(max_abs_diff(o, orf), 1e-5f);
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionTest,
                         ::testing::Values(std::make_tuple(1, 4, 4), std::make_tuple(7, 4, 2),
                                           std::make_tuple(300, 4, 1), std::make_tuple(130, 8, 8)));

TEST(Half, RoundTrips) {
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.5f)), 1.5f);
  EXPECT_EQ(f16_to_f32(f32_to_f16(-0.25f)), -0.25f);
  // Round to nearest even: 1 + 2^-8 is halfway between two bf16 values -> rounds down to 1.
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 1.0f / 256)), 1.0f);
}

}  // namespace
}  // namespace dllmq
