// Quantization primitives: uniform codec, bit packing and fused dequantization on every ISA,
// weighted 1-D k-means, percentiles and the dense-and-sparse split.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "quant/bitpack.h"
#include "quant/dequant_isa.h"
#include "quant/kmeans.h"
#include "quant/outliers.h"
#include "quant/uniform.h"
#include "util/error.h"
#include "util/half.h"

namespace dllmq {
namespace {

constexpr int kAllBits[] = {2, 3, 4, 8};
constexpr int kSizes[] = {1, 7, 16, 32, 33, 64, 96, 128, 200};

std::vector<uint8_t> random_codes(int n, int bits, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> d(0, (1 << bits) - 1);
  std::vector<uint8_t> c(n);
  for (auto& v : c) v = static_cast<uint8_t>(d(g));
  return c;
}

std::vector<float> random_floats(int n, uint32_t seed, float lo, float hi) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

std::vector<uint8_t> pack(const std::vector<uint8_t>& codes, int bits) {
  const int n = static_cast<int>(codes.size());
  std::vector<uint8_t> p(packed_row_bytes(n, bits), 0xAB);
  pack_codes(codes.data(), n, bits, p.data());
  return p;
}

const char* isa_label(Isa isa) {
  return isa == Isa::kAvx512 ? "avx512" : isa == Isa::kAvx2 ? "avx2" : "scalar";
}

// The next fp16 above h (h finite, not -0).
uint16_t f16_up(uint16_t h) {
  return (h & 0x8000) ? h - 1 : h + 1;
}

bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof(float)) == 0;
}

TEST(QuantPack, RoundTripAllWidthsAndSizes) {
  for (int bits : kAllBits) {
    for (int n : kSizes) {
      const auto codes = random_codes(n, bits, 1000 * bits + n);
      const auto p = pack(codes, bits);
      ASSERT_EQ(p.size(), (static_cast<size_t>(n) * bits + 7) / 8);
      std::vector<uint8_t> back(n, 0xFF);
      unpack_codes(p.data(), n, bits, back.data());
      EXPECT_EQ(back, codes) << "bits " << bits << " n " << n;
    }
  }
}

TEST(QuantPack, UnusedHighBitsAreZero) {
  for (int bits : kAllBits) {
    for (int n : kSizes) {
      const std::vector<uint8_t> ones(n, static_cast<uint8_t>((1 << bits) - 1));
      const auto p = pack(ones, bits);
      int set = 0;
      for (uint8_t b : p) set += __builtin_popcount(b);
      EXPECT_EQ(set, n * bits) << "bits " << bits << " n " << n;
    }
  }
}

TEST(QuantPack, LayoutFourBits) {
  // n = 32: one full chunk, w = 16; byte j = code j | code (j + 16) << 4.
  std::vector<uint8_t> codes(32);
  for (int i = 0; i < 32; ++i) codes[i] = static_cast<uint8_t>((i * 7 + 3) & 15);
  const auto p = pack(codes, 4);
  ASSERT_EQ(p.size(), 16u);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(p[j], codes[j] | (codes[j + 16] << 4)) << j;

  // n = 37: a full chunk then m = 5, w = 3 (byte j = code 32 + j | code 35 + j << 4, j < 2).
  codes.resize(37);
  for (int i = 32; i < 37; ++i) codes[i] = static_cast<uint8_t>(i - 31);
  const auto q = pack(codes, 4);
  ASSERT_EQ(q.size(), 19u);
  EXPECT_EQ(q[16], 1 | (4 << 4));
  EXPECT_EQ(q[17], 2 | (5 << 4));
  EXPECT_EQ(q[18], 3);
}

TEST(QuantPack, LayoutTwoBits) {
  // n = 64: w = 16; byte j holds codes j, j + 16, j + 32, j + 48 at shifts 0, 2, 4, 6.
  std::vector<uint8_t> codes(64);
  for (int i = 0; i < 64; ++i) codes[i] = static_cast<uint8_t>((i / 16 + i) & 3);
  const auto p = pack(codes, 2);
  ASSERT_EQ(p.size(), 16u);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(p[j], codes[j] | codes[j + 16] << 2 | codes[j + 32] << 4 | codes[j + 48] << 6) << j;
  }
  // n = 6: w = 2; byte 0 = c0 | c2 << 2 | c4 << 4, byte 1 = c1 | c3 << 2 | c5 << 4.
  const std::vector<uint8_t> small = {1, 2, 3, 0, 2, 1};
  const auto s = pack(small, 2);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0], 1 | 3 << 2 | 2 << 4);
  EXPECT_EQ(s[1], 2 | 0 << 2 | 1 << 4);
}

