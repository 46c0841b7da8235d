// The packed-weight micro-kernels (ops/packed_gemm.h) against their scalar twin: on every
// instruction set this CPU has, every weight dtype, with and without bf16 rounding of the
// weights, over shapes that hit every tail (rows not a multiple of the row tile, columns not a
// multiple of the panel, reductions not a multiple of anything and longer than one K block),
// each output must equal the plain std::fmaf loop over ascending k (gemm_fma_ref) bit for bit.
// On a CPU without AVX-512 its layout and driver still run, through the 16-lane scalar kernel.
// Then linear()/linear_grouped() on top of them: the bits of a row do not depend on the rows
// beside it or the thread count.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "linear_rows_check.h"
#include "ops/gemm.h"
#include "ops/gemm_peak.h"
#include "ops/linear.h"
#include "ops/packed_gemm.h"
#include "test_helpers.h"
#include "util/cpu_isa.h"
#include "util/error.h"
#include "util/half.h"

namespace dllmq {
namespace {

std::vector<Isa> isas_here() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512})
    if (isa_available(isa)) out.push_back(isa);
  return out;
}

// Weights of `dt` as raw bytes, values ~N(0, 0.05) with some exact zeros and large ones.
std::vector<uint8_t> random_weights(DType dt, int n, int k, std::mt19937& g) {
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<uint8_t> w(size_t(n) * k * dtype_size(dt));
  for (size_t i = 0; i < size_t(n) * k; ++i) {
    float v = nd(g);
    if (i % 37 == 0) v = 0.0f;
    if (i % 101 == 0) v *= 300.0f;
    if (dt == DType::kF32) {
      std::memcpy(w.data() + 4 * i, &v, 4);
    } else {
      const uint16_t h = dt == DType::kBF16 ? f32_to_bf16(v) : f32_to_f16(v);
      std::memcpy(w.data() + 2 * i, &h, 2);
    }
  }
  return w;
}

std::vector<float> random_x(size_t n, std::mt19937& g) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = nd(g);
  return x;
}

// A [out, in] bf16 tensor over the bytes of `w`.
TensorView bf16_view(const std::vector<uint8_t>& w, int out, int in) {
  TensorView tv;
  tv.dtype = DType::kBF16;
  tv.shape = {out, in};
  tv.data = w.data();
  tv.nbytes = w.size();
  return tv;
}

struct Shape {
  int m, n, k;
};

// Rows 1..17 (every row tail of the 6-, 8- and 12-row tiles, several panels at once for 1 and 2
// rows), columns around the 16- and 32-column panels, reductions short, odd and long. The kernels'
// own K blocks depend on this CPU's L2 (PackedGemm::k_block: at least 512 values of k for f32
// on a 512 KiB L2, 1,024 on 1 MiB), so the test also forces blocks of its own (kOrders).
std::vector<Shape> shapes() {
  std::vector<Shape> s;
  for (int m = 1; m <= 17; ++m) s.push_back({m, 16 * (m % 5) + m, 3 + 11 * m});
  for (int n : {1, 7, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 100, 129})
    s.push_back({5 + n % 9, n, 37});
  for (int k : {1, 2, 8, 9, 127, 128, 129, 300}) s.push_back({7, 40, k});
  s.push_back({64, 33, 1000});
  s.push_back({28, 70, 333});   // 12 + 8 + 8 rows at MR 12: a small tail shared (for_each_tile)
  s.push_back({200, 20, 300});  // 34 row tiles
  s.push_back({3, 129, 2049});
  s.push_back({256, 20, 1100});  // the kernels' own blocks at many rows (3 of f32 on 512 KiB)
  return s;
}

// K block lengths: the kernels' rule (0), then blocks of 37 values of k, which pause every chain
// in y and resume it, and end inside the kernels' turns of k steps.
// K blocks and panel groups forced besides the kernels' own (0): blocks of 37 pause the chains
// inside the kernels' turns of k steps; groups of 2 are what a small L2 picks
// (PackedGemm::panel_group), whatever this CPU's L2, and 1 what the kernels also run.
struct Order {
  int k_block, group;
};
constexpr Order kOrders[] = {{0, 0}, {37, 0}, {0, 1}, {0, 2}};

class PackedGemmTest : public testing::TestWithParam<DType> {};

