#include "calib/kvquant_calibrator.h"

#include <algorithm>
#include <cmath>

#include "calib/fisher.h"
#include "quant/kmeans.h"
#include "quant/outliers.h"
#include "quant/uniform.h"
#include "util/error.h"

namespace dllmq {

KvQuantCalibrator::KvQuantCalibrator(const ModelConfig& cfg, KvQuantCalibOptions opt)
    : kvd_(cfg.kv_dim()), hd_(cfg.head_dim), n_kv_(cfg.n_kv_heads), opt_(opt) {
  if (!valid_quant_bits(opt_.bits_k) || !valid_quant_bits(opt_.bits_v))
    fail("--kv-bits: {} / {}; accepted values are 2, 3, 4 and 8", opt_.bits_k, opt_.bits_v);
  if (!(opt_.outlier_percent >= 0.0 && opt_.outlier_percent < 50.0))
    fail("--outlier-percent {}: accepted range is [0, 50)", opt_.outlier_percent);
  if (opt_.sink < 0) fail("--sink {}: must be >= 0", opt_.sink);
  if (opt_.reservoir_rows < 1 || opt_.reservoir_rows > (1 << 24))
    fail("--reservoir-rows {}: accepted range is 1..16777216", opt_.reservoir_rows);
  layers_.resize(cfg.n_layers);
  for (Layer& L : layers_) L.rng.seed(opt_.seed);
}

void KvQuantCalibrator::on_kv(int layer, int pos0, int n, const float* k_pre, const float* v) {
  check_finite(k_pre, size_t(n) * kvd_, kvd_, layer, pos0, "K");
  check_finite(v, size_t(n) * kvd_, kvd_, layer, pos0, "V");
  if (opt_.fisher && !position_fisher_)
    fail("internal: KVQuant Fisher calibration without weights for the full forward");
  for (int i = 0; i < n; ++i) {
    const int p = pos0 + i;
    add_row(layer, p, k_pre + size_t(i) * kvd_, v + size_t(i) * kvd_,
            position_fisher_ ? position_fisher_->k2(layer, p) : nullptr,
            position_fisher_ ? position_fisher_->v2(layer, p) : nullptr);
  }
}

void KvQuantCalibrator::add_row(int layer, int pos, const float* k_pre, const float* v,
                                const float* k2, const float* v2) {
  if (opt_.fisher != (k2 != nullptr && v2 != nullptr))
    fail("internal: KVQuant calibration row {} with{} Fisher weights", pos, k2 ? "" : "out");
  if (pos < opt_.sink) return;  // the store keeps the sink at fp16
  Layer& L = layers_[layer];
  const size_t R = size_t(opt_.reservoir_rows);
  size_t slot;
  if (size_t(L.seen) < R) {
    slot = size_t(L.seen);
    L.k.resize((slot + 1) * kvd_);
    L.v.resize((slot + 1) * kvd_);
    if (opt_.fisher) {
      L.k2.resize((slot + 1) * kvd_);
      L.v2.resize((slot + 1) * kvd_);
    }
  } else {
    slot = size_t(L.rng() % uint64_t(L.seen + 1));
  }
  ++L.seen;
  if (slot >= R) return;
  std::copy_n(k_pre, kvd_, L.k.begin() + slot * kvd_);
  std::copy_n(v, kvd_, L.v.begin() + slot * kvd_);
  if (opt_.fisher) {
    check_finite(k2, kvd_, kvd_, layer, pos, "K gradient");
    check_finite(v2, kvd_, kvd_, layer, pos, "V gradient");
    std::copy_n(k2, kvd_, L.k2.begin() + slot * kvd_);
    std::copy_n(v2, kvd_, L.v2.begin() + slot * kvd_);
  }
}

namespace {

// Fisher weights scaled to mean 1 (squared gradients can be ~1e-12: k-means sums them in float).
std::vector<float> normalized_weights(std::vector<double>& w, int layer, const char* what) {
  double sum = 0.0;
  for (double x : w) sum += x;
  if (!(sum > 0.0) || !std::isfinite(sum))
    fail("calibrate: layer {} {}: the Fisher weights sum to {} (no gradient reached these values)",
         layer, what, sum);
  const double scale = double(w.size()) / sum;
  std::vector<float> out(w.size());
  for (size_t i = 0; i < w.size(); ++i) out[i] = float(w[i] * scale);
  return out;
}

}  // namespace

CalibArtifact KvQuantCalibrator::finish() const {
  CalibArtifact a;
  a.method = "kvquant";
  a.trajectory = "ar";
  a.fisher = opt_.fisher ? "diffusion" : "none";
  a.bits_k = opt_.bits_k;
  a.bits_v = opt_.bits_v;
  a.outlier_percent = opt_.outlier_percent;
  a.sink = opt_.sink;
  const double q_lo = opt_.outlier_percent / 2.0, q_up = 100.0 - opt_.outlier_percent / 2.0;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& L = layers_[l];
    const size_t rows = L.k.size() / kvd_;
    if (rows == 0)
      fail("calibrate: no rows observed past the sink (every pair is shorter than {} tokens)",
           opt_.sink + 1);
    CalibLayer out;
    out.k_lower.resize(kvd_);
    out.k_upper.resize(kvd_);
    std::vector<float> col(rows), pooled;
    std::vector<double> weight;  // Fisher: g^2 * range^2 of each pooled value
    pooled.reserve(rows * kvd_);
    for (int c = 0; c < kvd_; ++c) {
      for (size_t r = 0; r < rows; ++r) col[r] = L.k[r * kvd_ + c];
      std::vector<float> tmp = col;
      const float lo = percentile_inplace(tmp, q_lo);
      tmp = col;
      const float up = percentile_inplace(tmp, q_up);
      out.k_lower[c] = lo;
      out.k_upper[c] = up;
      const float zp = (up + lo) / 2.0f, rg = (up - lo) / 2.0f;
      for (size_t r = 0; r < rows; ++r) {
        const float x = col[r];
        if (x < lo || x > up) continue;
        pooled.push_back(rg > 0.0f ? (x - zp) / rg : 0.0f);
        if (opt_.fisher) weight.push_back(double(L.k2[r * kvd_ + c]) * rg * rg);
      }
    }
    out.k_codebook = weighted_kmeans_1d(
        pooled, opt_.fisher ? normalized_weights(weight, int(l), "K") : std::vector<float>{},
        1 << opt_.bits_k);
    pooled.clear();
    weight.clear();
    std::vector<float> row(hd_);
    for (size_t r = 0; r < rows; ++r)
      for (int g = 0; g < n_kv_; ++g) {
        const float* x = L.v.data() + r * kvd_ + size_t(g) * hd_;
        row.assign(x, x + hd_);
        const float lo = percentile_inplace(row, q_lo);
        row.assign(x, x + hd_);
        const float up = percentile_inplace(row, q_up);
        float mn = 0, mx = 0;
        bool any = false;
        for (int c = 0; c < hd_; ++c) {
          if (x[c] < lo || x[c] > up) continue;
          mn = any ? std::min(mn, x[c]) : x[c];
          mx = any ? std::max(mx, x[c]) : x[c];
          any = true;
        }
        const float off = (mx + mn) / 2.0f, rg = (mx - mn) / 2.0f;
        for (int c = 0; c < hd_; ++c) {
          if (x[c] < lo || x[c] > up) continue;
          pooled.push_back(rg > 0.0f ? (x[c] - off) / rg : 0.0f);
          if (opt_.fisher) weight.push_back(double(L.v2[r * kvd_ + size_t(g) * hd_ + c]) * rg * rg);
        }
      }
    out.v_codebook = weighted_kmeans_1d(
        pooled, opt_.fisher ? normalized_weights(weight, int(l), "V") : std::vector<float>{},
        1 << opt_.bits_v);
    a.layers.push_back(std::move(out));
  }
  return a;
}

}  // namespace dllmq