TEST(QuantPack, LayoutThreeBits) {
  // Plain little-endian stream: code i at bits 3i .. 3i + 2.
  const std::vector<uint8_t> codes = {5, 3, 7, 1};
  const auto p = pack(codes, 3);
  ASSERT_EQ(p.size(), 2u);
  const unsigned stream = 5u | 3u << 3 | 7u << 6 | 1u << 9;
  EXPECT_EQ(p[0], stream & 0xFF);
  EXPECT_EQ(p[1], stream >> 8);
}

TEST(QuantPack, RejectsUnsupportedBits) {
  uint8_t c[4] = {}, p[4] = {};
  EXPECT_THROW(pack_codes(c, 4, 5, p), Error);
  EXPECT_THROW(unpack_codes(p, 4, 1, c), Error);
  EXPECT_FALSE(valid_quant_bits(5));
}

std::vector<Isa> available_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (isa_available(isa)) out.push_back(isa);
  }
  return out;
}

TEST(QuantDequant, UniformMatchesScalarFormulaOnEveryIsa) {
  // Partly filled last planes of w = 16 and w = 8 chunks (e.g. b = 2: n = 29, 62; b = 4: 15, 31)
  // next to full chunks and odd tails.
  const int extra_sizes[] = {8, 15, 24, 29, 31, 40, 48, 56, 62, 65, 255, 256, 257};
  std::vector<int> sizes(std::begin(kSizes), std::end(kSizes));
  sizes.insert(sizes.end(), std::begin(extra_sizes), std::end(extra_sizes));
  for (Isa isa : available_isas()) {
    for (int bits : kAllBits) {
      for (int n : sizes) {
        for (int group : {1, 8, 16, 32, 12, n}) {
          const int groups = (n + group - 1) / group;
          const auto codes = random_codes(n, bits, 7 * n + bits + group);
          const auto p = pack(codes, bits);
          const auto scale = random_floats(groups, n + group, 0.001f, 2.0f);
          const auto zero = random_floats(groups, 3 * n + group, -50.0f, 50.0f);
          std::vector<float> out(n, std::numeric_limits<float>::quiet_NaN());
          dequant_uniform_row_isa(isa, p.data(), n, bits, scale.data(), zero.data(), group,
                                  out.data());
          for (int c = 0; c < n; ++c) {
            const float want = std::fmaf(codes[c], scale[c / group], zero[c / group]);
            ASSERT_TRUE(same_bits(out[c], want))
                << isa_label(isa) << " bits " << bits << " n " << n << " group " << group << " c "
                << c << ": " << out[c] << " vs " << want;
          }
        }
      }
    }
  }
}

TEST(QuantDequant, LutMatchesScalarFormulaOnEveryIsa) {
  for (Isa isa : available_isas()) {
    for (int bits : kAllBits) {
      const auto lut = random_floats(1 << bits, 77 + bits, -1.0f, 1.0f);
      for (int n : {1, 7, 8, 15, 16, 29, 31, 32, 33, 62, 64, 96, 128, 200, 256}) {
        for (int group : {1, 32, 12, n}) {
          const int groups = (n + group - 1) / group;
          const auto codes = random_codes(n, bits, 11 * n + bits + group);
          const auto p = pack(codes, bits);
          const auto range = random_floats(groups, n + 5 * group, 0.01f, 3.0f);
          const auto offset = random_floats(groups, 2 * n + group, -5.0f, 5.0f);
          std::vector<float> out(n, std::numeric_limits<float>::quiet_NaN());
          dequant_lut_row_isa(isa, p.data(), n, bits, lut.data(), range.data(), offset.data(),
                              group, out.data());
          for (int c = 0; c < n; ++c) {
            const float want = std::fmaf(lut[codes[c]], range[c / group], offset[c / group]);
            ASSERT_TRUE(same_bits(out[c], want))
                << isa_label(isa) << " bits " << bits << " n " << n << " group " << group << " c "
                << c << ": " << out[c] << " vs " << want;
          }
        }
      }
    }
  }
}

