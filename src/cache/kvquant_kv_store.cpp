#include "cache/kvquant_kv_store.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include <fmt/format.h>

#include "cache/fp16_channels.h"
#include "quant/bitpack.h"
#include "quant/kmeans.h"
#include "quant/uniform.h"
#include "util/error.h"
#include "util/half.h"
#include "util/half_rows.h"

namespace dllmq {

void KvQuantKvStore::Csr::replace(int p0, int n, const std::vector<SparseEntry>& rows,
                                  const std::vector<uint32_t>& counts) {
  const uint32_t a = start[p0], b = start[p0 + n];
  std::vector<SparseEntry> out;
  out.reserve(ent.size() - (b - a) + rows.size());
  out.insert(out.end(), ent.begin(), ent.begin() + a);
  out.insert(out.end(), rows.begin(), rows.end());
  out.insert(out.end(), ent.begin() + b, ent.end());
  ent.swap(out);
  uint32_t s = a;
  for (int i = 0; i < n; ++i) {
    start[p0 + i] = s;
    s += counts[i];
  }
  const int64_t delta = int64_t(s) - int64_t(b);
  for (size_t p = size_t(p0) + n; p < start.size(); ++p) start[p] = uint32_t(start[p] + delta);
}

KvQuantKvStore::KvQuantKvStore(KvGeometry geo, const CalibArtifact& a, const RopeTable& rope,
                               Fp16Channels fp16_channels)
    : geo_(geo),
      rope_(rope),
      bits_k_(a.bits_k),
      bits_v_(a.bits_v),
      sink_(a.sink),
      outlier_percent_(a.outlier_percent),
      trajectory_(a.trajectory),
      fisher_(a.fisher) {
  if (!valid_quant_bits(bits_k_) || !valid_quant_bits(bits_v_))
    fail("kvquant: {} / {} bits for K / V; accepted: 2, 3, 4, 8", bits_k_, bits_v_);
  const int kvd = geo_.kv_dim();
  lp_.resize(geo_.n_layers);
  for (int l = 0; l < geo_.n_layers; ++l) {
    const CalibLayer& c = a.layers[l];
    LayerParams& p = lp_[l];
    p.k_lo = c.k_lower;
    p.k_up = c.k_upper;
    p.k_zp.resize(kvd);
    p.k_range.resize(kvd);
    for (int i = 0; i < kvd; ++i) {
      p.k_zp[i] = (p.k_up[i] + p.k_lo[i]) / 2.0f;
      p.k_range[i] = (p.k_up[i] - p.k_lo[i]) / 2.0f;
    }
    p.k_lut = c.k_codebook;
    p.v_lut = c.v_codebook;
  }
  kb_ = packed_row_bytes(geo_.head_dim, bits_k_);
  vb_ = packed_row_bytes(geo_.head_dim, bits_v_);
  if (!fp16_channels.empty()) {
    normalize_fp16_channels(fp16_channels, geo_);
    hp_ = std::move(fp16_channels);
    dllm_kvq_ = true;
  }
}

std::string KvQuantKvStore::name() const {
  std::string s = fmt::format("{}kvquant-k{}v{}-{}-{}{}", dllm_kvq_ ? "dllm-kvq-" : "", bits_k_,
                              bits_v_, fmt::format("{}pct", outlier_percent_), trajectory_,
                              fisher_ == "none" ? "-noF" : "-fisher");
  if (dllm_kvq_) s += fmt::format("-hp{}", count_fp16_channels(hp_));
  return s;
}

void KvQuantKvStore::reset(int n_positions) {
  const int L = geo_.n_layers, H = geo_.n_kv_heads, hd = geo_.head_dim;
  const size_t lhn = size_t(L) * H;
  if (n_positions > cap_) {
    cap_ = n_positions;
    k_codes_.reset(new uint8_t[lhn * cap_ * kb_]);
    v_codes_.reset(new uint8_t[lhn * cap_ * vb_]);
    v_params_.reset(new uint16_t[lhn * cap_ * 2]);
    sink_k_.assign(lhn * size_t(sink_) * hd, 0);
    sink_v_.assign(lhn * size_t(sink_) * hd, 0);
    hp_vals_.assign(lhn, {});
    if (dllm_kvq_)
      for (int l = 0; l < L; ++l)
        for (int g = 0; g < H; ++g) hp_vals_[lh(l, g)].resize(size_t(cap_) * hp_[l][g].size());
  }
  k_out_.resize(lhn);
  v_out_.resize(lhn);
  for (auto& c : k_out_) c.reset(cap_);
  for (auto& c : v_out_) c.reset(cap_);
  written_.assign(size_t(L) * cap_, 0);
  rows_.assign(L, 0);
}

void KvQuantKvStore::write(int layer, int p0, int n, const float* k_pre, const float* v) {
  assert(layer >= 0 && layer < geo_.n_layers && p0 >= 0 && p0 + n <= cap_);
  const int kvd = geo_.kv_dim();
  check_finite(k_pre, size_t(n) * kvd, kvd, layer, p0, "K");
  check_finite(v, size_t(n) * kvd, kvd, layer, p0, "V");
#pragma omp parallel for schedule(static) if (size_t(n) * kvd > 65536)
  for (int g = 0; g < geo_.n_kv_heads; ++g) write_head(layer, g, p0, n, k_pre, v);
  uint8_t* wr = written_.data() + size_t(layer) * cap_;
  std::fill(wr + p0, wr + p0 + n, uint8_t(1));
  rows_[layer] = size_t(std::count(wr, wr + cap_, uint8_t(1)));
}

void KvQuantKvStore::write_head(int layer, int g, int p0, int n, const float* k_pre,
                                const float* v) {
  const int hd = geo_.head_dim, kvd = geo_.kv_dim();
  const size_t base = lh(layer, g);
  const LayerParams& P = lp_[layer];
  const int nk = 1 << bits_k_, nv = 1 << bits_v_;
  const float* lo = P.k_lo.data() + size_t(g) * hd;
  const float* up = P.k_up.data() + size_t(g) * hd;
  const float* zp = P.k_zp.data() + size_t(g) * hd;
  const float* rg = P.k_range.data() + size_t(g) * hd;
  std::vector<uint8_t> codes(hd);
  std::vector<float> tmp(hd);
  std::vector<SparseEntry> kent, vent;
  std::vector<uint32_t> kcnt(n, 0), vcnt(n, 0);
  static const std::vector<int> kNone;
  const std::vector<int>& hp = dllm_kvq_ ? hp_[layer][g] : kNone;
  std::vector<uint8_t> is_hp(hd, 0);
  for (int c : hp) is_hp[c] = 1;
  const double q_lo = outlier_percent_ / 2.0, q_up = 100.0 - outlier_percent_ / 2.0;
  for (int i = 0; i < n; ++i) {
    const int p = p0 + i;
    const float* k = k_pre + size_t(i) * kvd + size_t(g) * hd;
    const float* x = v + size_t(i) * kvd + size_t(g) * hd;
    if (p < sink_) {  // attention sink: fp16, outside the quantized data
      uint16_t* sk = sink_k_.data() + (base * sink_ + p) * hd;
      uint16_t* sv = sink_v_.data() + (base * sink_ + p) * hd;
      for (int c = 0; c < hd; ++c) {
        sk[c] = f32_to_f16(k[c]);
        sv[c] = f32_to_f16(x[c]);
      }
      continue;
    }
    // K: calibrated per-channel thresholds; outliers sparse, the rest on the layer codebook;
    // dLLM-KVQ's kept channels fp16 beside the codes (code 0 in their slots, never outliers).
    for (size_t j = 0; j < hp.size(); ++j)
      hp_vals_[base][size_t(p) * hp.size() + j] = f32_to_f16(k[hp[j]]);
    for (int c = 0; c < hd; ++c) {
      if (is_hp[c]) {
        codes[c] = 0;
      } else if (k[c] < lo[c] || k[c] > up[c]) {
        kent.push_back({uint16_t(c), f32_to_f16(k[c])});
        ++kcnt[i];
        codes[c] = 0;
      } else {
        const float xn = rg[c] > 0.0f ? (k[c] - zp[c]) / rg[c] : 0.0f;
        codes[c] = uint8_t(nearest_centroid(P.k_lut.data(), nk, xn));
      }
    }
    pack_codes(codes.data(), hd, bits_k_, k_codes_.get() + (base * cap_ + p) * kb_);
    // V: per-token thresholds computed online.
    std::copy(x, x + hd, tmp.begin());
    const float vlo = percentile_inplace(tmp, q_lo);
    std::copy(x, x + hd, tmp.begin());
    const float vup = percentile_inplace(tmp, q_up);
    float mn = 0.0f, mx = 0.0f;
    bool any = false;
    for (int c = 0; c < hd; ++c) {
      if (x[c] < vlo || x[c] > vup) continue;
      mn = any ? std::min(mn, x[c]) : x[c];
      mx = any ? std::max(mx, x[c]) : x[c];
      any = true;
    }
    const uint16_t off_h = f32_to_f16((mx + mn) / 2.0f), rng_h = f32_to_f16((mx - mn) / 2.0f);
    const float off = f16_to_f32(off_h), rng = f16_to_f32(rng_h);
    uint16_t* vp = v_params_.get() + (base * cap_ + p) * 2;
    vp[0] = off_h;
    vp[1] = rng_h;
    for (int c = 0; c < hd; ++c) {
      if (x[c] < vlo || x[c] > vup) {
        vent.push_back({uint16_t(c), f32_to_f16(x[c])});
        ++vcnt[i];
        codes[c] = 0;
      } else {
        const float xn = rng > 0.0f ? (x[c] - off) / rng : 0.0f;
        codes[c] = uint8_t(nearest_centroid(P.v_lut.data(), nv, xn));
      }
    }
    pack_codes(codes.data(), hd, bits_v_, v_codes_.get() + (base * cap_ + p) * vb_);
  }
  k_out_[base].replace(p0, n, kent, kcnt);
  v_out_[base].replace(p0, n, vent, vcnt);
}

KvRows KvQuantKvStore::read(int layer, int g, int p0, int n, float* ks, float* vs) const {
  const int hd = geo_.head_dim;
  const size_t base = lh(layer, g);
  const LayerParams& P = lp_[layer];
  const Csr& ko = k_out_[base];
  const Csr& vo = v_out_[base];
  for (int i = 0; i < n; ++i) {
    const int p = p0 + i;
    float* kr = ks + size_t(i) * hd;
    float* vr = vs + size_t(i) * hd;
    if (p < sink_) {
      const uint16_t* sk = sink_k_.data() + (base * sink_ + p) * hd;
      const uint16_t* sv = sink_v_.data() + (base * sink_ + p) * hd;
      f16_to_f32_rows(sk, kr, size_t(hd));
      f16_to_f32_rows(sv, vr, size_t(hd));
      continue;
    }
    dequant_lut_row(k_codes_.get() + (base * cap_ + p) * kb_, hd, bits_k_, P.k_lut.data(),
                    P.k_range.data() + size_t(g) * hd, P.k_zp.data() + size_t(g) * hd, 1, kr);
    for (uint32_t e = ko.start[p]; e < ko.start[p + 1]; ++e)
      kr[ko.ent[e].index] = f16_to_f32(ko.ent[e].value);
    if (dllm_kvq_) {
      const std::vector<int>& hp = hp_[layer][g];
      const uint16_t* hv = hp_vals_[base].data() + size_t(p) * hp.size();
      for (size_t j = 0; j < hp.size(); ++j) kr[hp[j]] = f16_to_f32(hv[j]);
    }
    const uint16_t* vp = v_params_.get() + (base * cap_ + p) * 2;
    const float off = f16_to_f32(vp[0]), rng = f16_to_f32(vp[1]);
    dequant_lut_row(v_codes_.get() + (base * cap_ + p) * vb_, hd, bits_v_, P.v_lut.data(), &rng,
                    &off, hd, vr);
    for (uint32_t e = vo.start[p]; e < vo.start[p + 1]; ++e)
      vr[vo.ent[e].index] = f16_to_f32(vo.ent[e].value);
  }
  rope_.apply(ks, n, 1, p0);  // K was held pre-RoPE
  return {ks, vs, hd, n};
}

KvBytes KvQuantKvStore::held() const {
  const int hd = geo_.head_dim, H = geo_.n_kv_heads;
  KvBytes b;
  for (int l = 0; l < geo_.n_layers; ++l) {
    const size_t rows = rows_[l];
    if (rows == 0) continue;
    const uint8_t* wr = written_.data() + size_t(l) * cap_;
    size_t sink_rows = 0;
    for (int p = 0; p < std::min(sink_, cap_); ++p) sink_rows += wr[p];
    const size_t q_rows = rows - sink_rows;
    // Per-layer constants: thresholds as zero point and range (f32) and the codebooks.
    b.k += size_t(geo_.kv_dim()) * 8 + lp_[l].k_lut.size() * 4;
    b.v += lp_[l].v_lut.size() * 4;
    for (int g = 0; g < H; ++g) {
      const size_t base = lh(l, g);
      b.k += q_rows * kb_ + sink_rows * size_t(hd) * 2 + k_out_[base].ent.size() * 4 + rows * 4;
      // dLLM-KVQ: fp16 channel values of the quantized rows and their 16-bit indices.
      if (dllm_kvq_) b.k += (q_rows + 1) * hp_[l][g].size() * 2;
      b.v +=
          q_rows * (vb_ + 4) + sink_rows * size_t(hd) * 2 + v_out_[base].ent.size() * 4 + rows * 4;
    }
  }
  return b;
}

size_t KvQuantKvStore::bytes_fp16() const {
  size_t rows = 0;
  for (size_t r : rows_) rows = std::max(rows, r);
  return rows * size_t(geo_.n_layers) * geo_.kv_dim() * 2 * 2;
}

}  // namespace dllmq
