// Attention in bf16 compute on AMX tiles (ops/attention_amx.h) against an independent reference
// in double: q, K and V rounded to bf16 as the tile unit reads them, the scores and the softmax
// exact. The kernel also rounds the probabilities to bf16 (half an ulp: 2^-9 of each term) and
// sums its products in f32, so each output t is held to
//   |out - ref| <= (2^-8 + 2 ds + 2^-20) * sum_k p_k |v_kt| / sum_k p_k,
// ds the largest error of a score (the tile unit's bound of ops/amx_gemm.h over the hd products,
// times the scale). Shapes cover every tail: head dims 16-128 (16 but not 32 a divisor), query
// counts around the 16-row tile and the 128-row chunk, key counts around 16 and 32, several
// sources and tiles, grouped-query heads. Then the bits: a query row's output does not depend on
// the rows beside it or the thread count (a stacked request keeps its own bits). Skipped where
// AMX is not available; there attention(bf16) must equal the f32 path bit for bit.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cache/dense_kv_store.h"
#include "cache/kv_store.h"
#include "linear_rows_check.h"
#include "ops/amx_gemm.h"
#include "ops/amx_kernel.h"
#include "ops/attention.h"
#include "ops/attention_amx.h"
#include "ops/gemm.h"
#include "ops/rope.h"
#include "test_helpers.h"
#include "util/half.h"