TEST(QuantDequant, DispatchedPathMatchesScalar) {
  const std::string isa = quant_isa();
  EXPECT_TRUE(isa == "scalar" || isa == "avx2" || isa == "avx512") << isa;
  const int n = 128, bits = 4;
  const auto codes = random_codes(n, bits, 5);
  const auto p = pack(codes, bits);
  const auto scale = random_floats(n, 6, 0.1f, 1.0f);
  const auto zero = random_floats(n, 7, -1.0f, 1.0f);
  std::vector<float> got(n), want(n);
  dequant_uniform_row(p.data(), n, bits, scale.data(), zero.data(), 1, got.data());
  dequant_uniform_row_isa(Isa::kScalar, p.data(), n, bits, scale.data(), zero.data(), 1,
                          want.data());
  for (int c = 0; c < n; ++c) EXPECT_TRUE(same_bits(got[c], want[c])) << c;
  const auto lut = random_floats(16, 8, -1.0f, 1.0f);
  dequant_lut_row(p.data(), n, bits, lut.data(), scale.data(), zero.data(), 32, got.data());
  dequant_lut_row_isa(Isa::kScalar, p.data(), n, bits, lut.data(), scale.data(), zero.data(), 32,
                      want.data());
  for (int c = 0; c < n; ++c) EXPECT_TRUE(same_bits(got[c], want[c])) << c;
}

TEST(QuantDequant, UnavailableIsaThrows) {
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (isa_available(isa)) continue;
    uint8_t p[8] = {};
    float s = 1, z = 0, out[16];
    EXPECT_THROW(dequant_uniform_row_isa(isa, p, 16, 4, &s, &z, 16, out), Error);
  }
  EXPECT_TRUE(isa_available(Isa::kScalar));
}

// quant_isa() decides once per process, so DLLMQ_QUANT_ISA is tried in re-executed children
// ("threadsafe" death tests start the binary afresh and run only this test).
TEST(QuantDispatchDeathTest, EnvironmentForcesIsa) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto run_with = [](const char* value) {
    setenv("DLLMQ_QUANT_ISA", value, 1);
    try {
      std::fprintf(stderr, "isa=%s\n", quant_isa());
    } catch (const Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      std::exit(3);
    }
    std::exit(0);
  };
  EXPECT_EXIT(run_with("scalar"), testing::ExitedWithCode(0), "isa=scalar");
  EXPECT_EXIT(run_with("bogus"), testing::ExitedWithCode(3), "DLLMQ_QUANT_ISA=bogus");
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (isa_available(isa)) {
      EXPECT_EXIT(run_with(isa_label(isa)), testing::ExitedWithCode(0),
                  std::string("isa=") + isa_label(isa));
    } else {
      EXPECT_EXIT(run_with(isa_label(isa)), testing::ExitedWithCode(3), "does not support");
    }
  }
}

// Quantize -> pack -> dequantize one group and check |x - x_hat| <= scale / 2 (+ slack).
void check_round_trip(const std::vector<float>& x, int bits, const std::string& label) {
  const int n = static_cast<int>(x.size());
  const UniformParams prm = uniform_params(x.data(), n, 1, bits);
  const float scale = f16_to_f32(prm.scale), zero = f16_to_f32(prm.zero);
  float lo = x[0], hi = x[0];
  for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_LE(zero, lo) << label;
  if (hi == lo) {  // constant group: scale 0, dequantizes to min rounded down to fp16
    EXPECT_EQ(prm.scale, 0) << label;
    EXPECT_GT(f16_to_f32(f16_up(prm.zero)), lo) << label;
    return;
  }
  EXPECT_GE(static_cast<double>(zero) + ((1 << bits) - 1) * static_cast<double>(scale), hi)
      << label;
  EXPECT_GE(static_cast<double>(scale), (static_cast<double>(hi) - lo) / ((1 << bits) - 1))
      << label;
  std::vector<uint8_t> codes(n);
  uniform_quantize(x.data(), n, 1, bits, prm, codes.data());
  const auto p = pack(codes, bits);
  std::vector<float> out(n);
  dequant_uniform_row(p.data(), n, bits, &scale, &zero, n, out.data());
  for (int i = 0; i < n; ++i) {
    const double tol = scale / 2.0 + 1e-6 * std::max(1.0, std::fabs(static_cast<double>(x[i])));
    EXPECT_LE(std::fabs(static_cast<double>(out[i]) - x[i]), tol)
        << label << " bits " << bits << " i " << i << " x " << x[i] << " code " << int(codes[i]);
  }
}

