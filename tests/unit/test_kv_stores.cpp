// KV stores (dense, KIVI / dLLM-KVQ, KVQuant) behind the KvStore interface: attention over the
// packed rows equals attention over the same rows dequantized once, the codecs' round-trip
// bounds hold through the store, rewrites leave every other row bit-identical, non-finite input
// is rejected with its layer and position, and held() counts what the method papers promise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "cache/dense_kv_store.h"
#include "cache/kivi_kv_store.h"
#include "cache/kv_spec.h"
#include "cache/kv_store.h"
#include "cache/kvquant_kv_store.h"
#include "io/calib_artifact.h"
#include "ops/attention.h"
#include "ops/rope.h"
#include "quant/kmeans.h"
#include "quant/outliers.h"
#include "quant/uniform.h"
#include "util/error.h"
#include "util/half.h"

namespace dllmq {
namespace {

constexpr double kTheta = 500000.0;  // LLaDA's rope_theta

enum class Kind { kF32, kF16, kBF16, kKivi2, kKivi4, kDllmKvq2, kKvQuant2, kKvQuant4 };

const char* kind_label(Kind k) {
  switch (k) {
    case Kind::kF32:
      return "fp32";
    case Kind::kF16:
      return "fp16";
    case Kind::kBF16:
      return "bf16";
    case Kind::kKivi2:
      return "kivi2";
    case Kind::kKivi4:
      return "kivi4";
    case Kind::kDllmKvq2:
      return "dllmkvq2";
    case Kind::kKvQuant2:
      return "kvquant2";
    case Kind::kKvQuant4:
      return "kvquant4";
  }
  return "?";
}

// Normal deviates from splitmix64 and Marsaglia's polar method: the same values on every
// standard library (std::normal_distribution's are not specified), and fast enough for the 8M
// values the memory tests write.
std::vector<float> randn(size_t n, uint32_t seed, float sd = 1.0f) {
  uint64_t st = 0x243f6a8885a308d3ull ^ (uint64_t(seed) << 32);
  auto uniform = [&st] {  // in (-1, 1)
    uint64_t z = (st += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double((z ^ (z >> 31)) >> 11) + 0.5) * 0x1.0p-52 - 1.0;
  };
  std::vector<float> v(n);
  for (size_t i = 0; i < n; i += 2) {
    double x, y, s;
    do {
      x = uniform();
      y = uniform();
      s = x * x + y * y;
    } while (s >= 1.0 || s == 0.0);
    const double f = sd * std::sqrt(-2.0 * std::log(s) / s);
    v[i] = float(x * f);
    if (i + 1 < n) v[i + 1] = float(y * f);
  }
  return v;
}

// K rows shaped like real pre-RoPE keys: a few channels per head several times larger than the
// rest and off-centre, so per-channel ranges differ (what KIVI's per-channel groups are for).
std::vector<float> random_keys(int n, const KvGeometry& geo, uint32_t seed) {
  auto k = randn(size_t(n) * geo.kv_dim(), seed);
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < geo.kv_dim(); ++c)
      if (c % 13 == 3)
        k[size_t(r) * geo.kv_dim() + c] = 4.0f * k[size_t(r) * geo.kv_dim() + c] + 1.5f;
  return k;
}

struct Canvas {
  std::vector<std::vector<float>> k, v;  // per layer: [n, kv_dim] pre-RoPE K, V
};

Canvas make_canvas(const KvGeometry& geo, int n, uint32_t seed) {
  Canvas c;
  for (int l = 0; l < geo.n_layers; ++l) {
    c.k.push_back(random_keys(n, geo, seed + 100 * l));
    c.v.push_back(randn(size_t(n) * geo.kv_dim(), seed + 100 * l + 1));
  }
  return c;
}

// A non-uniform codebook of 2^bits ascending values spanning exactly [-1, 1].
std::vector<float> codebook(int bits) {
  const int k = 1 << bits;
  std::vector<float> c(k);
  for (int i = 0; i < k; ++i) {
    const float t = -1.0f + 2.0f * float(i) / float(k - 1);
    c[i] = 0.5f * t + 0.5f * t * std::fabs(t);
  }
  return c;
}

// KVQuant artifact whose K thresholds are the per-channel outlier_percent/2 and
// 100 - outlier_percent/2 percentiles of `k` (per layer [rows, kv_dim] pre-RoPE).
CalibArtifact make_artifact(const KvGeometry& geo, int bits,
                            const std::vector<std::vector<float>>& k, int rows, int sink,
                            double outlier_percent = 1.0) {
  CalibArtifact a;
  a.bits_k = a.bits_v = bits;
  a.sink = sink;
  a.outlier_percent = outlier_percent;
  a.n_layers = geo.n_layers;
  a.n_kv_heads = geo.n_kv_heads;
  a.head_dim = geo.head_dim;
  const int kvd = geo.kv_dim();
  std::vector<float> col(rows);
  for (int l = 0; l < geo.n_layers; ++l) {
    CalibLayer cl;
    cl.k_lower.resize(kvd);
    cl.k_upper.resize(kvd);
    for (int c = 0; c < kvd; ++c) {
      for (int r = 0; r < rows; ++r) col[r] = k[l][size_t(r) * kvd + c];
      cl.k_lower[c] = percentile_inplace(col, outlier_percent / 2);
      cl.k_upper[c] = percentile_inplace(col, 100.0 - outlier_percent / 2);
    }
    cl.k_codebook = codebook(bits);
    cl.v_codebook = codebook(bits);
    a.layers.push_back(std::move(cl));
  }
  return a;
}

// dLLM-KVQ fp16 K channels: three per (layer, head), different per head.
KiviConfig kvq_config(const KvGeometry& geo, int bits, int group) {
  KiviConfig c{bits, bits, group, {}};
  c.fp16_channels.resize(geo.n_layers);
  for (int l = 0; l < geo.n_layers; ++l)
    for (int g = 0; g < geo.n_kv_heads; ++g)
      c.fp16_channels[l].push_back(
          {(3 + 5 * g + l) % geo.head_dim, (7 * g + 1) % geo.head_dim, geo.head_dim - 1});
  return c;
}

// `calib_k` (per layer [calib_rows, kv_dim]) only matters to KVQuant: its thresholds.
std::unique_ptr<KvStore> make_store(Kind kind, const KvGeometry& geo, const RopeTable& rope,
                                    const std::vector<std::vector<float>>& calib_k, int calib_rows,
                                    int sink = 1) {
  switch (kind) {
    case Kind::kF32:
      return std::make_unique<DenseKvStore>(geo, DType::kF32, rope);
    case Kind::kF16:
      return std::make_unique<DenseKvStore>(geo, DType::kF16, rope);
    case Kind::kBF16:
      return std::make_unique<DenseKvStore>(geo, DType::kBF16, rope);
    case Kind::kKivi2:
      return std::make_unique<KiviKvStore>(geo, KiviConfig{2, 2, 32, {}}, rope);
    case Kind::kKivi4:
      return std::make_unique<KiviKvStore>(geo, KiviConfig{4, 4, 32, {}}, rope);
    case Kind::kDllmKvq2:
      return std::make_unique<KiviKvStore>(geo, kvq_config(geo, 2, 32), rope);
    case Kind::kKvQuant2:
    case Kind::kKvQuant4: {
      const int bits = kind == Kind::kKvQuant2 ? 2 : 4;
      return std::make_unique<KvQuantKvStore>(
          geo, make_artifact(geo, bits, calib_k, calib_rows, sink), rope);
    }
  }
  return nullptr;
}

// Rows [p0, p0 + n) of one layer, every KV head, read `step` rows at a time into [n, kv_dim].
struct DenseRows {
  std::vector<float> k, v;
};

DenseRows read_rows(const KvStore& s, const KvGeometry& geo, int layer, int p0, int n, int step) {
  const int hd = geo.head_dim, kvd = geo.kv_dim();
  DenseRows d{std::vector<float>(size_t(n) * kvd), std::vector<float>(size_t(n) * kvd)};
  std::vector<float> ks(size_t(step) * hd), vs(size_t(step) * hd);
  for (int g = 0; g < geo.n_kv_heads; ++g)
    for (int r0 = 0; r0 < n; r0 += step) {
      const int m = std::min(step, n - r0);
      const KvRows r = s.read(layer, g, p0 + r0, m, ks.data(), vs.data());
      for (int i = 0; i < m; ++i) {
        std::memcpy(&d.k[size_t(r0 + i) * kvd + size_t(g) * hd], r.k + size_t(i) * r.ld,
                    size_t(hd) * 4);
        std::memcpy(&d.v[size_t(r0 + i) * kvd + size_t(g) * hd], r.v + size_t(i) * r.ld,
                    size_t(hd) * 4);
      }
    }
  return d;
}

// max |a - b| / max |b|: the relative error of a whole attention output.
double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(double(a[i]) - b[i]));
    den = std::max(den, std::fabs(double(b[i])));
  }
  return den > 0 ? num / den : num;
}