namespace dllmq {
namespace {

// bf16 as the kernels round their operands (a denormal to zero, then nearest even) and the tile
// unit reads them (a denormal to zero); as a double.
double bf(float x) {
  return test_util::tile_value(test_util::act_bf16(x));
}

using test_util::randn;

struct Shape {
  int nq, heads, kv_heads, hd;
  std::vector<int> rows;  // keys per source
  int tile;               // the sources' largest tile
};

// One case: attention(bf16) on AMX against the double reference, within the bound above.
void check_against_reference(const Shape& s, unsigned seed, double* worst) {
  const int kvd = s.kv_heads * s.hd, ld = s.heads * s.hd, rep = s.heads / s.kv_heads;
  // Scores of a few units: a peaked softmax, with some rows flat (q = 0 on one head).
  auto q = randn(size_t(s.nq) * ld, seed, 1.5f / std::sqrt(std::sqrt(float(s.hd))));
  for (int i = 0; i < s.nq; i += 7) std::fill_n(q.data() + size_t(i) * ld, s.hd, 0.0f);
  std::vector<std::vector<float>> k, v;
  std::vector<FreshKvRows> src;
  for (size_t i = 0; i < s.rows.size(); ++i) {
    k.push_back(randn(size_t(s.rows[i]) * kvd, seed + 10 + unsigned(i), 1.0f));
    v.push_back(randn(size_t(s.rows[i]) * kvd, seed + 20 + unsigned(i), 1.0f));
  }
  for (size_t i = 0; i < s.rows.size(); ++i)
    src.emplace_back(k[i].data(), v[i].data(), s.rows[i], kvd, s.hd, s.tile);
  std::vector<const KvRowSource*> ptrs;
  for (const auto& x : src) ptrs.push_back(&x);
  std::vector<float> out(size_t(s.nq) * ld, -5.0f);
  attention(q.data(), s.nq, s.heads, s.kv_heads, s.hd, ptrs, out.data(), true);

  const double scale = 1.0 / std::sqrt(double(s.hd));
  const double score_blocks = (s.hd + 31) / 32;
  for (int h = 0; h < s.heads; ++h) {
    const int g = h / rep;
    for (int i = 0; i < s.nq; ++i) {
      const float* qi = q.data() + size_t(i) * ld + size_t(h) * s.hd;
      std::vector<double> sc;
      std::vector<const float*> vrow;
      double ds = 0.0;
      for (size_t si = 0; si < s.rows.size(); ++si)
        for (int r = 0; r < s.rows[si]; ++r) {
          const float* kr = k[si].data() + size_t(r) * kvd + size_t(g) * s.hd;
          double dot = 0.0, mag = 0.0;
          for (int t = 0; t < s.hd; ++t) {
            dot += bf(qi[t]) * bf(kr[t]);
            mag += std::fabs(bf(qi[t]) * bf(kr[t]));
          }
          sc.push_back(dot * scale);
          ds =
              std::max(ds, scale * kAmxErrorUlps * (score_blocks + 5) * std::ldexp(1.0, -24) * mag);
          vrow.push_back(v[si].data() + size_t(r) * kvd + size_t(g) * s.hd);
        }
      const double m = *std::max_element(sc.begin(), sc.end());
      double l = 0.0;
      for (double& x : sc) l += (x = std::exp(x - m));
      for (int t = 0; t < s.hd; ++t) {
        double ref = 0.0, mag = 0.0;
        for (size_t kk = 0; kk < sc.size(); ++kk) {
          ref += sc[kk] * bf(vrow[kk][t]);
          mag += sc[kk] * std::fabs(bf(vrow[kk][t]));
        }
        ref /= l;
        mag /= l;
        const double bound = (std::ldexp(1.0, -8) + 2.0 * ds + std::ldexp(1.0, -20)) * mag;
        const double got = out[size_t(i) * ld + size_t(h) * s.hd + t];
        const double err = std::fabs(got - ref);
        ASSERT_LE(err, bound) << "nq " << s.nq << " heads " << s.heads << "/" << s.kv_heads
                              << " hd " << s.hd << " tile " << s.tile << ": head " << h << " row "
                              << i << " dim " << t << ": " << got << " vs " << ref;
        if (mag > 0) *worst = std::max(*worst, err / bound);
      }
    }
  }
}

TEST(AttentionAmx, WithinTheStatedBoundOfTheExactAttentionOnEveryTail) {
  if (!amx_available()) GTEST_SKIP() << "no AMX-BF16 here (or DLLMQ_ISA turns it off)";
  const test_util::Bf16PathGuard restore;
  ASSERT_TRUE(gemm_set_bf16_amx(true));
  ASSERT_TRUE(attention_amx_enabled());
  const std::vector<Shape> shapes = {
      {1, 2, 2, 16, {5}, 512},           // one query, fewer keys than a tile column
      {15, 4, 2, 32, {16, 17}, 512},     // grouped heads, keys around 16
      {16, 2, 1, 48, {31, 33}, 512},     // hd 48: a half-empty k block, 3 output tiles
      {17, 2, 2, 64, {32, 1, 70}, 512},  // three sources, one of one key
      {33, 2, 2, 128, {100, 60}, 32},    // many 32-key tiles per source
      {130, 2, 2, 32, {200}, 128},       // two query chunks (128 + 2), a 72-key last tile
      {40, 8, 8, 128, {224, 32}, 128},   // the benchmark models' dual-cache step
      {64, 3, 1, 80, {45, 19}, 40},      // hd 80 (not a multiple of 32), ragged tiles
  };
  double worst = 0.0;
  unsigned seed = 1;
  for (const Shape& s : shapes) check_against_reference(s, seed += 31, &worst);
  RecordProperty("worst_error_share_of_bound", std::to_string(worst));
  std::printf("worst error: %.3f of the bound\n", worst);
}

// The tile path's f32 exponentials: within 2 ulp of exp down to -126 ln 2 (below, at most the
// smallest normal away: they give 0), the sum within n ulps of the exact sum.
TEST(AttentionAmx, TheF32ExponentialsAreWithinTwoUlp) {
  if (!amx_available()) GTEST_SKIP() << "no AMX-BF16 here (or DLLMQ_ISA turns it off)";
  std::vector<float> x;
  for (int i = 0; i <= 200000; ++i) x.push_back(-100.0f * float(i) / 200000.0f);
  for (float v : {0.0f, -0.0f, -1e-30f, -87.33f, -87.34f, -103.0f, -1e30f}) x.push_back(v);
  const float m = 0.75f;  // the row max the terms are taken against
  for (size_t n : {x.size(), size_t(1), size_t(15), size_t(17)}) {
    std::vector<float> s(n);
    for (size_t i = 0; i < n; ++i) s[i] = x[i] + m;
    std::vector<float> e = s;
    const double sum = kern::amx_exp_sub_f32(e.data(), int(n), m);
    double exact = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const double want = std::exp(double(s[i] - m));  // the difference taken in f32, as the kernel
      exact += want;
      const double tol = std::max(2.0 * std::ldexp(1.0, -23) * want, std::ldexp(1.0, -126));
      ASSERT_LE(std::fabs(double(e[i]) - want), tol) << "x " << s[i] - m;
    }
    EXPECT_LE(std::fabs(sum - exact), double(n) * std::ldexp(1.0, -22) * exact) << n;
  }
}

// A query row's output does not depend on the rows beside it (each alone gives the same bits as
// within all of them) nor on the thread count.
TEST(AttentionAmx, RowsKeepTheirBitsAloneAndOnAnyThreadCount) {
  if (!amx_available()) GTEST_SKIP() << "no AMX-BF16 here (or DLLMQ_ISA turns it off)";
  const test_util::Bf16PathGuard restore;
  ASSERT_TRUE(gemm_set_bf16_amx(true));
  const int nq = 150, heads = 4, kv_heads = 2, hd = 64, kvd = kv_heads * hd, ld = heads * hd;
  const int na = 90, nb = 40;
  const auto q = randn(size_t(nq) * ld, 3, 0.5f);
  const auto ka = randn(size_t(na) * kvd, 4, 1.0f), va = randn(size_t(na) * kvd, 5, 1.0f);
  const auto kb = randn(size_t(nb) * kvd, 6, 1.0f), vb = randn(size_t(nb) * kvd, 7, 1.0f);
  const FreshKvRows a(ka.data(), va.data(), na, kvd, hd, 64), b(kb.data(), vb.data(), nb, kvd, hd);
  const KvRowSource* srcs[] = {&a, &b};
  std::vector<float> all(size_t(nq) * ld), one(ld);
  attention(q.data(), nq, heads, kv_heads, hd, srcs, all.data(), true);
  for (int i = 0; i < nq; ++i) {
    attention(q.data() + size_t(i) * ld, 1, heads, kv_heads, hd, srcs, one.data(), true);
    ASSERT_EQ(std::memcmp(one.data(), all.data() + size_t(i) * ld, ld * sizeof(float)), 0)
        << "row " << i;
  }
  const int threads = omp_get_max_threads();
  for (int t : {1, 3}) {
    omp_set_num_threads(t);
    std::vector<float> again(all.size());
    attention(q.data(), nq, heads, kv_heads, hd, srcs, again.data(), true);
    EXPECT_EQ(std::memcmp(again.data(), all.data(), all.size() * sizeof(float)), 0)
        << t << " threads";
  }
  omp_set_num_threads(threads);
}

// A bf16 store's rows go onto the tiles as they are (rows_bf16) instead of widened and rounded
// again: the same values, so the same bits as the same rows handed out as f32, tile for tile.
TEST(AttentionAmx, ABf16StoresRowsGoInAsTheyAreWithTheSameBits) {
  if (!amx_available()) GTEST_SKIP() << "no AMX-BF16 here (or DLLMQ_ISA turns it off)";
  const test_util::Bf16PathGuard restore;
  ASSERT_TRUE(gemm_set_bf16_amx(true));
  const int nq = 40, heads = 4, kv_heads = 2, hd = 48, kvd = kv_heads * hd, ld = heads * hd;
  const int n = 300;  // three of the store's 128-row tiles, the last ragged
  RopeTable rope(hd, 10000.0);
  rope.reserve(n);
  DenseKvStore store(KvGeometry{1, kv_heads, hd}, DType::kBF16, rope);
  store.reset(n);
  auto k = randn(size_t(n) * kvd, 21, 1.0f), v = randn(size_t(n) * kvd, 22, 1.0f);
  k[7] = 1e-39f;  // widens to an f32 subnormal: zero on the tiles either way
  store.write(0, 0, n, k.data(), v.data());
  const StoredKvRows stored(store, 0, {0, n});
  ASSERT_NE(stored.rows_bf16(1, 5, 10).k, nullptr);
  // The store's rows widened to f32 ([n, kvd]), handed out in the store's tiles.
  std::vector<float> kf(size_t(n) * kvd), vf(kf.size()), ks(size_t(n) * hd), vs(ks.size());
  for (int g = 0; g < kv_heads; ++g) {
    const KvRows r = stored.rows(g, 0, n, ks.data(), vs.data());
    for (int i = 0; i < n; ++i)
      for (int t = 0; t < hd; ++t) {
        kf[size_t(i) * kvd + g * hd + t] = r.k[size_t(i) * r.ld + t];
        vf[size_t(i) * kvd + g * hd + t] = r.v[size_t(i) * r.ld + t];
      }
  }
  const FreshKvRows widened(kf.data(), vf.data(), n, kvd, hd, stored.max_tile());
  const auto q = randn(size_t(nq) * ld, 23, 0.5f);
  std::vector<float> a(size_t(nq) * ld), b(a.size());
  const KvRowSource* s1[] = {&stored};
  const KvRowSource* s2[] = {&widened};
  attention(q.data(), nq, heads, kv_heads, hd, s1, a.data(), true);
  attention(q.data(), nq, heads, kv_heads, hd, s2, b.data(), true);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

// Where bf16 products do not run on AMX tiles, attention(bf16) is the f32 path, bit for bit.
TEST(AttentionAmx, OffTheTilesBf16AttentionIsTheF32Path) {
  const test_util::Bf16PathGuard restore;
  if (amx_available()) {
    ASSERT_FALSE(gemm_set_bf16_amx(false));
  }
  ASSERT_FALSE(attention_amx_enabled());
  const int nq = 20, heads = 2, hd = 32, n = 50;
  const auto q = randn(size_t(nq) * heads * hd, 8, 0.5f);
  const auto k = randn(size_t(n) * heads * hd, 9, 1.0f),
             v = randn(size_t(n) * heads * hd, 10, 1.0f);
  const FreshKvRows s(k.data(), v.data(), n, heads * hd, hd);
  const KvRowSource* srcs[] = {&s};
  std::vector<float> f32(size_t(nq) * heads * hd), b16(f32.size());
  attention(q.data(), nq, heads, heads, hd, srcs, f32.data(), false);
  attention(q.data(), nq, heads, heads, hd, srcs, b16.data(), true);
  EXPECT_EQ(std::memcmp(f32.data(), b16.data(), f32.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace dllmq