TEST(QuantUniform, RoundTripErrorWithinHalfScale) {
  uint32_t seed = 1;
  for (int bits : kAllBits) {
    for (int n : {1, 7, 32, 128}) {
      check_round_trip(random_floats(n, seed++, -1.0f, 1.0f), bits, "mixed");
      check_round_trip(random_floats(n, seed++, -3.0f, -0.5f), bits, "negative");
      check_round_trip(random_floats(n, seed++, 1000.0f, 1000.01f), bits, "offset 1000");
      check_round_trip(random_floats(n, seed++, -1000.01f, -1000.0f), bits, "offset -1000");
      check_round_trip(random_floats(n, seed++, 0.0f, 1e-6f), bits, "tiny");
      check_round_trip(random_floats(n, seed++, -30000.0f, 30000.0f), bits, "wide");
    }
  }
}

TEST(QuantUniform, StridedInput) {
  const std::vector<float> x = {0.0f, 99.0f, 1.0f, -99.0f, 3.0f, 42.0f};
  const UniformParams p = uniform_params(x.data(), 3, 2, 2);
  EXPECT_EQ(f16_to_f32(p.zero), 0.0f);
  EXPECT_EQ(f16_to_f32(p.scale), 1.0f);
  uint8_t codes[3];
  uniform_quantize(x.data(), 3, 2, 2, p, codes);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 1);
  EXPECT_EQ(codes[2], 3);
}

TEST(QuantUniform, DirectedFp16Rounding) {
  // 0.1 is not an fp16 value: zero must land just below it, and the scale just above.
  const std::vector<float> x = {0.1f, 0.1f + 3 * 0.1f};
  const UniformParams p = uniform_params(x.data(), 2, 1, 2);
  const float zero = f16_to_f32(p.zero), scale = f16_to_f32(p.scale);
  EXPECT_LT(zero, 0.1f);
  EXPECT_GT(f16_to_f32(f16_up(p.zero)), 0.1f);  // one ulp up is above min
  EXPECT_GE(zero + 3.0 * scale, x[1]);
  // Negative min: rounding toward -inf grows the magnitude.
  const std::vector<float> y = {-0.1f, 0.5f};
  const UniformParams q = uniform_params(y.data(), 2, 1, 4);
  EXPECT_LT(f16_to_f32(q.zero), -0.1f);
  EXPECT_GT(f16_to_f32(f16_up(q.zero)), -0.1f);
  // A range below the smallest fp16 denormal still gets a non-zero scale.
  const std::vector<float> z = {0.0f, 1e-9f};
  const UniformParams r = uniform_params(z.data(), 2, 1, 2);
  EXPECT_EQ(r.zero, 0);
  EXPECT_GT(f16_to_f32(r.scale), 0.0f);
}

TEST(QuantUniform, ConstantGroup) {
  for (float v : {0.0f, 1.0f, -2.5f, 0.1f, 1000.3f}) {
    const std::vector<float> x(9, v);
    for (int bits : kAllBits) {
      const UniformParams p = uniform_params(x.data(), 9, 1, bits);
      EXPECT_EQ(p.scale, 0) << v;
      const float zero = f16_to_f32(p.zero);
      EXPECT_LE(zero, v);
      EXPECT_GT(f16_to_f32(f16_up(p.zero)), v);  // the largest fp16 <= v
      std::vector<uint8_t> codes(9, 0xFF);
      uniform_quantize(x.data(), 9, 1, bits, p, codes.data());
      for (uint8_t c : codes) EXPECT_EQ(c, 0);
      const float scale = 0.0f;
      const auto packed = pack(codes, bits);
      std::vector<float> out(9);
      dequant_uniform_row(packed.data(), 9, bits, &scale, &zero, 9, out.data());
      for (float o : out) EXPECT_EQ(o, zero);
    }
  }
  // Representable in fp16: dequantizes exactly.
  const std::vector<float> x(4, -2.5f);
  EXPECT_EQ(f16_to_f32(uniform_params(x.data(), 4, 1, 4).zero), -2.5f);
}

