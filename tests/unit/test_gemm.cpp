// The GEMM backend (ops/gemm.h) and the bf16 compute path of linear() against scalar references,
// on every library compiled in.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "ops/amx_gemm.h"
#include "ops/gemm.h"
#include "ops/linear.h"
#include "test_helpers.h"
#include "util/cpu_isa.h"
#include "util/half.h"

namespace dllmq {
namespace {

using test_util::max_abs_diff;
using test_util::OwnedTensor;
using test_util::randn;

// Restores the library selected before the test.
class GemmLibTest : public ::testing::TestWithParam<GemmLib> {
 protected:
  void SetUp() override {
    saved_ = gemm_info().lib;
    if (!gemm_available(GetParam())) GTEST_SKIP() << gemm_lib_name(GetParam()) << " not built";
    gemm_select(GetParam());
  }
  void TearDown() override { gemm_select(saved_); }
  GemmLib saved_ = GemmLib::kOpenBlas;
};

TEST_P(GemmLibTest, SgemmMatchesReference) {
  // Shapes of the engine: projection panels, attention scores (B^T) and P V (B), odd sizes,
  // leading dimensions wider than the rows, alpha and beta.
  struct Case {
    bool tb;
    int m, n, k, lda, ldb, ldc;
    float alpha, beta;
  };
  const Case cases[] = {{true, 32, 256, 1024, 1024, 1024, 256, 1.0f, 0.0f},
                        {true, 7, 33, 65, 70, 80, 40, 0.5f, 0.0f},
                        {false, 32, 128, 96, 128, 1024, 128, 1.0f, 1.0f},
                        {false, 1, 5, 3, 3, 5, 5, 2.0f, 0.5f},
                        {true, 129, 17, 128, 1024, 128, 17, 0.125f, 0.0f}};
  for (const Case& c : cases) {
    auto a = randn(size_t(c.m) * c.lda, 1);
    auto b = randn(size_t(c.tb ? c.n : c.k) * c.ldb, 2);
    auto c0 = randn(size_t(c.m) * c.ldc, 3);
    std::vector<float> got = c0, want = c0;
    sgemm(c.tb, c.m, c.n, c.k, c.alpha, a.data(), c.lda, b.data(), c.ldb, c.beta, got.data(),
          c.ldc);
    sgemm_ref(c.tb, c.m, c.n, c.k, c.alpha, a.data(), c.lda, b.data(), c.ldb, c.beta, want.data(),
              c.ldc);
    EXPECT_LT(max_abs_diff(got, want), 2e-4f * std::sqrt(float(c.k)))
        << gemm_info().name << " tb " << c.tb << " " << c.m << "x" << c.n << "x" << c.k;
  }
}

TEST_P(GemmLibTest, SgemmInsideParallelRegionMatches) {
  // The engine calls GEMMs from its own threads: each must compute its own product.
  const int m = 32, n = 64, k = 256, parts = 8;
  auto a = randn(size_t(m) * k, 4);
  auto b = randn(size_t(n) * parts * k, 5);
  std::vector<float> got(size_t(m) * n * parts), want(got.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(2)
  for (int p = 0; p < parts; ++p)
    sgemm(true, m, n, k, 1.0f, a.data(), k, b.data() + size_t(p) * n * k, k, 0.0f,
          got.data() + size_t(p) * n, n * parts);
  sgemm_ref(true, m, n * parts, k, 1.0f, a.data(), k, b.data(), k, 0.0f, want.data(), n * parts);
  EXPECT_LT(max_abs_diff(got, want), 1e-3f);
}

INSTANTIATE_TEST_SUITE_P(Libs, GemmLibTest, ::testing::Values(GemmLib::kOneDnn, GemmLib::kOpenBlas),
                         [](const auto& i) { return std::string(gemm_lib_name(i.param)); });

TEST(Gemm, InfoNamesLibraryAndIsa) {
  const GemmInfo& g = gemm_info();
  EXPECT_FALSE(g.name.empty());
  EXPECT_FALSE(g.isa.empty());
  EXPECT_FALSE(g.cpu_isa.empty());
  EXPECT_FALSE(g.why.empty());
  EXPECT_GE(gemm_threads(), 1);
}

TEST(Gemm, Bf16ProductMatchesWidenedReference) {
  // bf16 x bf16 products are exact in f32, so oneDNN's bf16 matmul (JIT where the CPU has bf16
  // dot products, its reference loop elsewhere) must agree with an f64 sum of the same values.
  const int m = 5, n = 37, k = 70, lda = 72, ldb = 75, ldc = 40;
  auto af = randn(size_t(m) * lda, 6), bf = randn(size_t(n) * ldb, 7);
  std::vector<uint16_t> a(af.size()), b(bf.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = f32_to_bf16(af[i]);
  for (size_t i = 0; i < b.size(); ++i) b[i] = f32_to_bf16(bf[i]);
  std::vector<float> c(size_t(m) * ldc, -1.0f);
  if (!gemm_bf16_nt_onednn(m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc))
    GTEST_SKIP() << "no oneDNN bf16 matmul on this build / CPU";
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double want = 0.0;
      for (int t = 0; t < k; ++t)
        want += double(bf16_to_f32(a[size_t(i) * lda + t])) * bf16_to_f32(b[size_t(j) * ldb + t]);
      EXPECT_NEAR(c[size_t(i) * ldc + j], want, 1e-4 * std::sqrt(double(k)));
    }
  EXPECT_EQ(c[n], -1.0f);  // the padding between rows of C is left alone
}

TEST(Gemm, RoundToBf16IsNearestEven) {
  const std::vector<float> x = {1.0f,
                                1.00390625f /* 1 + 2^-8: tie, down to 1 */,
                                1.01171875f /* 1 + 3*2^-8: tie, up to 1 + 2^-6 */,
                                -3.14159f,
                                1e-30f,
                                65504.0f};
  std::vector<float> y(x.size());
  round_to_bf16(x.data(), y.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], bf16_to_f32(f32_to_bf16(x[i]))) << x[i];
  EXPECT_EQ(y[1], 1.0f);
  EXPECT_EQ(y[2], 1.015625f);
}

class LinearBf16Test : public ::testing::TestWithParam<std::tuple<DType, int, bool>> {};

TEST_P(LinearBf16Test, MatchesRoundedReference) {
  // bf16 compute: inputs (and f32 weights) rounded to bf16, f32 accumulation. The reference
  // rounds the same values and sums in f64, so only summation order differs. Both product paths
  // (native bf16 dot products, widened f32) whatever this machine's measured choice.
  auto [dt, n, native] = GetParam();
  const bool was = gemm_info().bf16_native;
  if (gemm_set_bf16_native(native) != native) {
    gemm_set_bf16_native(was);
    GTEST_SKIP() << "no bf16 dot-product kernel on this build / CPU";
  }
  struct Restore {
    bool was;
    ~Restore() { gemm_set_bf16_native(was); }
  } restore{was};
  const int in = 300, out = 1100;
  OwnedTensor w(randn(size_t(out) * in, 8, 0.1f), {out, in}, dt);
  const Linear l{&w.t, nullptr, out, in};
  auto x = randn(size_t(n) * in, 9);
  std::vector<float> y(size_t(n) * out), yr(y.size()), yf(y.size());
  linear(x.data(), n, l, y.data(), 0, ComputeDType::kBF16);
  linear_ref(x.data(), n, l, yr.data(), ComputeDType::kBF16);
  linear_ref(x.data(), n, l, yf.data(), ComputeDType::kF32);
  EXPECT_LT(max_abs_diff(y, yr), 1e-4f);
  // And it is a different computation from f32 (the activations were rounded).
  EXPECT_GT(max_abs_diff(yr, yf), 1e-4f);
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearBf16Test,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16),
                                            ::testing::Values(1, 32, 130), ::testing::Bool()));

