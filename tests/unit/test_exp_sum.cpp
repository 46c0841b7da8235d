// ops/exp_sum.h: every instruction set's kernel equals the portable twin bit for bit (terms and
// sum) over lengths that hit every tail, with -inf entries and terms outside the polynomial's
// range; each term is within 2 ulp of std::exp over [-745, 708]; and the sum agrees with a
// long-double sum of std::exp to within a few ulp. Likewise SwiGLU's gate and attention's
// online-softmax row, in float.
#include "ops/exp_sum.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "ops/exp_kernel.h"
#include "util/cpu_isa.h"

namespace dllmq {
namespace {

int64_t ulps(double a, double b) {
  int64_t ia, ib;
  std::memcpy(&ia, &a, 8);
  std::memcpy(&ib, &b, 8);
  return ia > ib ? ia - ib : ib - ia;  // both positive here
}

TEST(ExpSum, TermsWithinTwoUlpOfStdExp) {
  std::mt19937_64 g(5);
  std::uniform_real_distribution<double> u(-745.0, 708.0), near(-1.0, 1.0);
  int64_t worst = 0;
  for (int i = 0; i < 2000000; ++i) {
    const double x = i % 2 ? u(g) : near(g);
    const double got = exp_shifted(x), want = std::exp(x);
    worst = std::max(worst, ulps(got, want));
  }
  RecordProperty("worst_ulps", std::to_string(worst));
  std::printf("worst: %lld ulp\n", static_cast<long long>(worst));
  EXPECT_LE(worst, 2);
  EXPECT_EQ(exp_shifted(0.0), 1.0);
  EXPECT_EQ(exp_shifted(-std::numeric_limits<double>::infinity()), 0.0);
  EXPECT_TRUE(std::isnan(exp_shifted(std::nan(""))));
}

TEST(ExpSum, EveryIsaEqualsTheTwinOnEveryTail) {
  std::mt19937_64 g(6);
  std::normal_distribution<double> nd(0.0, 4.0);
  const double inf = std::numeric_limits<double>::infinity();
  for (int n : {1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 32000, 32003}) {
    std::vector<double> l(n);
    for (double& v : l) v = nd(g);
    for (int i = 3; i < n; i += 11) l[i] = -inf;     // masked out (EOS under --logits-eos-inf)
    for (int i = 5; i < n; i += 101) l[i] = -800.0;  // below the polynomial's range: std::exp
    double m = -inf;
    for (double v : l) m = std::max(m, v);
    std::vector<double> ref(n), out(n);
    const double sref = exp_shifted_sum_scalar(l.data(), n, m, ref.data());
    for (int i = 0; i < n; ++i) ASSERT_EQ(ref[i], exp_shifted(l[i] - m)) << i;
    long double exact = 0;
    for (int i = 0; i < n; ++i) exact += std::exp(static_cast<long double>(l[i] - m));
    EXPECT_NEAR(sref, static_cast<double>(exact), 4e-16 * sref * std::log2(n + 1.0)) << n;
    std::vector<std::pair<const char*, double (*)(const double*, int, double, double*)>> paths;
    if (isa_available(Isa::kAvx2)) paths.push_back({"avx2", kern::exp_sum_avx2});
    if (isa_available(Isa::kAvx512)) paths.push_back({"avx512", kern::exp_sum_avx512});
    paths.push_back({"dispatched", exp_shifted_sum});
    for (const auto& [name, fn] : paths) {
      std::fill(out.begin(), out.end(), -1.0);
      const double s = fn(l.data(), n, m, out.data());
      EXPECT_EQ(0, std::memcmp(&s, &sref, 8)) << name << " n " << n;
      EXPECT_EQ(0, std::memcmp(out.data(), ref.data(), 8 * size_t(n))) << name << " n " << n;
      EXPECT_EQ(0, std::memcmp(&s, &sref, 8));
      EXPECT_EQ(fn(l.data(), n, m, nullptr), s) << name;  // without the terms, the same sum
    }
  }
}

// SwiGLU's gate on the vector exp: every path equals the twin bit for bit over every tail and
// values that leave the polynomial's range, and agrees with the float expression on glibc's
// expf (what it replaced) on all but a vanishing share of values, never by more than one ulp of
// the result.
TEST(ExpSum, SiluMulEqualsTheTwinAndGlibcExpf) {
  std::mt19937 g(7);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (size_t n : {1, 7, 8, 9, 4095, 4096, 4097, 100000}) {
    std::vector<float> gate(n), up(n);
    for (float& v : gate) v = nd(g);
    for (float& v : up) v = nd(g);
    for (size_t i = 3; i < n; i += 101) gate[i] = i % 2 ? 800.0f : -800.0f;  // exp over/underflow
    std::vector<float> ref = gate;
    silu_mul_scalar(ref.data(), up.data(), n);
    std::vector<std::pair<const char*, void (*)(float*, const float*, size_t)>> paths;
    if (isa_available(Isa::kAvx2)) paths.push_back({"avx2", kern::silu_mul_avx2});
    if (isa_available(Isa::kAvx512)) paths.push_back({"avx512", kern::silu_mul_avx512});
    paths.push_back({"dispatched", silu_mul_vec});
    for (const auto& [name, fn] : paths) {
      std::vector<float> got = gate;
      fn(got.data(), up.data(), n);
      EXPECT_EQ(0, std::memcmp(got.data(), ref.data(), n * 4)) << name << " n " << n;
    }
    size_t differ = 0;
    for (size_t i = 0; i < n; ++i) {
      const float x = gate[i];
      const float old = x / (1.0f + std::exp(-x)) * up[i];
      if (old != ref[i]) {
        ++differ;
        EXPECT_LE(std::fabs(old - ref[i]), std::fabs(old) * 2.5e-7f) << x;
      }
    }
    EXPECT_LE(differ, n / 1000 + 1) << n;
  }
}

// Attention's online-softmax row (max_f32, exp_sub_f32): every path equals the twin bit for bit
// over every tail; each term is float(exp_shifted(double(s - m))), within one ulp of glibc's
// expf of the same float difference (what it replaced); the sum is the stored terms' sum to
// within a few ulp of a long-double one.
TEST(ExpSum, AttentionRowEqualsTheTwinAndGlibcExpf) {
  std::mt19937 g(8);
  std::normal_distribution<float> nd(0.0f, 6.0f);
  for (int n : {1, 7, 8, 9, 15, 16, 17, 127, 128, 129, 512, 1001}) {
    std::vector<float> s(n);
    for (float& v : s) v = nd(g);
    for (int i = 4; i < n; i += 37) s[i] = -200.0f;  // an exp that underflows float
    const float mref = max_f32_scalar(s.data(), n);
    EXPECT_EQ(mref, *std::max_element(s.begin(), s.end())) << n;
    std::vector<float> ref = s;
    const double sref = exp_sub_f32_scalar(ref.data(), n, mref);
    long double exact = 0;
    for (int i = 0; i < n; ++i) {
      const float d = s[i] - mref;
      ASSERT_EQ(ref[i], static_cast<float>(exp_shifted(double(d)))) << i;
      const float old = std::exp(d);
      EXPECT_LE(std::fabs(old - ref[i]), std::fabs(old) * 1.2e-7f) << d;
      exact += ref[i];
    }
    EXPECT_NEAR(sref, static_cast<double>(exact), 4e-16 * sref * std::log2(n + 1.0)) << n;
    std::vector<
        std::tuple<const char*, float (*)(const float*, int), double (*)(float*, int, float)>>
        paths;
    if (isa_available(Isa::kAvx2))
      paths.push_back({"avx2", kern::max_f32_avx2, kern::exp_sub_f32_avx2});
    if (isa_available(Isa::kAvx512))
      paths.push_back({"avx512", kern::max_f32_avx512, kern::exp_sub_f32_avx512});
    paths.push_back({"dispatched", max_f32, exp_sub_f32});
    for (const auto& [name, mx, ex] : paths) {
      EXPECT_EQ(mx(s.data(), n), mref) << name << " n " << n;
      std::vector<float> got = s;
      const double sum = ex(got.data(), n, mref);
      EXPECT_EQ(0, std::memcmp(&sum, &sref, 8)) << name << " n " << n;
      EXPECT_EQ(0, std::memcmp(got.data(), ref.data(), 4 * size_t(n))) << name << " n " << n;
    }
  }
}

}  // namespace
}  // namespace dllmq