TEST(QuantUniform, CodeRoundsHalfToEvenAndClamps) {
  // (x - zero) / scale exactly 0.5, 1.5, 2.5: ties go to the even code.
  EXPECT_EQ(uniform_code(0.5f, 1.0f, 0.0f, 2), 0);
  EXPECT_EQ(uniform_code(1.5f, 1.0f, 0.0f, 2), 2);
  EXPECT_EQ(uniform_code(2.5f, 1.0f, 0.0f, 2), 2);
  EXPECT_EQ(uniform_code(1.25f, 0.5f, 0.0f, 4), 2);  // 2.5 -> 2
  EXPECT_EQ(uniform_code(1.75f, 0.5f, 0.0f, 4), 4);  // 3.5 -> 4
  EXPECT_EQ(uniform_code(10.0f, 1.0f, 0.0f, 2), 3);  // clamp high
  EXPECT_EQ(uniform_code(-3.0f, 1.0f, 0.0f, 2), 0);  // clamp low
  EXPECT_EQ(uniform_code(300.0f, 1.0f, 0.0f, 8), 255);
  EXPECT_EQ(uniform_code(5.0f, 0.0f, 1.0f, 4), 0);     // scale 0
  EXPECT_EQ(uniform_code(-0.75f, 0.5f, -2.0f, 3), 2);  // (1.25 / 0.5) = 2.5 -> 2
}

TEST(QuantUniform, RangeOutsideFp16Throws) {
  const std::vector<float> below = {-70000.0f, 0.0f};
  EXPECT_THROW(uniform_params(below.data(), 2, 1, 4), Error);
  try {
    uniform_params(below.data(), 2, 1, 4);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("-70000"), std::string::npos) << e.what();
  }
  // The range/(2^b - 1) overflows fp16 for b = 2 (scale ~ 66667) but not for b = 8.
  const std::vector<float> wide = {-65000.0f, 135000.0f};
  EXPECT_THROW(uniform_params(wide.data(), 2, 1, 2), Error);
  EXPECT_NO_THROW(uniform_params(wide.data(), 2, 1, 8));
  const std::vector<float> bad = {0.0f, std::numeric_limits<float>::infinity()};
  EXPECT_THROW(uniform_params(bad.data(), 2, 1, 4), Error);
  EXPECT_THROW(uniform_params(bad.data(), 1, 1, 5), Error);
}

// ---- k-means
// --------------------------------------------------------------------------------------

double uniform_grid_error(const std::vector<float>& x, int k) {
  float lo = x[0], hi = x[0];
  for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v);
  std::vector<float> grid(k);
  for (int i = 0; i < k; ++i) grid[i] = lo + (hi - lo) * i / (k - 1);
  return weighted_sq_error(x, {}, grid);
}

TEST(QuantKmeans, BeatsUniformGridOnSkewedData) {
  std::mt19937 g(42);
  std::exponential_distribution<float> expo(1.0f);
  std::student_t_distribution<float> student(3.0f);
  std::vector<float> e(20000), t(20000), w(20000);
  for (auto& v : e) v = expo(g);
  for (auto& v : t) v = student(g);
  std::uniform_real_distribution<float> wd(0.0f, 2.0f);
  for (auto& v : w) v = wd(g);
  for (int k : {4, 16}) {
    for (const auto* data : {&e, &t}) {
      const auto c = weighted_kmeans_1d(*data, {}, k);
      ASSERT_EQ(c.size(), static_cast<size_t>(k));
      EXPECT_TRUE(std::is_sorted(c.begin(), c.end()));
      EXPECT_LT(weighted_sq_error(*data, {}, c), uniform_grid_error(*data, k)) << k;
      // Weighted: compare under the same weights against the same grid.
      const auto cw = weighted_kmeans_1d(*data, w, k);
      float lo = (*data)[0], hi = lo;
      for (float v : *data) lo = std::min(lo, v), hi = std::max(hi, v);
      std::vector<float> grid(k);
      for (int i = 0; i < k; ++i) grid[i] = lo + (hi - lo) * i / (k - 1);
      EXPECT_LT(weighted_sq_error(*data, w, cw), weighted_sq_error(*data, w, grid)) << k;
    }
  }
}