TEST_P(PackedGemmTest, EveryIsaEqualsScalarFmaLoopOnEveryTail) {
  const DType dt = GetParam();
  std::mt19937 g(1234 + int(dt));
  for (const Shape& sh : shapes()) {
    const std::vector<uint8_t> w = random_weights(dt, sh.n, sh.k, g);
    const int ldx = sh.k + 3, ldy = sh.n + 5;  // strides wider than the data
    const std::vector<float> x = random_x(size_t(sh.m) * ldx, g);
    for (const bool round_w : {false, true}) {
      std::vector<float> ref(size_t(sh.m) * ldy, -7.0f);
      gemm_fma_ref(x.data(), sh.m, ldx, w.data(), dt, sh.n, sh.k, round_w, ref.data(), ldy);
      // Every layout (8 and 16 lanes) through the portable kernel of its width, the AVX-512
      // layout and 8-row driver included where the CPU lacks AVX-512; the vector kernels where
      // the CPU has them.
      for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
        const auto pw = pack_weight(w.data(), dt, sh.n, sh.k, isa);
        for (const bool scalar : {false, true}) {
          if (!scalar && !isa_available(isa)) continue;
          for (const Order o : kOrders) {
            std::vector<float> y(size_t(sh.m) * ldy, -7.0f);  // the gaps must stay untouched
            const kern::Block b{x.data(), ldx, sh.m, y.data(), ldy};
            packed_gemm(*pw, {&b, 1}, 0, pw->panels(), round_w, scalar, o.k_block, o.group);
            ASSERT_EQ(0, std::memcmp(y.data(), ref.data(), y.size() * 4))
                << isa_name(isa) << (scalar ? " (scalar twin)" : "") << " m " << sh.m << " n "
                << sh.n << " k " << sh.k << " round_w " << round_w << " K block " << o.k_block
                << " group " << o.group;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, PackedGemmTest,
                         testing::Values(DType::kF32, DType::kBF16, DType::kF16));

// Panel ranges and blocks split any way give the same bits as one call over everything.
TEST(PackedGemm, PanelRangesAndBlocksDoNotChangeBits) {
  std::mt19937 g(99);
  const int n = 150, k = 513;
  const std::vector<uint8_t> w = random_weights(DType::kBF16, n, k, g);
  const std::vector<float> x = random_x(size_t(23) * k, g);
  for (Isa isa : isas_here()) {
    const auto pw = pack_weight(w.data(), DType::kBF16, n, k, isa);
    std::vector<float> all(size_t(23) * n), split(size_t(23) * n);
    const kern::Block b{x.data(), k, 23, all.data(), n};
    packed_gemm(*pw, {&b, 1}, 0, pw->panels(), false);
    const kern::Block parts[] = {{x.data(), k, 1, split.data(), n},
                                 {x.data() + k, k, 9, split.data() + n, n},
                                 {x.data() + 10 * k, k, 13, split.data() + 10 * n, n}};
    for (int p = 0; p < pw->panels(); p += 2)
      packed_gemm(*pw, parts, p, std::min(p + 2, pw->panels()), false);
    EXPECT_EQ(0, std::memcmp(all.data(), split.data(), all.size() * 4)) << isa_name(isa);
  }
}

TEST(PackedGemm, PackedBytesMatchTheCheckpoint) {
  std::mt19937 g(5);
  const std::vector<uint8_t> w = random_weights(DType::kBF16, 4096, 64, g);
  for (Isa isa : isas_here()) {
    const auto pw = pack_weight(w.data(), DType::kBF16, 4096, 64, isa);
    EXPECT_EQ(pw->bytes(), w.size()) << isa_name(isa);  // 4096 columns: no padding
  }
}

// linear() and linear_grouped() over packed and unpacked weights, any thread count: every row
// equals the scalar loop (plus the bias), alone or stacked with others.
TEST(PackedGemm, LinearRowsDoNotDependOnNeighboursOrThreads) {
  std::mt19937 g(7);
  const int in = 384, out = 200;
  const std::vector<uint8_t> wb = random_weights(DType::kBF16, out, in, g);
  const TensorView tv = bf16_view(wb, out, in);
  const std::vector<float> bias = random_x(out, g);
  TensorView bv;
  bv.dtype = DType::kF32;
  bv.shape = {out};
  bv.data = bias.data();
  bv.nbytes = out * 4;
  const int rows = 70;
  const std::vector<float> x = random_x(size_t(rows) * in, g);
  std::vector<float> ref(size_t(rows) * out);
  gemm_fma_ref(x.data(), rows, in, wb.data(), DType::kBF16, out, in, false, ref.data(), out);
  for (int i = 0; i < rows; ++i)
    for (int o = 0; o < out; ++o) ref[size_t(i) * out + o] += bias[o];
  Linear packed{&tv, &bv, out, in};
  pack_linear(packed);
  const Linear plain{&tv, &bv, out, in};
  const int saved = omp_get_max_threads();
  for (const int threads : {1, 2, 3})
    for (const Linear* l : {static_cast<const Linear*>(&packed), &plain}) {
      omp_set_num_threads(threads);
      std::vector<float> y(ref.size());
      linear(x.data(), rows, *l, y.data());
      EXPECT_EQ(0, std::memcmp(y.data(), ref.data(), y.size() * 4)) << threads;
      std::vector<float> yg(ref.size());
      const LinearRows blocks[] = {{x.data(), 1, yg.data()},
                                   {x.data() + in, 16, yg.data() + out, true},
                                   {x.data() + 17 * in, 53, yg.data() + 17 * out}};
      linear_grouped(blocks, *l);
      EXPECT_EQ(0, std::memcmp(yg.data(), ref.data(), yg.size() * 4)) << threads;
    }
  omp_set_num_threads(saved);
}

// dispatch_isa() decides once per process: DLLMQ_ISA is tried in re-executed children.
TEST(IsaDispatchDeathTest, EnvironmentForcesIsa) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto run_with = [](const char* value) {
    setenv("DLLMQ_ISA", value, 1);
    try {
      std::fprintf(stderr, "isa=%s\n", isa_name(dispatch_isa()));
    } catch (const Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      std::exit(3);
    }
    std::exit(0);
  };
  EXPECT_EXIT(run_with("scalar"), testing::ExitedWithCode(0), "isa=scalar");
  EXPECT_EXIT(run_with("sse9"), testing::ExitedWithCode(3), "DLLMQ_ISA=sse9: expected scalar");
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (isa_available(isa))
      EXPECT_EXIT(run_with(isa_name(isa)), testing::ExitedWithCode(0),
                  std::string("isa=") + isa_name(isa));
    else
      EXPECT_EXIT(run_with(isa_name(isa)), testing::ExitedWithCode(3), "does not support");
  }
}

TEST(PackedGemm, FmaPeakIsMeasuredOnEveryVectorIsa) {
  for (Isa isa : isas_here()) {
    const double gf = measure_fma_peak_gflops(isa, 0.02);
    if (isa == Isa::kScalar)
      EXPECT_EQ(gf, 0.0);
    else
      EXPECT_GT(gf, 1.0) << isa_name(isa);
  }
}

// The read bandwidth over byte ranges (dllmq bench's roofline): ranges of any length and
// alignment, split between the threads, each read to its last float and no further (the
// sanitizer build checks the reads); a Linear's range is the bytes its products read.
TEST(PackedGemm, ReadBandwidthCoversRaggedRangesAndAWeightsBytes) {
  std::vector<float> buf((size_t(1) << 18) + 64, 1.0f);
  const auto* b = reinterpret_cast<const uint8_t*>(buf.data());
  const std::vector<ByteRange> ranges = {
      {b, 4}, {b + 4, 60}, {b + 4, 4096 + 12}, {b + 64, (size_t(1) << 20) + 4},
      {b, 0}, {b + 12, 7}};
  EXPECT_GT(measure_read_gbps(ranges, 0.01), 0.0);
  EXPECT_EQ(measure_read_gbps(std::span<const ByteRange>(), 0.01), 0.0);
  EXPECT_GT(measure_read_gbps(size_t(100000), 0.01), 0.0);

  std::vector<float> wv(96 * 40, 0.5f);
  const test_util::OwnedTensor w(wv, {96, 40}, DType::kBF16);
  Linear l{&w.t, nullptr, 96, 40};
  std::vector<ByteRange> got;
  append_weight_range(l, got);  // not packed: the stored tensor
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].data, w.t.data);
  EXPECT_EQ(got[0].bytes, w.t.nbytes);
  pack_linear(l);
  got.clear();
  append_weight_range(l, got);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].data, l.packed->data());
  EXPECT_EQ(got[0].bytes, l.packed->bytes());
  append_weight_range(Linear{}, got);  // an empty Linear reads nothing
  EXPECT_EQ(got.size(), 1u);
}

