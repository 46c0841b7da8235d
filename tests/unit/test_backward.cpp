// The backward twins of ops/backward.h and RoPE's inverse, against finite differences and
// explicit double-precision products. (The whole backward pass, model/kv_grad, is checked
// against float64 numpy finite differences in tests/python/test_fisher.py.)
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ops/backward.h"
#include "ops/norm_act.h"
#include "ops/rope.h"
#include "test_helpers.h"

namespace dllmq {
namespace {

using test_util::OwnedTensor;
using test_util::randn;

class LinearBackwardTest : public ::testing::TestWithParam<std::tuple<DType, bool>> {};

TEST_P(LinearBackwardTest, EqualsDyTimesW) {
  auto [dt, accumulate] = GetParam();
  const int n = 5, out = 520, in = 300;  // partial column and row tiles
  OwnedTensor w(randn(size_t(out) * in, 1, 0.1f), {out, in}, dt);
  Linear l{&w.t, nullptr, out, in};
  const auto dy = randn(size_t(n) * out, 2);
  std::vector<float> dx = randn(size_t(n) * in, 3), start = dx;
  linear_backward_input(dy.data(), n, l, dx.data(), accumulate);
  double worst = 0.0;
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < in; ++c) {
      double want = accumulate ? start[size_t(i) * in + c] : 0.0;
      for (int o = 0; o < out; ++o)
        want += double(dy[size_t(i) * out + o]) * w.at(size_t(o) * in + c);
      worst = std::max(worst, std::fabs(want - dx[size_t(i) * in + c]));
    }
  EXPECT_LT(worst, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LinearBackwardTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Bool()));

// f(x) = sum(dy * rmsnorm(x) * w) in double; its gradient by central differences.
TEST(RmsNormBackward, MatchesFiniteDifferences) {
  const int n = 3, d = 40;
  const float eps = 1e-5f;
  const auto x = randn(size_t(n) * d, 4), w = randn(d, 5), dy = randn(size_t(n) * d, 6);
  auto f = [&](const std::vector<double>& xr, int row) {
    double ss = 0.0, out = 0.0;
    for (int k = 0; k < d; ++k) ss += xr[k] * xr[k];
    const double r = 1.0 / std::sqrt(ss / d + eps);
    for (int k = 0; k < d; ++k) out += dy[size_t(row) * d + k] * xr[k] * r * w[k];
    return out;
  };
  std::vector<float> dx(size_t(n) * d, 0.5f);  // accumulates onto what is there
  rmsnorm_backward(x.data(), n, d, w.data(), eps, dy.data(), dx.data());
  for (int i = 0; i < n; ++i) {
    std::vector<double> xr(x.begin() + size_t(i) * d, x.begin() + size_t(i + 1) * d);
    for (int k = 0; k < d; ++k) {
      const double h = 1e-5, keep = xr[k];
      xr[k] = keep + h;
      const double up = f(xr, i);
      xr[k] = keep - h;
      const double dn = f(xr, i);
      xr[k] = keep;
      EXPECT_NEAR(dx[size_t(i) * d + k] - 0.5f, (up - dn) / (2 * h), 2e-4) << i << "," << k;
    }
  }
}

TEST(SiluMulBackward, MatchesFiniteDifferences) {
  const size_t n = 64;
  const auto g = randn(n, 7, 2.0f), u = randn(n, 8), dout = randn(n, 9);
  std::vector<float> dg(n), du(n);
  silu_mul_backward(g.data(), u.data(), dout.data(), n, dg.data(), du.data());
  auto silu = [](double x) { return x / (1.0 + std::exp(-x)); };
  for (size_t i = 0; i < n; ++i) {
    const double h = 1e-5;
    const double want_g = dout[i] * u[i] * (silu(g[i] + h) - silu(g[i] - h)) / (2 * h);
    EXPECT_NEAR(dg[i], want_g, 1e-4 * (1 + std::fabs(want_g)));
    EXPECT_NEAR(du[i], dout[i] * silu(g[i]), 1e-5 * (1 + std::fabs(du[i])));
  }
}

TEST(Rope, InverseUndoesApplyAndIsItsTranspose) {
  const int hd = 16, heads = 3, n = 7, pos0 = 11;
  RopeTable rope(hd, 10000.0);
  rope.reserve(pos0 + n);
  const auto x = randn(size_t(n) * heads * hd, 10), y = randn(x.size(), 11);
  std::vector<float> rx = x, ry = y;
  rope.apply(rx.data(), n, heads, pos0);
  rope.apply_inverse(ry.data(), n, heads, pos0);
  double lhs = 0.0, rhs = 0.0;  // <R x, y> = <x, R^T y>
  for (size_t i = 0; i < x.size(); ++i) lhs += double(rx[i]) * y[i], rhs += double(x[i]) * ry[i];
  EXPECT_NEAR(lhs, rhs, 1e-4 * std::fabs(lhs) + 1e-5);
  rope.apply_inverse(rx.data(), n, heads, pos0);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(rx[i], x[i], 1e-5);
}

}  // namespace
}  // namespace dllmq
