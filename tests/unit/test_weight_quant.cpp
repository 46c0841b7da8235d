// Integer weight codes (wquant/): the packed kernels on int8 and int4 codes against their
// definition (quant_gemm_ref: per group the fmaf chain of x * float(q - z) over the reduction
// order, then the chain of group sums times their scales),
// bit for bit, on every instruction set this CPU has and every layout through the scalar twin,
// over tails of rows, columns, groups and K blocks, symmetric and asymmetric, with a desc_act
// g_idx permutation; linear() on codes at 1 to 3 threads; the GPTQ layout written and read back;
// and the checkpoint errors that must name their tensor. (The scheme itself is checked against a
// numpy implementation in tests/python/test_weight_quant.py.)
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "ops/backward.h"
#include "ops/linear.h"
#include "ops/packed_gemm.h"
#include "quant_codes_util.h"
#include "util/atomic_file.h"
#include "util/cpu_isa.h"
#include "util/error.h"
#include "util/half.h"
#include "wquant/gptq_tensors.h"
#include "wquant/quant_config.h"
#include "wquant/weight_quant.h"

namespace dllmq {
namespace {

using testutil::normal;
using testutil::random_codes;

// An f32 tensor over `v` (which must outlive it).
TensorView f32_view(const std::vector<float>& v, std::vector<int64_t> shape) {
  TensorView t;
  t.dtype = DType::kF32;
  t.shape = std::move(shape);
  t.data = v.data();
  t.nbytes = v.size() * 4;
  return t;
}

struct QShape {
  int m, n, k, group;
};

std::vector<QShape> qshapes() {
  std::vector<QShape> s;
  for (int m = 1; m <= 17; ++m) s.push_back({m, 8 * (1 + m % 6), 64 + 8 * m, 32});
  for (int n : {8, 16, 24, 32, 40, 48, 64, 72, 136}) s.push_back({5, n, 96, 16});
  for (int k : {8, 16, 128, 136, 264, 1000}) s.push_back({7, 40, k, 128});
  s.push_back({3, 40, 256, -1});    // one group over all of k (int8's default)
  s.push_back({400, 16, 520, -1});  // ... at many rows
  s.push_back({64, 24, 1024, 64});
  s.push_back({200, 16, 304, 32});
  return s;
}

struct QCase {
  int bits;
  bool sym, desc_act;
};

class QuantGemmTest : public testing::TestWithParam<QCase> {};

TEST_P(QuantGemmTest, EveryIsaEqualsTheDefinitionBitForBit) {
  const QCase qc = GetParam();
  std::mt19937 g(77 + qc.bits * 4 + qc.sym * 2 + qc.desc_act);
  for (const QShape& sh : qshapes()) {
    const WeightQuantScheme s{qc.bits, sh.group, qc.sym};
    const QuantMatrix q = random_codes(sh.n, sh.k, s, qc.desc_act, g);
    const int ldx = sh.k + 3, ldy = sh.n + 5;
    const std::vector<float> x = normal(size_t(sh.m) * ldx, 1.0f, g);
    std::vector<float> ref(size_t(sh.m) * ldy, -7.0f);
    quant_gemm_ref(x.data(), sh.m, ldx, q, ref.data(), ldy);
    // bf16 compute (round_w) leaves codes as they are: q - z is exact in bf16.
    for (const bool round_w : {false, true}) {
      for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
        const auto pw = pack_quant_weight(q, isa);
        // the symmetric scheme's zero points are all 2^(bits - 1): signed codes, no zero table
        ASSERT_EQ(pw->signed_codes, qc.sym);
        ASSERT_EQ(pw->zero.empty(), qc.sym);
        std::vector<float> xg(size_t(sh.m) * sh.k);
        const float* xp = x.data();
        int lx = ldx;
        if (!pw->order.empty()) {
          gather_reduction_order(*pw, x.data(), sh.m, ldx, xg.data());
          xp = xg.data();
          lx = sh.k;
        }
        // K blocks of the kernels' rule (0), and forced ones of 100: a block holds whole groups,
        // as many as fit in its length and at least one, so several short groups a block and a
        // group longer than that alone. And panel groups of 2 (what a small L2 picks).
        for (const bool scalar : {false, true}) {
          if (!scalar && !isa_available(isa)) continue;
          for (const auto& [kb, pg] : {std::pair{0, 0}, {100, 0}, {0, 2}}) {
            std::vector<float> y(size_t(sh.m) * ldy, -7.0f);
            const kern::Block b{xp, lx, sh.m, y.data(), ldy};
            packed_gemm(*pw, {&b, 1}, 0, pw->panels(), round_w, scalar, kb, pg);
            ASSERT_EQ(0, std::memcmp(y.data(), ref.data(), y.size() * 4))
                << isa_name(isa) << (scalar ? " (scalar twin)" : "") << " bits " << qc.bits << " m "
                << sh.m << " n " << sh.n << " k " << sh.k << " group " << sh.group << " round_w "
                << round_w << " K block " << kb << " panel group " << pg;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Schemes, QuantGemmTest,
                         testing::Values(QCase{8, true, false}, QCase{8, false, false},
                                         QCase{4, true, false}, QCase{4, false, false},
                                         QCase{4, true, true}, QCase{8, false, true}));

// linear() on codes (packed at "load" or packed per call), any thread count, grouped blocks:
// every row equals the definition plus the bias.
TEST(QuantLinear, RowsDoNotDependOnNeighboursOrThreads) {
  std::mt19937 g(11);
  const int in = 384, out = 200, rows = 70;
  for (const bool desc_act : {false, true}) {
    const auto q = std::make_shared<const QuantMatrix>(
        random_codes(out, in, WeightQuantScheme{4, 128, false}, desc_act, g));
    const std::vector<float> bias = normal(out, 1.0f, g);
    const TensorView bv = f32_view(bias, {out});
    const std::vector<float> x = normal(size_t(rows) * in, 1.0f, g);
    std::vector<float> ref(size_t(rows) * out);
    quant_gemm_ref(x.data(), rows, in, *q, ref.data(), out);
    for (int i = 0; i < rows; ++i)
      for (int o = 0; o < out; ++o) ref[size_t(i) * out + o] += bias[o];
    Linear packed;
    packed.b = &bv;
    packed.out = out;
    packed.in = in;
    packed.quant = q;
    Linear plain = packed;
    pack_linear(packed);
    EXPECT_EQ(packed.quant, nullptr);
    EXPECT_EQ(packed.weight_bits(), 4);
    const int saved = omp_get_max_threads();
    for (const int threads : {1, 2, 3})
      for (const Linear* l :
           {static_cast<const Linear*>(&packed), static_cast<const Linear*>(&plain)}) {
        omp_set_num_threads(threads);
        std::vector<float> y(ref.size());
        linear(x.data(), rows, *l, y.data());
        EXPECT_EQ(0, std::memcmp(y.data(), ref.data(), y.size() * 4)) << threads << desc_act;
        std::vector<float> yg(ref.size());
        const LinearRows blocks[] = {{x.data(), 1, yg.data()},
                                     {x.data() + in, 16, yg.data() + out, true},
                                     {x.data() + 17 * in, 53, yg.data() + 17 * out}};
        linear_grouped(blocks, *l);
        EXPECT_EQ(0, std::memcmp(yg.data(), ref.data(), yg.size() * 4)) << threads << desc_act;
      }
    omp_set_num_threads(saved);
  }
}

// The panels dequantized back (any row/column window, any layout, desc_act) are the codes'
// weights; the KV gradient's W^T product on codes equals the one on those weights in f32.
TEST(QuantLinear, DequantFromPanelsAndBackward) {
  std::mt19937 g(12);
  const int in = 520, out = 72, n = 9;
  for (const bool desc_act : {false, true}) {
    const auto q = std::make_shared<const QuantMatrix>(
        random_codes(out, in, WeightQuantScheme{4, 64, true}, desc_act, g));
    const std::vector<float> w = dequantize(*q);
    for (Isa isa : {Isa::kScalar, Isa::kAvx512}) {
      const auto pw = pack_quant_weight(*q, isa);
      std::vector<float> win(size_t(30) * 300);
      dequant_packed(*pw, 17, 30, 101, 300, win.data(), 300);
      bool same = true;
      for (int r = 0; r < 30; ++r)
        for (int c = 0; c < 300; ++c)
          same = same && win[size_t(r) * 300 + c] == w[size_t(17 + r) * in + 101 + c];
      EXPECT_TRUE(same) << isa_name(isa) << " desc_act " << desc_act;
    }
    const TensorView tv = f32_view(w, {out, in});
    const Linear lf{&tv, nullptr, out, in};
    Linear lq;
    lq.out = out;
    lq.in = in;
    lq.quant = q;
    pack_linear(lq);
    const std::vector<float> dy = normal(size_t(n) * out, 1.0f, g);
    std::vector<float> dxf(size_t(n) * in), dxq(size_t(n) * in);
    linear_backward_input(dy.data(), n, lf, dxf.data(), false);
    linear_backward_input(dy.data(), n, lq, dxq.data(), false);
    EXPECT_EQ(0, std::memcmp(dxf.data(), dxq.data(), dxf.size() * 4)) << desc_act;
  }
}

TEST(WeightQuant, CodesStayInRangeAndDequantizeNearTheWeights) {
  std::mt19937 g(3);
  const int n = 24, k = 256;
  const std::vector<float> w = normal(size_t(n) * k, 0.05f, g);
  for (const int bits : {4, 8})
    for (const bool sym : {true, false}) {
      const QuantMatrix m = quantize_rtn(w.data(), DType::kF32, n, k, {bits, 64, sym}, "t");
      ASSERT_EQ(m.n_groups, 4);
      const std::vector<float> d = dequantize(m);
      for (int c = 0; c < n; ++c)
        for (int kk = 0; kk < k; ++kk) {
          ASSERT_LT(m.q[size_t(c) * k + kk], 1 << bits);
          const float s = m.scale[size_t(kk / 64) * n + c];
          // Round to nearest: within half a step, and within one where the code is clamped at
          // an end of the range (the fp16 scale can leave the extreme just outside it).
          EXPECT_LE(std::abs(d[size_t(c) * k + kk] - w[size_t(c) * k + kk]), s * 1.0001f);
        }
    }
}

// A tiny checkpoint holding one projection's GPTQ tensors (possibly corrupted by `edit`).
std::string write_gptq_dir(const std::string& name, const GptqTensors& t,
                           const std::function<void(std::vector<OutTensor>&)>& edit) {
  const std::string dir = (std::filesystem::temp_directory_path() / ("dllmq_wq_" + name)).string();
  std::filesystem::create_directories(dir);
  auto i32 = [](const std::vector<int32_t>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  };
  std::vector<OutTensor> out = {
      {"p.qweight", DType::kI32, t.qweight_shape, [&] { return i32(t.qweight); }},
      {"p.qzeros", DType::kI32, t.qzeros_shape, [&] { return i32(t.qzeros); }},
      {"p.scales", DType::kF16, t.scales_shape,
       [&] {
         return std::string(reinterpret_cast<const char*>(t.scales.data()), t.scales.size() * 2);
       }},
      {"p.g_idx", DType::kI32, t.g_idx_shape, [&] { return i32(t.g_idx); }}};
  edit(out);
  write_safetensors(dir + "/model.safetensors", out, {});
  return dir;
}

TEST(GptqTensors, WrittenAndReadBackExactlyInBothFormats) {
  std::mt19937 g(21);
  for (const int bits : {4, 8})
    for (const bool v1 : {true, false}) {
      // v1 with symmetric codes (z = 2^(b-1) >= 1), v2 with asymmetric ones and desc_act.
      const QuantMatrix m = random_codes(48, 256, {bits, 64, v1}, !v1, g);
      const GptqTensors t = encode_gptq(m, v1, "p");
      const std::string dir = write_gptq_dir("rt", t, [](auto&) {});
      WeightQuantConfig qc;
      qc.enabled = true;
      qc.scheme = {bits, 64, v1};
      qc.v1 = v1;
      const Checkpoint ck(dir);
      const QuantMatrix r = decode_gptq(ck, "p", 48, 256, qc);
      EXPECT_EQ(r.q, m.q);
      EXPECT_EQ(r.zero, m.zero);
      EXPECT_EQ(r.scale, m.scale);
      EXPECT_EQ(r.g_idx, m.g_idx);
    }
}

// AutoGPTQ's v1 reading: a stored field f means zero point f + 1 (so 15 means 16 at 4 bits).
TEST(GptqTensors, V1ZeroFieldIsPlusOne) {
  std::mt19937 g(22);
  QuantMatrix m = random_codes(8, 64, {4, 64, true}, false, g);
  GptqTensors t = encode_gptq(m, false, "p");  // fields = zero points as they are
  t.qzeros[0] = int32_t(0xFu);                 // column 0: field 15, columns 1..7: field 0
  const std::string dir = write_gptq_dir("v1", t, [](auto&) {});
  WeightQuantConfig qc;
  qc.enabled = true;
  qc.scheme = {4, 64, true};
  qc.v1 = true;
  const QuantMatrix r = decode_gptq(Checkpoint(dir), "p", 8, 64, qc);
  EXPECT_EQ(r.zero[0], 16);
  EXPECT_EQ(r.zero[1], 1);
}

TEST(GptqTensors, CorruptTensorsFailNamingTheTensor) {
  std::mt19937 g(23);
  const QuantMatrix m = random_codes(16, 128, {4, 64, true}, false, g);
  const GptqTensors t = encode_gptq(m, true, "p");
  WeightQuantConfig qc;
  qc.enabled = true;
  qc.scheme = {4, 64, true};
  auto expect_error = [&](const std::string& name,
                          const std::function<void(std::vector<OutTensor>&)>& edit,
                          const std::string& want) {
    const std::string dir = write_gptq_dir(name, t, edit);
    try {
      decode_gptq(Checkpoint(dir), "p", 16, 128, qc);
      FAIL() << name << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  expect_error(
      "zshape",
      [](auto& o) {
        o[1].shape = {2, 1};
        o[1].bytes = [] { return std::string(8, '\0'); };
      },
      "'p.qzeros' has shape [2, 1]");
  expect_error(
      "noidx", [](auto& o) { o.pop_back(); }, "missing tensor 'p.g_idx'");
  expect_error(
      "badidx",
      [](auto& o) {
        o[3].bytes = [] {
          std::vector<int32_t> v(128, 5);
          return std::string(reinterpret_cast<const char*>(v.data()), 512);
        };
      },
      "'p.g_idx' entry 0 is 5");
  expect_error(
      "wdtype", [](auto& o) { o[0].dtype = DType::kF32; }, "'p.qweight' has dtype F32");
}

TEST(WeightQuantConfig, ParsesAndRejectsWithTheField) {
  const auto qc = parse_weight_quant_config(
      R"({"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128,
          "sym": false, "desc_act": true, "checkpoint_format": "gptq_v2"}})",
      "c.json", false);
  EXPECT_TRUE(qc.enabled);
  EXPECT_EQ(qc.scheme.bits, 4);
  EXPECT_FALSE(qc.scheme.sym);
  EXPECT_TRUE(qc.desc_act);
  EXPECT_FALSE(qc.v1);
  EXPECT_FALSE(parse_weight_quant_config(R"({"model_type": "llada"})", "c.json", false).enabled);
  auto expect_error = [](const std::string& text, const std::string& want) {
    try {
      parse_weight_quant_config(text, "c.json", false);
      FAIL() << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  expect_error(R"({"quantization_config": {"quant_method": "gptq", "bits": 3}})",
               "weight bits 3 not supported (accepted: 4 or 8)");
  expect_error(R"({"quantization_config": {"quant_method": "awq", "bits": 4}})",
               "quant_method 'awq' not supported");
  expect_error(R"({"quantization_config": {"bits": 4, "group_size": 100}})", "group size 100");
  expect_error(R"({"quantization_config": {"bits": 4, "checkpoint_format": "marlin"}})",
               "checkpoint_format 'marlin'");
}

}  // namespace
}  // namespace dllmq
