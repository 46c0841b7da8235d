// util/finite_scan.h: the first non-finite value's index, against a plain std::isfinite loop, for
// every kind of bad value (NaN, +inf, -inf) at every position of lengths that hit the 16-lane
// fold's tail, with several bad values (the first one counts) and huge finite values (whose
// x * 0 is still 0) around them.
#include "util/finite_scan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace dllmq {
namespace {

size_t first_bad_plain(const std::vector<float>& v) {
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i])) return i;
  return v.size();
}

std::vector<float> finite_values(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-30.f, 30.f);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = u(rng);
  // Extremes that stay finite: x * 0 is 0 for them.
  if (n > 3) {
    v[0] = std::numeric_limits<float>::max();
    v[n / 2] = -std::numeric_limits<float>::max();
    v[n - 1] = std::numeric_limits<float>::denorm_min();
  }
  return v;
}

TEST(FiniteScan, FindsTheFirstBadValueAnywhere) {
  std::mt19937 rng(7);
  const float bads[] = {std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity()};
  for (size_t n : {0, 1, 15, 16, 17, 31, 33, 100, 1000}) {
    const auto clean = finite_values(n, rng);
    EXPECT_EQ(first_non_finite(clean.data(), n), n) << "n " << n;
    for (size_t pos = 0; pos < n; ++pos)
      for (float bad : bads) {
        auto v = clean;
        v[pos] = bad;
        if (pos + 5 < n) v[pos + 5] = bads[0];  // a later bad value must not win
        ASSERT_EQ(first_non_finite(v.data(), n), first_bad_plain(v))
            << "n " << n << " pos " << pos << " value " << bad;
        ASSERT_EQ(first_non_finite(v.data(), n), pos);
      }
  }
}

TEST(FiniteScan, AVocabularyRowWithOneBadLogit) {
  std::mt19937 rng(11);
  const size_t n = 32000;
  auto v = finite_values(n, rng);
  EXPECT_EQ(first_non_finite(v.data(), n), n);
  v[31999] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(first_non_finite(v.data(), n), 31999u);
  v[12345] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(first_non_finite(v.data(), n), 12345u);
}

}  // namespace
}  // namespace dllmq