TEST(Gemm, Bf16ProductChoiceFollowsTheEnvironment) {
  // DLLMQ_BF16_GEMM forces the path at start-up (a re-probe here); without it the choice is
  // measured and says so.
  if (!gemm_available(GemmLib::kOneDnn)) GTEST_SKIP() << "oneDNN not compiled in";
  const GemmLib lib = gemm_info().lib;
  auto reprobe = [] {
    gemm_select(GemmLib::kOpenBlas);
    gemm_select(GemmLib::kOneDnn);
    return gemm_info();
  };
  setenv("DLLMQ_BF16_GEMM", "widened", 1);
  GemmInfo g = reprobe();
  EXPECT_FALSE(g.bf16_native);
  EXPECT_NE(g.bf16_why.find("widened to f32"), std::string::npos) << g.bf16_why;
  if (g.bf16_jit) {
    EXPECT_NE(g.bf16_why.find("DLLMQ_BF16_GEMM=widened"), std::string::npos) << g.bf16_why;
  }
  setenv("DLLMQ_BF16_GEMM", "native", 1);
  g = reprobe();
  EXPECT_EQ(g.bf16_native, g.bf16_jit);
  EXPECT_FALSE(g.bf16_dot);
  // Our AVX512-BF16 kernel where the projections run AVX-512 on a CPU with the instruction; a
  // CPU without it says it cannot.
  setenv("DLLMQ_BF16_GEMM", "dot", 1);
  g = reprobe();
  const bool dot_here = dispatch_isa() == Isa::kAvx512 && cpu_has_avx512_bf16();
  EXPECT_EQ(g.bf16_dot, dot_here);
  EXPECT_FALSE(g.bf16_native);
  EXPECT_NE(g.bf16_why.find(dot_here ? "vdpbf16ps" : "cannot run"), std::string::npos)
      << g.bf16_why;
  // Our AMX kernel where the CPU has AMX-BF16 and the projections run AVX-512.
  setenv("DLLMQ_BF16_GEMM", "amx", 1);
  g = reprobe();
  EXPECT_EQ(g.bf16_amx, amx_available());
  EXPECT_FALSE(g.bf16_native);
  EXPECT_FALSE(g.bf16_dot);
  EXPECT_NE(g.bf16_why.find(amx_available() ? "AMX tiles" : "cannot run"), std::string::npos)
      << g.bf16_why;
  unsetenv("DLLMQ_BF16_GEMM");
  g = reprobe();
  EXPECT_LE(int(g.bf16_native) + int(g.bf16_dot) + int(g.bf16_amx), 1) << g.bf16_why;
  if (g.bf16_jit) {
    EXPECT_NE(g.bf16_why.find("measured"), std::string::npos) << g.bf16_why;
  } else {
    EXPECT_FALSE(g.bf16_native);
  }
  gemm_select(lib == GemmLib::kOneDnn ? GemmLib::kOpenBlas : GemmLib::kOneDnn);
  gemm_select(lib);
}

TEST(ComputeDType, ParsesAndNames) {
  EXPECT_EQ(parse_compute_dtype("fp32"), ComputeDType::kF32);
  EXPECT_EQ(parse_compute_dtype("bf16"), ComputeDType::kBF16);
  EXPECT_STREQ(compute_dtype_name(ComputeDType::kBF16), "bf16");
  EXPECT_ANY_THROW(parse_compute_dtype("fp8"));
}

}  // namespace
}  // namespace dllmq