TEST(QuantKmeans, WeightsMatter) {
  // Heavy weight on the right cluster pulls a k = 1 centroid to the weighted mean.
  const std::vector<float> x = {0.0f, 1.0f, 10.0f};
  const std::vector<float> w = {1.0f, 1.0f, 2.0f};
  const auto c = weighted_kmeans_1d(x, w, 1);
  EXPECT_NEAR(c[0], 21.0f / 4.0f, 1e-5f);
  // Zero-weight points do not attract centroids.
  const std::vector<float> y = {0.0f, 0.0f, 5.0f, 100.0f, 100.0f};
  const std::vector<float> v = {1.0f, 1.0f, 0.0f, 1.0f, 1.0f};
  const auto d = weighted_kmeans_1d(y, v, 2);
  EXPECT_EQ(d[0], 0.0f);
  EXPECT_EQ(d[1], 100.0f);
}

TEST(QuantKmeans, Deterministic) {
  const auto x = random_floats(5000, 3, -2.0f, 5.0f);
  const auto w = random_floats(5000, 4, 0.0f, 1.0f);
  const auto a = weighted_kmeans_1d(x, w, 16);
  const auto b = weighted_kmeans_1d(x, w, 16);
  EXPECT_EQ(a, b);
}

TEST(QuantKmeans, DegenerateData) {
  const std::vector<float> same(100, 3.25f);
  EXPECT_EQ(weighted_kmeans_1d(same, {}, 8), std::vector<float>(8, 3.25f));
  const std::vector<float> two = {1.0f, 2.0f, 1.0f, 2.0f};
  const auto c = weighted_kmeans_1d(two, {}, 4);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_TRUE(std::is_sorted(c.begin(), c.end()));
  EXPECT_EQ(weighted_sq_error(two, {}, c), 0.0);
  const std::vector<float> one = {-7.0f};
  EXPECT_EQ(weighted_kmeans_1d(one, {}, 3), std::vector<float>(3, -7.0f));
}

TEST(QuantKmeans, RejectsBadInput) {
  const std::vector<float> x = {1.0f, 2.0f, 3.0f};
  EXPECT_THROW(weighted_kmeans_1d({}, {}, 4), Error);
  EXPECT_THROW(weighted_kmeans_1d(x, std::vector<float>(3, 0.0f), 2), Error);
  EXPECT_THROW(weighted_kmeans_1d(x, std::vector<float>{1.0f, -1.0f, 1.0f}, 2), Error);
  EXPECT_THROW(weighted_kmeans_1d(x, std::vector<float>{1.0f, 1.0f}, 2), Error);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_THROW(weighted_kmeans_1d(std::vector<float>{1.0f, nan}, {}, 2), Error);
  EXPECT_THROW(weighted_kmeans_1d(std::vector<float>{1.0f, inf}, {}, 2), Error);
  EXPECT_THROW(weighted_kmeans_1d(x, std::vector<float>{1.0f, nan, 1.0f}, 2), Error);
  EXPECT_THROW(weighted_kmeans_1d(x, {}, 0), Error);
}

TEST(QuantKmeans, NearestCentroid) {
  const float c[] = {-1.0f, 0.0f, 0.0f, 2.0f};
  EXPECT_EQ(nearest_centroid(c, 4, -5.0f), 0);
  EXPECT_EQ(nearest_centroid(c, 4, -0.5f), 0);  // tie -> lower index
  EXPECT_EQ(nearest_centroid(c, 4, -0.4f), 1);
  EXPECT_EQ(nearest_centroid(c, 4, 0.0f), 1);  // duplicate centroid -> lower index
  EXPECT_EQ(nearest_centroid(c, 4, 1.0f), 2);  // tie between 0 (index 2) and 2
  EXPECT_EQ(nearest_centroid(c, 4, 1.01f), 3);
  EXPECT_EQ(nearest_centroid(c, 4, 99.0f), 3);
  EXPECT_EQ(nearest_centroid(c, 1, 99.0f), 0);
  // Against a brute-force scan.
  const auto cs = [] {
    auto v = random_floats(37, 9, -3.0f, 3.0f);
    std::sort(v.begin(), v.end());
    return v;
  }();
  for (float x : random_floats(2000, 10, -4.0f, 4.0f)) {
    int best = 0;
    for (int i = 1; i < 37; ++i) {
      if (std::fabs(static_cast<double>(x) - cs[i]) < std::fabs(static_cast<double>(x) - cs[best]))
        best = i;
    }
    EXPECT_EQ(nearest_centroid(cs.data(), 37, x), best) << x;
  }
}

