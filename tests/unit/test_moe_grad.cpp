// The MoE FFN backward (model/ffn_grad.h) against central differences of the forward MoeRunner
// computes, on routings with edge cases: an expert every row takes (router bias +1), an expert
// no row takes (bias -1), top-k = all experts (the router gradient then cancels only through the
// softmax), and a shared expert. The whole backward pass on LLaDA-MoE checkpoints is checked
// against float64 numpy finite differences in tests/python/test_fisher.py.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "model/ffn_grad.h"
#include "model/moe.h"
#include "test_helpers.h"

namespace dllmq {
namespace {

using test_util::OwnedTensor;
using test_util::randn;

struct TinyMoe {
  std::vector<std::unique_ptr<OwnedTensor>> owned;
  MoeFfn f;
  uint32_t seed = 100;

  Linear lin(int out, int in, float scale) {
    owned.push_back(std::make_unique<OwnedTensor>(randn(size_t(out) * in, seed++, scale),
                                                  std::vector<int64_t>{out, in}, DType::kF32));
    return Linear{&owned.back()->t, nullptr, out, in};
  }
  SwiGlu swiglu(int hidden, int d) {
    return {lin(hidden, d, 0.4f), lin(hidden, d, 0.4f), lin(d, hidden, 0.4f)};
  }
  TinyMoe(int E, int k, int d, int H, int shared_h, std::vector<float> bias) {
    f.router = lin(E, d, 0.5f);
    f.top_k = k;
    for (int e = 0; e < E; ++e) f.experts.push_back(swiglu(H, d));
    f.expert_bias = std::move(bias);
    if (shared_h > 0) f.shared.push_back(swiglu(shared_h, d));
  }
};

// loss(h) = sum(dout * moe(h)) in double over the f32 forward.
double loss(MoeRunner& r, const MoeFfn& f, const std::vector<float>& h, int n, int d,
            const std::vector<float>& dout) {
  const CanvasRows all{0, n};
  const float* y = r.forward(f, h.data(), d, {&all, 1}, ComputeDType::kF32);
  double s = 0.0;
  for (size_t i = 0; i < size_t(n) * d; ++i) s += double(dout[i]) * y[i];
  return s;
}

void check_against_differences(const MoeFfn& f, int n, int d, bool want_empty_expert) {
  MoeRunner r;
  std::vector<float> h = randn(size_t(n) * d, 7), dout = randn(size_t(n) * d, 8);
  loss(r, f, h, n, d, dout);
  const MoeRouting rt = r.last_routing();
  // The routing this test means to exercise.
  std::vector<int> takes(size_t(f.n_experts()), 0);
  for (int i = 0; i < n * f.top_k; ++i) ++takes[size_t(rt.experts[i])];
  if (want_empty_expert) {
    EXPECT_EQ(takes[0], n) << "expert 0 (bias +1) in every row";
    EXPECT_EQ(takes[3], 0) << "expert 3 (bias -1) in no row";
  }
  const std::vector<int32_t> chosen(rt.experts, rt.experts + n * f.top_k);
  std::vector<float> dh(size_t(n) * d);
  moe_ffn_backward(f, rt, h.data(), n, d, dout.data(), dh.data(), ComputeDType::kF32);

  double scale = 0.0;
  for (float g : dh) scale = std::max(scale, double(std::fabs(g)));
  ASSERT_GT(scale, 0.0);
  const float eps = 1e-2f;
  for (size_t i = 0; i < h.size(); ++i) {
    const float keep = h[i];
    h[i] = keep + eps;
    const double up = loss(r, f, h, n, d, dout);
    const std::vector<int32_t> up_route(r.last_routing().experts,
                                        r.last_routing().experts + n * f.top_k);
    h[i] = keep - eps;
    const double dn = loss(r, f, h, n, d, dout);
    const std::vector<int32_t> dn_route(r.last_routing().experts,
                                        r.last_routing().experts + n * f.top_k);
    h[i] = keep;
    ASSERT_EQ(up_route, chosen) << "element " << i << " sits on a routing kink; pick other data";
    ASSERT_EQ(dn_route, chosen) << "element " << i << " sits on a routing kink; pick other data";
    EXPECT_NEAR(dh[i], (up - dn) / (2.0 * eps), 2e-3 * scale) << "element " << i;
  }
}

TEST(MoeBackward, MatchesDifferencesWithCrowdedAndEmptyExpertsAndSharedExpert) {
  const int E = 4, k = 2, d = 12, n = 6;
  TinyMoe m(E, k, d, /*H=*/10, /*shared_h=*/7, {1.0f, 0.02f, -0.01f, -1.0f});
  check_against_differences(m.f, n, d, true);
}

TEST(MoeBackward, MatchesDifferencesWhenTopKIsEveryExpert) {
  const int E = 3, d = 10, n = 4;
  TinyMoe m(E, /*k=*/E, d, /*H=*/8, /*shared_h=*/0, {});
  check_against_differences(m.f, n, d, false);
}

}  // namespace
}  // namespace dllmq