// bf16 compute's dot-product kernel (AVX512-BF16) against the instruction emulated in scalar code
// (gemm_bf16dot_ref), bit for bit: the same tails, odd reductions (a last half pair), several K
// blocks (at most 4096 values each), split panel ranges, and activations with exact zeros,
// denormals (read as zero) and values that round up when taken to bf16.
TEST(PackedGemmBf16Dot, EqualsTheEmulatedInstructionOnEveryTail) {
  if (!isa_available(Isa::kAvx512) || !cpu_has_avx512_bf16())
    GTEST_SKIP() << "this CPU has no AVX512-BF16";
  std::mt19937 g(4321);
  std::vector<Shape> sh = shapes();
  sh.push_back({9, 70, 4097});
  sh.push_back({1, 130, 9001});
  sh.push_back({40, 64, 2500});
  for (const Shape& s : sh) {
    const std::vector<uint8_t> w = random_weights(DType::kBF16, s.n, s.k, g);
    const int ldx = s.k + 3, ldy = s.n + 5;
    std::vector<float> x = random_x(size_t(s.m) * ldx, g);
    for (size_t i = 0; i < x.size(); i += 29) x[i] = 0.0f;
    for (size_t i = 5; i < x.size(); i += 97) x[i] = 1e-39f;              // an f32 denormal
    for (size_t i = 11; i < x.size(); i += 53) x[i] = 1.0f + 0x1.81p-8f;  // rounds up in bf16
    std::vector<float> ref(size_t(s.m) * ldy, -7.0f);
    gemm_bf16dot_ref(x.data(), s.m, ldx, reinterpret_cast<const uint16_t*>(w.data()), s.n, s.k,
                     ref.data(), ldy);
    const auto pw = pack_weight(w.data(), DType::kBF16, s.n, s.k, Isa::kAvx512);
    ASSERT_TRUE(bf16dot_available(*pw));
    std::vector<float> y(ref.size(), -7.0f);  // the gaps must stay untouched
    const kern::Block b{x.data(), ldx, s.m, y.data(), ldy};
    const int mid = pw->panels() / 2;
    packed_gemm_bf16dot(*pw, {&b, 1}, 0, mid);
    packed_gemm_bf16dot(*pw, {&b, 1}, mid, pw->panels());
    ASSERT_EQ(0, std::memcmp(y.data(), ref.data(), y.size() * 4))
        << "m " << s.m << " n " << s.n << " k " << s.k;
  }
}