TEST(QuantKmeans, LargeInputIsFast) {
  std::mt19937 g(5);
  std::exponential_distribution<float> expo(2.0f);
  std::vector<float> x(1000000);
  for (auto& v : x) v = expo(g);
  const auto c = weighted_kmeans_1d(x, {}, 256);  // must finish in well under a second
  EXPECT_EQ(c.size(), 256u);
  EXPECT_TRUE(std::is_sorted(c.begin(), c.end()));
}

// ---- outliers ---------------------------------------------------------------------------------

TEST(QuantOutliers, PercentileMatchesNumpy) {
  std::vector<float> v(100);
  for (int i = 0; i < 100; ++i) v[i] = static_cast<float>(100 - i);  // 100 .. 1, unsorted
  EXPECT_NEAR(percentile_inplace(v, 0.5), 1.495f, 1e-5f);
  EXPECT_NEAR(percentile_inplace(v, 99.5), 99.505f, 1e-4f);
  EXPECT_EQ(percentile_inplace(v, 0), 1.0f);
  EXPECT_EQ(percentile_inplace(v, 100), 100.0f);
  EXPECT_EQ(percentile_inplace(v, 50), 50.5f);
  std::vector<float> one = {4.0f};
  EXPECT_EQ(percentile_inplace(one, 37), 4.0f);
  std::vector<float> w = {3.0f, -1.0f, 7.0f, 2.0f};  // sorted: -1 2 3 7; 25% -> pos 0.75
  EXPECT_NEAR(percentile_inplace(w, 25), 1.25f, 1e-6f);
  std::vector<float> empty;
  EXPECT_THROW(percentile_inplace(empty, 50), Error);
  EXPECT_THROW(percentile_inplace(w, 101), Error);
}

TEST(QuantOutliers, SplitOutliers) {
  const std::vector<float> x = {0.5f, -3.0f, 1.0f, 2.5f, -1.0f, 9.0f};
  std::vector<SparseEntry> out = {{99, 0}};  // appended to, not cleared
  EXPECT_EQ(split_outliers(x.data(), 6, -1.0f, 1.0f, out), 3);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[1].index, 1);
  EXPECT_EQ(f16_to_f32(out[1].value), -3.0f);
  EXPECT_EQ(out[2].index, 3);
  EXPECT_EQ(f16_to_f32(out[2].value), 2.5f);
  EXPECT_EQ(out[3].index, 5);
  EXPECT_EQ(f16_to_f32(out[3].value), 9.0f);
  EXPECT_EQ(split_outliers(x.data(), 6, -10.0f, 10.0f, out), 0);
}

std::string finite_error(const std::vector<float>& x, int row_len, int layer, int pos0) {
  try {
    check_finite(x.data(), x.size(), row_len, layer, pos0, "kv cache");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(QuantOutliers, CheckFinite) {
  std::vector<float> x(1000, 1.0f);
  EXPECT_EQ(finite_error(x, 10, 3, 0), "");
  x[537] = std::numeric_limits<float>::quiet_NaN();
  const std::string m = finite_error(x, 10, 3, 100);
  EXPECT_NE(m.find("kv cache"), std::string::npos) << m;
  EXPECT_NE(m.find("nan"), std::string::npos) << m;
  EXPECT_NE(m.find("layer 3"), std::string::npos) << m;
  EXPECT_NE(m.find("position 153"), std::string::npos) << m;
  EXPECT_NE(m.find("channel 7"), std::string::npos) << m;
  x[537] = 1.0f;
  x[999] = -std::numeric_limits<float>::infinity();
  const std::string i = finite_error(x, 64, 0, 0);
  EXPECT_NE(i.find("inf"), std::string::npos) << i;
  EXPECT_NE(i.find("position 15"), std::string::npos) << i;
  EXPECT_NE(i.find("channel 39"), std::string::npos) << i;
}

}  // namespace
}  // namespace dllmq
