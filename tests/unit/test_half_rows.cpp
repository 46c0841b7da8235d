// The half <-> f32 row conversions (util/half_rows.h): the F16C kernel gives the scalar twin's
// bits on every half value (all 65,536, NaNs included) and on floats across the whole range
// (subnormal results, exact ties, overflow to infinity), at every length around the 8-value
// vector (tails), on every instruction set this CPU has.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "util/half.h"
#include "util/half_rows.h"

namespace dllmq {
namespace {

std::vector<Isa> vector_isas() {
  std::vector<Isa> v;
  for (Isa i : {Isa::kAvx2, Isa::kAvx512})
    if (isa_available(i)) v.push_back(i);
  return v;
}

TEST(HalfRows, EveryHalfWidensToTheScalarBits) {
  std::vector<uint16_t> h(65536);
  for (size_t i = 0; i < h.size(); ++i) h[i] = uint16_t(i);
  std::vector<float> ref(h.size()), got(h.size());
  f16_to_f32_rows_isa(Isa::kScalar, h.data(), ref.data(), h.size());
  for (size_t i = 0; i < h.size(); ++i) {  // the twin is the scalar formula itself
    const float f = f16_to_f32(h[i]);
    ASSERT_EQ(std::memcmp(&f, &ref[i], 4), 0) << i;
  }
  EXPECT_EQ(ref[0x3c00], 1.0f);
  EXPECT_EQ(ref[0x0001], std::ldexp(1.0f, -24));  // the smallest subnormal, exact
  for (Isa isa : vector_isas()) {
    std::fill(got.begin(), got.end(), -1.0f);
    f16_to_f32_rows_isa(isa, h.data(), got.data(), h.size());
    for (size_t i = 0; i < h.size(); ++i)
      ASSERT_EQ(std::memcmp(&got[i], &ref[i], 4), 0)
          << isa_name(isa) << ": half 0x" << std::hex << i << " -> " << got[i] << " vs " << ref[i];
  }
}

TEST(HalfRows, FloatsNarrowToTheScalarBitsOnEveryTail) {
  std::mt19937 g(5);
  std::vector<float> x;
  // every exponent a float can have near the half range, both signs, random mantissas
  for (int e = -30; e <= 17; ++e)
    for (int r = 0; r < 200; ++r) {
      const float m = 1.0f + std::uniform_real_distribution<float>(0.0f, 1.0f)(g);
      x.push_back((r % 2 ? -1.0f : 1.0f) * std::ldexp(m, e));
    }
  // exact ties between two halves (normal and subnormal), which round to even
  for (int k = 0; k < 64; ++k) {
    x.push_back(1.0f + std::ldexp(float(2 * k + 1), -11));
    x.push_back(std::ldexp(float(2 * k + 1), -25));
  }
  for (float v : {0.0f, -0.0f, 65504.0f, 65520.0f, 1e30f, -1e30f, INFINITY, -INFINITY, 1e-40f})
    x.push_back(v);
  std::vector<uint16_t> ref(x.size());
  for (size_t i = 0; i < x.size(); ++i) ref[i] = f32_to_f16(x[i]);
  std::vector<uint16_t> got(x.size());
  f32_to_f16_rows_isa(Isa::kScalar, x.data(), got.data(), x.size());
  EXPECT_EQ(got, ref);
  for (Isa isa : vector_isas()) {
    std::fill(got.begin(), got.end(), uint16_t(0xdead));
    f32_to_f16_rows_isa(isa, x.data(), got.data(), x.size());
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(got[i], ref[i]) << isa_name(isa) << ": " << x[i];
    // lengths 0-19 from every offset 0-7: the tail never reads or writes past n
    for (size_t off = 0; off < 8; ++off)
      for (size_t n = 0; n < 20; ++n) {
        std::vector<uint16_t> out(n + 2, 0x7777);
        f32_to_f16_rows_isa(isa, x.data() + off, out.data() + 1, n);
        ASSERT_EQ(out[0], 0x7777);
        ASSERT_EQ(out[n + 1], 0x7777);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i + 1], ref[off + i]);
        std::vector<float> back(n + 2, 3.0f);
        f16_to_f32_rows_isa(isa, ref.data() + off, back.data() + 1, n);
        ASSERT_EQ(back[0], 3.0f);
        ASSERT_EQ(back[n + 1], 3.0f);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(back[i + 1], f16_to_f32(ref[off + i]));
      }
  }
}

}  // namespace
}  // namespace dllmq