// Rows through linear() on the dot-product kernel: alone or stacked with others, any thread
// count, each row equals the emulation (so a server's stacked batch gives a request its own bits).
TEST(PackedGemmBf16Dot, LinearRowsDoNotDependOnNeighboursOrThreads) {
  if (!isa_available(Isa::kAvx512) || !cpu_has_avx512_bf16() || dispatch_isa() != Isa::kAvx512)
    GTEST_SKIP() << "the projections do not run AVX-512 with AVX512-BF16 here";
  const test_util::Bf16PathGuard restore;
  ASSERT_TRUE(gemm_set_bf16_dot(true));
  std::mt19937 g(8);
  const int in = 333, out = 200, rows = 70;
  std::vector<uint8_t> wb = random_weights(DType::kBF16, out, in, g);
  // Row 5 is all the largest f32 denormal, and every 7th weight is 4.0: rounding that row to bf16
  // before the kernel makes it the smallest normal and its products normal (non-zero outputs);
  // the instruction reads a denormal as zero, and linear() must too.
  for (size_t i = 0; i < wb.size() / 2; i += 7) reinterpret_cast<uint16_t*>(wb.data())[i] = 0x4080;
  const TensorView tv = bf16_view(wb, out, in);
  std::vector<float> x = random_x(size_t(rows) * in, g);
  const uint32_t big_denormal = 0x007fffffu;
  for (int i = 0; i < in; ++i) std::memcpy(&x[size_t(5) * in + i], &big_denormal, 4);
  std::vector<float> ref(size_t(rows) * out);
  gemm_bf16dot_ref(x.data(), rows, in, reinterpret_cast<const uint16_t*>(wb.data()), out, in,
                   ref.data(), out);
  Linear l{&tv, nullptr, out, in};
  pack_linear(l);
  test_util::expect_rows_equal(l, x, rows, ref, ComputeDType::kBF16);
}

TEST(PackedGemmBf16Dot, PeakIsMeasuredWhereTheCpuHasIt) {
  const double gf = measure_bf16dot_peak_gflops(0.02);
  if (isa_available(Isa::kAvx512) && cpu_has_avx512_bf16())
    EXPECT_GT(gf, 1.0);
  else
    EXPECT_EQ(gf, 0.0);
}

}  // namespace
}  // namespace dllmq