float fp16_round(float x) {
  return f16_to_f32(f32_to_f16(x));
}

std::vector<float> rotated(const std::vector<float>& k, int n, int n_heads, int pos0,
                           const RopeTable& rope) {
  auto r = k;
  rope.apply(r.data(), n, n_heads, pos0);
  return r;
}

// ---------------------------------------------------------------------------------------------
// a) attention over packed rows == attention over the explicitly dequantized rows.

using AttnParam = std::tuple<Kind, std::pair<int, int>, int>;  // kind, (heads, kv heads), hd

class KvStoreAttention : public ::testing::TestWithParam<AttnParam> {};

TEST_P(KvStoreAttention, PackedMatchesDequantized) {
  const auto [kind, heads_pair, hd] = GetParam();
  const auto [heads, kv_heads] = heads_pair;
  const KvGeometry geo{2, kv_heads, hd};
  const int kvd = geo.kv_dim(), n_fresh = 16, nq = 7, layer = 1;
  RopeTable rope(hd, kTheta);
  uint32_t seed = 1000 * uint32_t(kind) + 10 * hd + heads;
  for (int n_cached : {1, 31, 33, 100, 257}) {
    SCOPED_TRACE(testing::Message() << "cached rows " << n_cached);
    const int n = n_cached + n_fresh;  // canvas length
    rope.reserve(n);
    const Canvas cv = make_canvas(geo, n, ++seed);
    auto store = make_store(kind, geo, rope, cv.k, n);
    store->reset(n);
    for (int l = 0; l < geo.n_layers; ++l) store->write(l, 0, n, cv.k[l].data(), cv.v[l].data());

    // The dequantized copy, read once; a read must not depend on where its tile starts.
    const DenseRows deq = read_rows(*store, geo, layer, 0, n, store->max_tile());
    const DenseRows one = read_rows(*store, geo, layer, 0, n, 1);
    ASSERT_EQ(std::memcmp(deq.k.data(), one.k.data(), deq.k.size() * 4), 0);
    ASSERT_EQ(std::memcmp(deq.v.data(), one.v.data(), deq.v.size() * 4), 0);

    const auto q = randn(size_t(nq) * heads * hd, ++seed);
    for (bool dual : {false, true}) {
      SCOPED_TRACE(dual ? "dual cache" : "prefix cache");
      // Prefix: cached [0, s), fresh [s, n). Dual: cached [0, s) and [e, n), fresh [s, e).
      const int s = dual ? n_cached / 3 : n_cached, e = s + n_fresh;
      const auto fk = rotated(random_keys(n_fresh, geo, ++seed), n_fresh, kv_heads, s, rope);
      const auto fv = randn(size_t(n_fresh) * kvd, ++seed);
      FreshKvRows fresh(fk.data(), fv.data(), n_fresh, kvd, hd);
      StoredKvRows st_a(*store, layer, {0, s}), st_b(*store, layer, {e, n});
      FreshKvRows dq_a(deq.k.data(), deq.v.data(), s, kvd, hd);
      FreshKvRows dq_b(deq.k.data() + size_t(e) * kvd, deq.v.data() + size_t(e) * kvd, n - e, kvd,
                       hd);
      std::vector<const KvRowSource*> packed = {&st_a, &fresh}, dense = {&dq_a, &fresh};
      if (dual) {
        packed = {&st_a, &st_b, &fresh};
        dense = {&dq_a, &dq_b, &fresh};
      }
      std::vector<float> o_packed(size_t(nq) * heads * hd), o_dense(o_packed.size()),
          o_ref(o_packed.size());
      attention(q.data(), nq, heads, kv_heads, hd, packed, o_packed.data());
      attention(q.data(), nq, heads, kv_heads, hd, dense, o_dense.data());
      attention_ref(q.data(), nq, heads, kv_heads, hd, packed, o_ref.data());
      EXPECT_LE(rel_err(o_packed, o_dense), 1e-5);
      EXPECT_LE(rel_err(o_packed, o_ref), 1e-4);
      EXPECT_LE(rel_err(o_dense, o_ref), 1e-4);
    }
  }
}

