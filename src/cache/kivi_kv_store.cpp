#include "cache/kivi_kv_store.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include <fmt/format.h>

#include "cache/fp16_channels.h"
#include "quant/bitpack.h"
#include "quant/outliers.h"
#include "quant/uniform.h"
#include "util/error.h"
#include "util/half.h"
#include "util/half_rows.h"

namespace dllmq {

KiviKvStore::KiviKvStore(KvGeometry geo, KiviConfig cfg, const RopeTable& rope)
    : geo_(geo), cfg_(std::move(cfg)), rope_(rope) {
  const int hd = geo_.head_dim;
  if (!valid_quant_bits(cfg_.bits_k) || !valid_quant_bits(cfg_.bits_v))
    fail("--kv-bits: {} / {} bits for K / V; accepted: 2, 3, 4, 8", cfg_.bits_k, cfg_.bits_v);
  if (cfg_.group < 1 || cfg_.group > 4096)
    fail("--kv-group {}: accepted range is 1..4096", cfg_.group);
  gv_ = std::min(cfg_.group, hd);
  if (hd % gv_ != 0)
    fail("--kv-group {}: the V channel group min(G, head_dim) = {} must divide head_dim {}",
         cfg_.group, gv_, hd);
  kb_ = packed_row_bytes(hd, cfg_.bits_k);
  vb_ = packed_row_bytes(hd, cfg_.bits_v);
  if (!cfg_.fp16_channels.empty()) {
    normalize_fp16_channels(cfg_.fp16_channels, geo_);
    dllm_kvq_ = true;
  }
}

std::string KiviKvStore::name() const {
  const size_t n_hp = count_fp16_channels(cfg_.fp16_channels);
  std::string s = fmt::format("{}-k{}v{}-g{}", method(), cfg_.bits_k, cfg_.bits_v, cfg_.group);
  if (dllm_kvq_) s += fmt::format("-hp{}", n_hp);
  return s;
}

void KiviKvStore::reset(int n_positions) {
  const int L = geo_.n_layers, H = geo_.n_kv_heads, hd = geo_.head_dim, G = cfg_.group;
  if (n_positions > cap_) {
    cap_ = n_positions;
    n_groups_ = (cap_ + G - 1) / G;
    const size_t lhn = size_t(L) * H;
    k_codes_.reset(new uint8_t[lhn * cap_ * kb_]);
    k_params_.reset(new uint16_t[lhn * n_groups_ * 2 * hd]);
    v_codes_.reset(new uint8_t[lhn * cap_ * vb_]);
    v_params_.reset(new uint16_t[lhn * cap_ * 2 * (hd / gv_)]);
    k_full_.clear();
    k_full_.resize(lhn * n_groups_);
    hp_vals_.assign(lhn, {});
    if (dllm_kvq_)
      for (int l = 0; l < L; ++l)
        for (int g = 0; g < H; ++g)
          hp_vals_[lh(l, g)].resize(size_t(cap_) * cfg_.fp16_channels[l][g].size());
  }
  written_.assign(size_t(L) * cap_, 0);
  full_.assign(size_t(L) * cap_, 0);
  counts_.assign(L, {});
}

void KiviKvStore::write(int layer, int p0, int n, const float* k_pre, const float* v) {
  assert(layer >= 0 && layer < geo_.n_layers && p0 >= 0 && p0 + n <= cap_);
  const int kvd = geo_.kv_dim(), H = geo_.n_kv_heads;
  check_finite(k_pre, size_t(n) * kvd, kvd, layer, p0, "K");
  check_finite(v, size_t(n) * kvd, kvd, layer, p0, "V");
  thread_local std::vector<float> rot;
  rot.assign(k_pre, k_pre + size_t(n) * kvd);
  rope_.apply(rot.data(), n, H, p0);  // KIVI quantizes post-RoPE K
  const float* r = rot.data();
#pragma omp parallel for schedule(static) if (size_t(n) * kvd > 65536)
  for (int g = 0; g < H; ++g) {
    write_k_head(layer, g, p0, n, r);
    write_v_head(layer, g, p0, n, v);
  }
  uint8_t* wr = written_.data() + size_t(layer) * cap_;
  std::fill(wr + p0, wr + p0 + n, uint8_t(1));
  update_counts(layer);
}

void KiviKvStore::write_k_head(int layer, int g, int p0, int n, const float* rot) {
  const int hd = geo_.head_dim, kvd = geo_.kv_dim(), G = cfg_.group, b = cfg_.bits_k;
  const size_t base = lh(layer, g);
  uint8_t* full = full_.data() + size_t(layer) * cap_;
  static const std::vector<int> kNone;
  const std::vector<int>& hp = dllm_kvq_ ? cfg_.fp16_channels[layer][g] : kNone;
  std::vector<uint8_t> is_hp(hd, 0);
  for (int c : hp) is_hp[c] = 1;
  std::vector<uint8_t> codes(size_t(G) * hd), col(G);
  const int p1 = p0 + n;
  for (int gi = p0 / G; gi * G < p1; ++gi) {
    const int gs = gi * G, ge = gs + G;
    if (gs >= p0 && ge <= p1) {
      // Whole group written: quantize each channel over its G positions.
      uint16_t* par = k_params_.get() + (base * n_groups_ + gi) * 2 * hd;
      for (int c = 0; c < hd; ++c) {
        const float* x = rot + size_t(gs - p0) * kvd + size_t(g) * hd + c;
        UniformParams p;
        if (!is_hp[c]) p = uniform_params(x, G, kvd, b);
        par[c] = p.scale;
        par[hd + c] = p.zero;
        if (is_hp[c]) {
          for (int t = 0; t < G; ++t) codes[size_t(t) * hd + c] = 0;
        } else {
          uniform_quantize(x, G, kvd, b, p, col.data());  // G codes of channel c
          for (int t = 0; t < G; ++t) codes[size_t(t) * hd + c] = col[t];
        }
      }
      for (int t = 0; t < G; ++t) {
        full[gs + t] = 0;
        pack_codes(codes.data() + size_t(t) * hd, hd, b,
                   k_codes_.get() + (base * cap_ + gs + t) * kb_);
      }
    } else {
      // Part of the group: its written rows stay at full precision.
      auto& buf = k_full_[base * n_groups_ + gi];
      if (!buf) buf.reset(new float[size_t(G) * hd]);
      for (int p = std::max(gs, p0); p < std::min(ge, p1); ++p) {
        std::memcpy(buf.get() + size_t(p - gs) * hd, rot + size_t(p - p0) * kvd + size_t(g) * hd,
                    size_t(hd) * 4);
        full[p] = 1;
      }
    }
  }
  if (!hp.empty()) {
    uint16_t* hv = hp_vals_[base].data();
    const size_t nh = hp.size();
    for (int p = p0; p < p1; ++p)
      for (size_t i = 0; i < nh; ++i)
        hv[size_t(p) * nh + i] = f32_to_f16(rot[size_t(p - p0) * kvd + size_t(g) * hd + hp[i]]);
  }
}

void KiviKvStore::write_v_head(int layer, int g, int p0, int n, const float* v) {
  const int hd = geo_.head_dim, kvd = geo_.kv_dim(), b = cfg_.bits_v, ng = hd / gv_;
  const size_t base = lh(layer, g);
  uint8_t codes[4096];
  for (int p = p0; p < p0 + n; ++p) {
    const float* x = v + size_t(p - p0) * kvd + size_t(g) * hd;
    uint16_t* par = v_params_.get() + (base * cap_ + p) * 2 * ng;
    for (int j = 0; j < ng; ++j) {
      const UniformParams q = uniform_params(x + j * gv_, gv_, 1, b);
      par[j] = q.scale;
      par[ng + j] = q.zero;
      uniform_quantize(x + j * gv_, gv_, 1, b, q, codes + j * gv_);
    }
    pack_codes(codes, hd, b, v_codes_.get() + (base * cap_ + p) * vb_);
  }
}

void KiviKvStore::update_counts(int layer) {
  const int G = cfg_.group;
  const uint8_t* wr = written_.data() + size_t(layer) * cap_;
  const uint8_t* fu = full_.data() + size_t(layer) * cap_;
  Counts c;
  for (int gi = 0; gi < n_groups_; ++gi) {
    bool quant = false;
    for (int p = gi * G; p < std::min(cap_, (gi + 1) * G); ++p) {
      c.rows += wr[p];
      c.full_rows += wr[p] && fu[p];
      quant |= wr[p] && !fu[p];
    }
    c.quant_groups += quant;
  }
  counts_[layer] = c;
}

KvRows KiviKvStore::read(int layer, int g, int p0, int n, float* ks, float* vs) const {
  const int hd = geo_.head_dim, G = cfg_.group, ng = hd / gv_;
  const size_t base = lh(layer, g);
  const uint8_t* full = full_.data() + size_t(layer) * cap_;
  static const std::vector<int> kNone;
  const std::vector<int>& hp = dllm_kvq_ ? cfg_.fp16_channels[layer][g] : kNone;
  thread_local std::vector<float> sc, ze;
  sc.resize(std::max(hd, ng));
  ze.resize(std::max(hd, ng));
  int have_group = -1;
  for (int i = 0; i < n; ++i) {
    const int p = p0 + i, gi = p / G;
    float* kr = ks + size_t(i) * hd;
    if (full[p]) {
      std::memcpy(kr, k_full_[base * n_groups_ + gi].get() + size_t(p - gi * G) * hd,
                  size_t(hd) * 4);
    } else {
      if (gi != have_group) {
        const uint16_t* par = k_params_.get() + (base * n_groups_ + gi) * 2 * hd;
        f16_to_f32_rows(par, sc.data(), size_t(hd));
        f16_to_f32_rows(par + hd, ze.data(), size_t(hd));
        have_group = gi;
      }
      dequant_uniform_row(k_codes_.get() + (base * cap_ + p) * kb_, hd, cfg_.bits_k, sc.data(),
                          ze.data(), 1, kr);
      if (!hp.empty()) {
        const uint16_t* hv = hp_vals_[base].data() + size_t(p) * hp.size();
        for (size_t j = 0; j < hp.size(); ++j) kr[hp[j]] = f16_to_f32(hv[j]);
      }
    }
  }
  float vsc[512], vze[512];
  for (int i = 0; i < n; ++i) {
    const int p = p0 + i;
    const uint16_t* par = v_params_.get() + (base * cap_ + p) * 2 * ng;
    for (int j = 0; j < ng; ++j) {
      vsc[j] = f16_to_f32(par[j]);
      vze[j] = f16_to_f32(par[ng + j]);
    }
    dequant_uniform_row(v_codes_.get() + (base * cap_ + p) * vb_, hd, cfg_.bits_v, vsc, vze, gv_,
                        vs + size_t(i) * hd);
  }
  return {ks, vs, hd, n};
}

KvBytes KiviKvStore::held() const {
  const int hd = geo_.head_dim, H = geo_.n_kv_heads, ng = hd / gv_;
  KvBytes b;
  for (int l = 0; l < geo_.n_layers; ++l) {
    const Counts& c = counts_[l];
    const size_t q_rows = c.rows - c.full_rows;
    for (int g = 0; g < H; ++g) {
      const size_t n_hp = dllm_kvq_ ? cfg_.fp16_channels[l][g].size() : 0;
      b.k += q_rows * kb_ + c.quant_groups * size_t(hd) * 4 + c.full_rows * size_t(hd) * 4 +
             c.rows * n_hp * 2 + n_hp * 2;  // fp16 channel values and their 16-bit indices
      b.v += c.rows * (vb_ + size_t(ng) * 4);
    }
  }
  return b;
}

size_t KiviKvStore::bytes_fp16() const {
  size_t rows = 0;
  for (auto& c : counts_) rows = std::max(rows, c.rows);
  return rows * size_t(geo_.n_layers) * geo_.kv_dim() * 2 * 2;
}

}  // namespace dllmq
