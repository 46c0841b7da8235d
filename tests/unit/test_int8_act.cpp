// The int8-activation product (--w8a8, ops/int8_act_gemm.h): the VNNI kernel (where the CPU has
// it) and its scalar twin equal the definition (int8_act_gemm_ref) bit for bit over row, column,
// group and k tails, int8 sym and int4 sym/asym codes, with a desc_act permutation, from weights
// packed for every instruction set; the threaded product equals the serial one; groups too long
// for int32 sums are refused by name; a zero row gives zeros and a non-finite row NaN; and the
// result stays near the exact product (the approximation is the activations' int8 rounding).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ops/int8_act_gemm.h"
#include "ops/packed_gemm.h"
#include "quant_codes_util.h"
#include "util/cpu_isa.h"
#include "util/error.h"
#include "wquant/weight_quant.h"

namespace dllmq {
namespace {

using testutil::normal;

QuantMatrix codes(int n, int k, const WeightQuantScheme& s, bool desc_act, std::mt19937& g) {
  return testutil::random_codes(n, k, s, desc_act, g);
}

struct Case {
  int bits;
  bool sym, desc_act;
};

class Int8ActTest : public testing::TestWithParam<Case> {};

TEST_P(Int8ActTest, KernelAndTwinEqualTheDefinitionBitForBit) {
  const Case c = GetParam();
  std::mt19937 g(5 + c.bits + c.sym * 2 + c.desc_act * 4);
  struct Shape {
    int m, n, k, group;
  };
  std::vector<Shape> shapes;
  for (int m = 1; m <= 9; ++m)
    shapes.push_back({m, 16 * (1 + m % 5) - (m % 3) * 3, 64 + 8 * m, 32});
  for (int n : {1, 15, 16, 17, 63, 64, 65, 130}) shapes.push_back({5, n, 96, 16});
  for (int k : {8, 24, 128, 136, 1000}) shapes.push_back({6, 40, k, 128});
  shapes.push_back({3, 40, 260, -1});  // one group whose length is not a multiple of 8
  shapes.push_back({33, 70, 512, 64});
  for (const Shape& sh : shapes) {
    const QuantMatrix q = codes(sh.n, sh.k, {c.bits, sh.group, c.sym}, c.desc_act, g);
    const int ldx = sh.k + 3, ldy = sh.n + 5;
    const std::vector<float> x = normal(size_t(sh.m) * ldx, 1.0f, g);
    std::vector<float> ref(size_t(sh.m) * ldy, -7.0f);
    int8_act_gemm_ref(x.data(), sh.m, ldx, q, ref.data(), ldy);
    for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
      const auto a = pack_int8_act(*pack_quant_weight(q, isa));
      for (const bool scalar : {false, true}) {
        std::vector<float> y(size_t(sh.m) * ldy, -7.0f);
        const kern::Block b{x.data(), ldx, sh.m, y.data(), ldy};
        int8_act_gemm(*a, {&b, 1}, 0, -1, scalar);
        ASSERT_EQ(0, std::memcmp(y.data(), ref.data(), y.size() * 4))
            << (scalar ? "scalar twin" : int8_act_kernel_name()) << " from " << isa_name(isa)
            << " packing, bits " << c.bits << " m " << sh.m << " n " << sh.n << " k " << sh.k
            << " group " << sh.group;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Schemes, Int8ActTest,
                         testing::Values(Case{8, true, false}, Case{8, false, false},
                                         Case{4, true, false}, Case{4, false, false},
                                         Case{8, true, true}, Case{8, false, true},
                                         Case{4, false, true}));

TEST(Int8Act, ThreadsAndBlocksChangeNoBits) {
  std::mt19937 g(3);
  const QuantMatrix q = codes(200, 384, {4, 128, false}, false, g);
  const auto a = pack_int8_act(*pack_quant_weight(q, dispatch_isa()));
  const std::vector<float> x = normal(size_t(40) * 384, 1.0f, g);
  std::vector<float> serial(size_t(40) * 200), par(serial.size(), -1.0f);
  const kern::Block whole{x.data(), 384, 40, serial.data(), 200};
  int8_act_gemm(*a, {&whole, 1});
  for (int t : {1, 2, 3}) {
    omp_set_num_threads(t);
    // two blocks, the second starting at row 17
    const kern::Block two[2] = {{x.data(), 384, 17, par.data(), 200},
                                {x.data() + 17 * 384, 384, 23, par.data() + 17 * 200, 200}};
    int8_act_gemm_parallel(*a, two);
    EXPECT_EQ(0, std::memcmp(serial.data(), par.data(), par.size() * 4)) << t << " threads";
  }
  omp_set_num_threads(omp_get_num_procs());
}

// Groups whose int32 sums could overflow are refused, naming the reason.
TEST(Int8Act, OverlongGroupsAreRefusedByName) {
  std::mt19937 g(4);
  const QuantMatrix q = codes(16, 40000, {8, -1, true}, false, g);
  const auto pw = pack_quant_weight(q, dispatch_isa());
  std::string why;
  EXPECT_FALSE(int8_act_eligible(*pw, &why));
  EXPECT_NE(why.find("group of 40000 input columns"), std::string::npos) << why;
  EXPECT_THROW(pack_int8_act(*pw), Error);
}

TEST(Int8Act, ZeroRowsGiveZerosAndNonFiniteRowsNaN) {
  std::mt19937 g(6);
  const QuantMatrix q = codes(24, 64, {4, 32, true}, false, g);
  const auto a = pack_int8_act(*pack_quant_weight(q, dispatch_isa()));
  std::vector<float> x(3 * 64, 0.0f);
  for (int k = 0; k < 64; ++k) x[128 + k] = 0.5f;
  x[64 + 9] = std::nanf("");
  std::vector<float> y(3 * 24, -1.0f);
  const kern::Block b{x.data(), 64, 3, y.data(), 24};
  int8_act_gemm(*a, {&b, 1});
  for (int c = 0; c < 24; ++c) {
    EXPECT_EQ(y[c], 0.0f);
    EXPECT_TRUE(std::isnan(y[24 + c]));
    EXPECT_TRUE(std::isfinite(y[48 + c]));
  }
}

// The approximation is the activations' rounding to 1/254 of each row's largest |x|: against the
// exact product on the same codes, the error stays within a few of those steps times the weights.
TEST(Int8Act, StaysNearTheExactProduct) {
  std::mt19937 g(8);
  for (const WeightQuantScheme s : {WeightQuantScheme{8, -1, true}, WeightQuantScheme{4, 128, true},
                                    WeightQuantScheme{4, 128, false}}) {
    const int m = 8, n = 64, k = 1024;
    const QuantMatrix q = codes(n, k, s, false, g);
    const std::vector<float> x = normal(size_t(m) * k, 1.0f, g);
    std::vector<float> exact(m * n), approx(m * n);
    quant_gemm_ref(x.data(), m, k, q, exact.data(), n);
    const auto a = pack_int8_act(*pack_quant_weight(q, dispatch_isa()));
    const kern::Block b{x.data(), k, m, approx.data(), n};
    int8_act_gemm(*a, {&b, 1});
    double num = 0, den = 0;
    for (int i = 0; i < m * n; ++i) {
      num += double(approx[i] - exact[i]) * (approx[i] - exact[i]);
      den += double(exact[i]) * exact[i];
    }
    EXPECT_LT(std::sqrt(num / den), 0.02) << "bits " << s.bits;
    EXPECT_GT(std::sqrt(num / den), 0.0) << "bits " << s.bits;  // it is an approximation
  }
}

}  // namespace
}  // namespace dllmq