std::string attn_name(const testing::TestParamInfo<AttnParam>& info) {
  const auto& [kind, hp, hd] = info.param;
  return std::string(kind_label(kind)) + "_h" + std::to_string(hp.first) + "kv" +
         std::to_string(hp.second) + "_hd" + std::to_string(hd);
}

INSTANTIATE_TEST_SUITE_P(AllStores, KvStoreAttention,
                         testing::Combine(testing::Values(Kind::kF32, Kind::kF16, Kind::kBF16,
                                                          Kind::kKivi2, Kind::kKivi4,
                                                          Kind::kDllmKvq2, Kind::kKvQuant2,
                                                          Kind::kKvQuant4),
                                          testing::Values(std::pair{4, 4}, std::pair{8, 2}),
                                          testing::Values(32, 64, 128)),
                         attn_name);

// ---------------------------------------------------------------------------------------------
// b) KIVI / dLLM-KVQ round trip through the store.

struct KiviCase {
  int bits, group, hd;
  bool dllm_kvq;
};

class KvStoreKiviRoundTrip : public ::testing::TestWithParam<KiviCase> {};

// Every row of the write [p0, p1): K of complete groups within scale / 2 of the rotated input
// per channel (fp16 channels: the fp16-rounded value), K of partial groups exact, V within
// scale / 2 of the input per (row, channel group).
TEST_P(KvStoreKiviRoundTrip, StoredRowsWithinHalfAStep) {
  const KiviCase c = GetParam();
  const KvGeometry geo{1, 2, c.hd};
  const int kvd = geo.kv_dim(), hd = c.hd, G = c.group, gv = std::min(G, hd);
  const KiviConfig cfg =
      c.dllm_kvq ? kvq_config(geo, c.bits, G) : KiviConfig{c.bits, c.bits, G, {}};
  const double levels = (1 << c.bits) - 1;
  RopeTable rope(hd, kTheta);
  const int cap = 3 * G + 4;  // three whole groups and a trailing partial one
  rope.reserve(cap);
  // Whole canvas (trailing partial group) and an offset write partial at both ends.
  for (auto [p0, p1] : {std::pair{0, cap}, std::pair{5, 2 * G + 11}}) {
    SCOPED_TRACE(testing::Message() << "write [" << p0 << ", " << p1 << ")");
    KiviKvStore store(geo, cfg, rope);
    store.reset(cap);
    const int n = p1 - p0;
    const auto k = random_keys(n, geo, 7 + p0);
    const auto v = randn(size_t(n) * kvd, 8 + p0);
    store.write(0, p0, n, k.data(), v.data());
    const auto rot = rotated(k, n, geo.n_kv_heads, p0, rope);
    const DenseRows got = read_rows(store, geo, 0, p0, n, 1);
    int n_exact = 0, n_quant = 0;
    for (int g = 0; g < geo.n_kv_heads; ++g) {
      std::vector<uint8_t> is_hp(hd, 0);
      if (c.dllm_kvq)
        for (int ch : cfg.fp16_channels[0][g]) is_hp[ch] = 1;
      for (int p = p0; p < p1; ++p) {
        const int gs = p / G * G;
        const bool complete = gs >= p0 && gs + G <= p1;
        const size_t row = size_t(p - p0) * kvd + size_t(g) * hd;
        for (int ch = 0; ch < hd; ++ch) {
          const float x = rot[row + ch], y = got.k[row + ch];
          if (!complete) {
            ASSERT_EQ(y, x) << "partial-group K, head " << g << " pos " << p << " ch " << ch;
            ++n_exact;
          } else if (is_hp[ch]) {
            ASSERT_EQ(y, fp16_round(x))
                << "fp16 channel, head " << g << " pos " << p << " ch " << ch;
          } else {
            const UniformParams up =
                uniform_params(&rot[size_t(gs - p0) * kvd + size_t(g) * hd + ch], G, kvd, c.bits);
            const double sc = f16_to_f32(up.scale), ze = f16_to_f32(up.zero);
            const double slack = 1e-6 * (std::fabs(ze) + levels * sc);
            ASSERT_LE(std::fabs(double(y) - x), sc / 2 + slack)
                << "K head " << g << " pos " << p << " ch " << ch << " scale " << sc;
            ++n_quant;
          }
        }
        for (int j = 0; j < hd / gv; ++j) {
          const UniformParams up = uniform_params(&v[row + size_t(j) * gv], gv, 1, c.bits);
          const double sc = f16_to_f32(up.scale), ze = f16_to_f32(up.zero);
          const double slack = 1e-6 * (std::fabs(ze) + levels * sc);
          for (int ch = j * gv; ch < (j + 1) * gv; ++ch)
            ASSERT_LE(std::fabs(double(got.v[row + ch]) - v[row + ch]), sc / 2 + slack)
                << "V head " << g << " pos " << p << " ch " << ch << " scale " << sc;
        }
      }
    }
    EXPECT_GT(n_exact, 0);  // both kinds of rows were seen
    EXPECT_GT(n_quant, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, KvStoreKiviRoundTrip,
                         testing::Values(KiviCase{2, 32, 128, false}, KiviCase{4, 32, 64, false},
                                         KiviCase{3, 32, 32, false}, KiviCase{8, 16, 64, false},
                                         KiviCase{2, 64, 32, false}, KiviCase{2, 32, 128, true},
                                         KiviCase{4, 32, 64, true}),
                         [](const testing::TestParamInfo<KiviCase>& i) {
                           return std::string(i.param.dllm_kvq ? "dllmkvq" : "kivi") + "_b" +
                                  std::to_string(i.param.bits) + "_g" +
                                  std::to_string(i.param.group) + "_hd" +
                                  std::to_string(i.param.hd);
                         });

// ---------------------------------------------------------------------------------------------
// c) A rewrite of [e0, e1) leaves every other row (and every other layer) bit-identical.

using RewriteParam = std::tuple<Kind, std::pair<int, int>>;

std::string rewrite_name(const testing::TestParamInfo<RewriteParam>& info) {
  const auto& [kind, r] = info.param;
  return std::string(kind_label(kind)) + "_" + std::to_string(r.first) + "_" +
         std::to_string(r.second);
}

class KvStoreRewrite : public ::testing::TestWithParam<RewriteParam> {};

TEST_P(KvStoreRewrite, OtherRowsBitIdentical) {
  const auto [kind, range] = GetParam();
  const auto [e0, e1] = range;
  const KvGeometry geo{2, 2, 64};
  const int kvd = geo.kv_dim(), n = 100;
  RopeTable rope(geo.head_dim, kTheta);
  rope.reserve(n);
  const Canvas a = make_canvas(geo, n, 21);
  auto store = make_store(kind, geo, rope, a.k, n, /*sink=*/4);
  store->reset(n);
  for (int l = 0; l < geo.n_layers; ++l) store->write(l, 0, n, a.k[l].data(), a.v[l].data());
  const DenseRows before0 = read_rows(*store, geo, 0, 0, n, 1);
  const DenseRows before1 = read_rows(*store, geo, 1, 0, n, 1);

  // Larger values than the first write: more KVQuant outliers, so the sparse rows shift.
  const int m = e1 - e0;
  auto bk = random_keys(m, geo, 22);
  for (auto& x : bk) x *= 3.0f;
  const auto bv = randn(size_t(m) * kvd, 23, 3.0f);
  store->write(1, e0, m, bk.data(), bv.data());
  const DenseRows after0 = read_rows(*store, geo, 0, 0, n, 1);
  const DenseRows after1 = read_rows(*store, geo, 1, 0, n, 1);

  EXPECT_EQ(std::memcmp(before0.k.data(), after0.k.data(), before0.k.size() * 4), 0);
  EXPECT_EQ(std::memcmp(before0.v.data(), after0.v.data(), before0.v.size() * 4), 0);
  for (int p = 0; p < n; ++p) {
    const size_t off = size_t(p) * kvd;
    const bool same_k = std::memcmp(&before1.k[off], &after1.k[off], size_t(kvd) * 4) == 0;
    const bool same_v = std::memcmp(&before1.v[off], &after1.v[off], size_t(kvd) * 4) == 0;
    if (p < e0 || p >= e1) {
      EXPECT_TRUE(same_k && same_v) << "row " << p << " outside the rewrite changed";
    } else {
      EXPECT_FALSE(same_k || same_v) << "row " << p << " inside the rewrite did not change";
    }
  }
  // The rewritten rows hold the new data (fp32 exactly; others within their codec's error of
  // rows three times larger than the old ones).
  const auto brot = rotated(bk, m, geo.n_kv_heads, e0, rope);
  std::vector<float> gk(after1.k.begin() + size_t(e0) * kvd, after1.k.begin() + size_t(e1) * kvd);
  std::vector<float> gv(after1.v.begin() + size_t(e0) * kvd, after1.v.begin() + size_t(e1) * kvd);
  if (kind == Kind::kF32) {
    EXPECT_EQ(gk, brot);
    EXPECT_EQ(gv, bv);
  } else {
    EXPECT_LT(rel_err(gk, brot), 0.5);
    EXPECT_LT(rel_err(gv, bv), 0.5);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Stores, KvStoreRewrite,
    testing::Combine(testing::Values(Kind::kF32, Kind::kF16, Kind::kBF16, Kind::kKivi2,
                                     Kind::kKivi4, Kind::kDllmKvq2, Kind::kKvQuant2,
                                     Kind::kKvQuant4),
                     // G-aligned, unaligned at both ends, inside the sink, the trailing partial
                     // group
                     testing::Values(std::pair{32, 64}, std::pair{40, 77}, std::pair{0, 3},
                                     std::pair{2, 33}, std::pair{90, 100})),
    rewrite_name);

// ---------------------------------------------------------------------------------------------
// d) Non-finite K or V is an error naming the layer and position; nothing is stored.

class KvStoreNonFinite : public ::testing::TestWithParam<Kind> {};

TEST_P(KvStoreNonFinite, ThrowsNamingLayerAndPosition) {
  const Kind kind = GetParam();
  const KvGeometry geo{3, 2, 32};
  const int kvd = geo.kv_dim(), n = 8, p0 = 10;
  RopeTable rope(geo.head_dim, kTheta);
  rope.reserve(64);
  const Canvas cv = make_canvas(geo, 64, 31);
  auto store = make_store(kind, geo, rope, cv.k, 64);
  store->reset(64);
  store->write(0, 0, 64, cv.k[0].data(), cv.v[0].data());
  const KvBytes held = store->held();
  struct Bad {
    bool in_k;
    int row, ch;
    float value;
    const char* what;
  };
  for (const Bad b : {Bad{true, 3, 32 + 5, NAN, "nan"}, Bad{false, 6, 0, INFINITY, "inf"},
                      Bad{true, 0, 31, -INFINITY, "inf"}, Bad{false, 7, 63, NAN, "nan"}}) {
    auto k = random_keys(n, geo, 32);
    auto v = randn(size_t(n) * kvd, 33);
    (b.in_k ? k : v)[size_t(b.row) * kvd + b.ch] = b.value;
    std::string msg;
    try {
      store->write(2, p0, n, k.data(), v.data());
    } catch (const Error& e) {
      msg = e.what();
    }
    SCOPED_TRACE(msg);
    ASSERT_FALSE(msg.empty()) << "no dllmq::Error for " << b.what << " in " << (b.in_k ? "K" : "V");
    EXPECT_NE(msg.find("layer 2"), std::string::npos);
    EXPECT_NE(msg.find("position " + std::to_string(p0 + b.row)), std::string::npos);
    EXPECT_NE(msg.find(b.what), std::string::npos);
    EXPECT_EQ(msg.rfind(b.in_k ? "K" : "V", 0), 0u);
    EXPECT_EQ(store->held().k, held.k);
    EXPECT_EQ(store->held().v, held.v);
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, KvStoreNonFinite,
                         testing::Values(Kind::kF32, Kind::kF16, Kind::kBF16, Kind::kKivi2,
                                         Kind::kDllmKvq2, Kind::kKvQuant2),
                         [](const testing::TestParamInfo<Kind>& i) { return kind_label(i.param); });

// ---------------------------------------------------------------------------------------------
// e) Memory accounting at LLaDA-8B geometry (one layer; the ratios do not depend on the depth).

class KvStoreMemory : public ::testing::Test {
 protected:
  static constexpr int kRows = 1024;
  const KvGeometry geo{1, 32, 128};
  RopeTable rope{128, kTheta};
  std::vector<std::vector<float>> k, v;

  void SetUp() override {
    rope.reserve(kRows);
    // Made once per process: the three tests write the same rows.
    static const std::vector<float> k0 = randn(size_t(kRows) * geo.kv_dim(), 41);
    static const std::vector<float> v0 = randn(size_t(kRows) * geo.kv_dim(), 42);
    k = {k0};
    v = {v0};
  }
  void fill(KvStore& s) {
    s.reset(kRows);
    s.write(0, 0, kRows, k[0].data(), v[0].data());
  }
};

TEST_F(KvStoreMemory, KiviExactBitsAndRatio) {
  const size_t elems = size_t(kRows) * geo.kv_dim();
  for (int bits : {2, 4}) {
    for (int group : {32, 128}) {
      KiviKvStore s(geo, KiviConfig{bits, bits, group, {}}, rope);
      fill(s);
      SCOPED_TRACE(s.name());
      const int gv = std::min(group, geo.head_dim);
      // K: b bits per code + an fp16 scale and zero per (channel, group of G rows).
      // V: b bits per code + an fp16 scale and zero per (row, group of min(G, hd) channels).
      EXPECT_EQ(s.held().k * 8, elems * bits + elems * 32 / group);
      EXPECT_EQ(s.held().v * 8, elems * bits + elems * 32 / gv);
      EXPECT_EQ(s.bytes_fp16(), elems * 2 * 2);
      if (group == 32) {
        EXPECT_LE(double(s.held().total()), (bits == 2 ? 0.20 : 0.33) * double(s.bytes_fp16()));
      }
    }
  }
}

TEST_F(KvStoreMemory, KvQuantTwoBitRatio) {
  const CalibArtifact a = make_artifact(geo, 2, k, kRows, /*sink=*/1, /*outlier_percent=*/1.0);
  KvQuantKvStore s(geo, a, rope);
  fill(s);
  const double ratio = double(s.held().total()) / double(s.bytes_fp16());
  RecordProperty("ratio", std::to_string(ratio));
  EXPECT_EQ(s.bytes_fp16(), size_t(kRows) * geo.kv_dim() * 4);
  EXPECT_LE(ratio, 0.22);
  // Not less than the codes alone: outliers and per-token parameters are counted.
  EXPECT_GT(double(s.held().total()), 2.0 / 16 * double(s.bytes_fp16()));
}

TEST_F(KvStoreMemory, DenseCountsItsDtype) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    DenseKvStore s(geo, t, rope);
    fill(s);
    EXPECT_EQ(s.held().total(), s.bytes_fp16() / 2 * dtype_size(t));
  }
}

// ---------------------------------------------------------------------------------------------
// f) KVQuant sink rows and outliers come back at fp16.

// Undoes the NeoX rotation of one head's row at position p (angles as RopeTable computes them).
std::vector<double> unrotate(const float* x, int hd, int p) {
  const int half = hd / 2;
  std::vector<double> y(hd);
  for (int i = 0; i < half; ++i) {
    const float inv = 1.0f / static_cast<float>(std::pow(kTheta, double(2 * i) / hd));
    const double ang = double(p) * double(inv);
    const double c = static_cast<float>(std::cos(ang)), s = static_cast<float>(std::sin(ang));
    y[i] = x[i] * c + x[i + half] * s;
    y[i + half] = x[i + half] * c - x[i] * s;
  }
  return y;
}

TEST(KvStoreKvQuant, SinkRowsAreFp16) {
  const KvGeometry geo{2, 2, 64};
  const int kvd = geo.kv_dim(), n = 40, sink = 4, hd = geo.head_dim;
  RopeTable rope(hd, kTheta);
  rope.reserve(n);
  const Canvas cv = make_canvas(geo, n, 51);
  KvQuantKvStore s(geo, make_artifact(geo, 2, cv.k, n, sink), rope);
  s.reset(n);
  for (int l = 0; l < geo.n_layers; ++l) {
    // Split so a sink row (3) is written by a call that does not start at 0.
    s.write(l, 0, 3, cv.k[l].data(), cv.v[l].data());
    s.write(l, 3, n - 3, cv.k[l].data() + size_t(3) * kvd, cv.v[l].data() + size_t(3) * kvd);
  }
  for (int l = 0; l < geo.n_layers; ++l) {
    const DenseRows got = read_rows(s, geo, l, 0, n, s.max_tile());
    std::vector<float> k16(size_t(sink) * kvd);
    for (size_t i = 0; i < k16.size(); ++i) k16[i] = fp16_round(cv.k[l][i]);
    for (int p = 0; p < sink; ++p) {
      std::vector<float> row(k16.begin() + size_t(p) * kvd, k16.begin() + size_t(p + 1) * kvd);
      rope.apply(row.data(), 1, geo.n_kv_heads, p);
      for (int c = 0; c < kvd; ++c) {
        ASSERT_EQ(got.k[size_t(p) * kvd + c], row[c]) << "layer " << l << " pos " << p;
        ASSERT_EQ(got.v[size_t(p) * kvd + c], fp16_round(cv.v[l][size_t(p) * kvd + c]));
      }
    }
    // Past the sink the rows are quantized (2 bits: far from exact).
    int inexact = 0;
    for (int c = 0; c < kvd; ++c)
      inexact += got.v[size_t(sink) * kvd + c] != cv.v[l][size_t(sink) * kvd + c];
    EXPECT_GT(inexact, kvd / 2);
  }
}

TEST(KvStoreKvQuant, OutliersAreFp16) {
  const KvGeometry geo{1, 2, 32};
  const int kvd = geo.kv_dim(), n = 48, hd = geo.head_dim;
  RopeTable rope(hd, kTheta);
  rope.reserve(n);
  const Canvas calib = make_canvas(geo, 256, 61);
  // Thresholds from calibration data; the written rows get planted K outliers both ways.
  const CalibArtifact art = make_artifact(geo, 2, calib.k, 256, /*sink=*/0);
  auto k = random_keys(n, geo, 62);
  const auto v = randn(size_t(n) * kvd, 63);
  std::vector<std::pair<int, int>> planted;  // (pos, channel)
  for (int p = 0; p < n; ++p)
    for (int c = p % 7; c < kvd; c += 9) {
      const float lo = art.layers[0].k_lower[c], up = art.layers[0].k_upper[c];
      k[size_t(p) * kvd + c] = (p + c) % 2 ? up + 1.7f + 0.01f * c : lo - 2.3f - 0.01f * p;
      planted.push_back({p, c});
    }
  KvQuantKvStore s(geo, art, rope);
  s.reset(n);
  s.write(0, 0, n, k.data(), v.data());
  const DenseRows got = read_rows(s, geo, 0, 0, n, s.max_tile());
  const auto& L = art.layers[0];

  // Position 0 (no sink here) has the identity rotation: the stored pre-RoPE values are read
  // back as they are, outliers exactly at fp16 and inliers on the scaled codebook.
  const auto cb = L.k_codebook;
  double max_gap = 0;
  for (size_t i = 0; i + 1 < cb.size(); ++i) max_gap = std::max(max_gap, double(cb[i + 1] - cb[i]));
  for (int c = 0; c < kvd; ++c) {
    const float x = k[c], y = got.k[c];
    if (x < L.k_lower[c] || x > L.k_upper[c]) {
      EXPECT_EQ(y, fp16_round(x)) << "outlier channel " << c;
    } else {
      const double range = (double(L.k_upper[c]) - L.k_lower[c]) / 2;
      EXPECT_LE(std::fabs(double(y) - x), max_gap / 2 * range * (1 + 1e-5) + 1e-6)
          << "inlier channel " << c;
    }
  }
  // V at position 0: the row's min and max are outside its own 0.5 / 99.5 percentiles.
  for (int g = 0; g < geo.n_kv_heads; ++g) {
    const float* x = v.data() + size_t(g) * hd;
    const int imin = int(std::min_element(x, x + hd) - x),
              imax = int(std::max_element(x, x + hd) - x);
    EXPECT_EQ(got.v[size_t(g) * hd + imin], fp16_round(x[imin]));
    EXPECT_EQ(got.v[size_t(g) * hd + imax], fp16_round(x[imax]));
  }
  // Other positions: undo RoPE and compare the planted outliers with their fp16 values.
  for (auto [p, c] : planted) {
    if (p == 0) continue;
    const int g = c / hd, ch = c % hd;
    const auto pre = unrotate(&got.k[size_t(p) * kvd + size_t(g) * hd], hd, p);
    const float want = fp16_round(k[size_t(p) * kvd + c]);
    EXPECT_NEAR(pre[ch], want, 1e-5 * 8) << "pos " << p << " channel " << c;
    // A quantized value would sit inside the thresholds, far from the planted one.
    EXPECT_TRUE(pre[ch] < L.k_lower[c] - 1.0 || pre[ch] > L.k_upper[c] + 1.0);
  }
}

}  // namespace
}  // namespace dllmq

namespace dllmq {
namespace {

// The store named in a run's header (eval's config.json, generate --json) says what runs: a
// dLLM-KVQ artifact brings its own bits and KIVI group, so no flag default may be printed for
// them (the header once said "k2 v2 g32" for a 4-bit artifact run).
TEST(DescribeKv, NamesOnlyWhatTheFlagsDecide) {
  KvSpec s;
  s.method = "kivi";
  EXPECT_EQ(describe_kv(s), "kivi k2 v2 g32");
  s.method = "dllm-kvq";
  s.calib = "a.safetensors";
  EXPECT_EQ(describe_kv(s), "dllm-kvq calib a.safetensors");
  s.bits_k = s.bits_v = 4;
  EXPECT_EQ(describe_kv(s), "dllm-kvq k4 v4 calib a.safetensors");
  s = KvSpec{};
  s.method = "dllm-kvq";
  s.channels = "0:0:1";
  EXPECT_EQ(describe_kv(s), "dllm-kvq k2 v2 g32");
  s = KvSpec{};
  s.method = "kvquant";
  s.calib = "q.safetensors";
  EXPECT_EQ(describe_kv(s), "kvquant calib q.safetensors");
}

}  // namespace
}  // namespace dllmq
