#include "model/model.h"

#include <cassert>
#include <cstring>

#include <fmt/format.h>

#include "ops/attention.h"
#include "ops/norm_act.h"
#include "util/error.h"

namespace dllmq {

std::unique_ptr<Model> Model::load(const std::string& dir) {
  blas_use_one_thread();
  std::unique_ptr<Model> m(new Model());
  m->dir_ = dir;
  m->cfg_ = load_model_config(dir);
  m->ckpt_ = std::make_unique<Checkpoint>(dir);
  m->w_ = bind_weights(*m->ckpt_, m->cfg_);
  m->rope_ = RopeTable(m->cfg_.head_dim, m->cfg_.rope_theta);
  return m;
}

const std::string& Model::fingerprint() const {
  if (!fingerprint_.empty()) return fingerprint_;
  // FNV-1a 64 over the geometry, every tensor's name, dtype and shape, and its first and last
  // 256 bytes: cheap (no full read of an 8B checkpoint) and different for any retrained model.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  const std::string geo =
      fmt::format("{}|{}|{}|{}|{}|{}|{}|{}", arch_name(cfg_.arch), cfg_.n_layers, cfg_.d_model,
                  cfg_.n_heads, cfg_.n_kv_heads, cfg_.head_dim, cfg_.vocab_size, cfg_.mlp_hidden);
  mix(geo.data(), geo.size());
  for (const auto& [name, t] : ckpt_->tensors()) {
    const std::string d = fmt::format("{}|{}|{}", name, dtype_name(t->dtype), t->shape_str());
    mix(d.data(), d.size());
    const size_t k = std::min<size_t>(256, t->nbytes);
    mix(t->data, k);
    mix(static_cast<const uint8_t*>(t->data) + t->nbytes - k, k);
  }
  fingerprint_ = fmt::format("{:016x}", h);
  return fingerprint_;
}

void Model::grow(int n) {
  if (n <= cap_) return;
  cap_ = n;
  const size_t d = cfg_.d_model, qd = size_t(cfg_.n_heads) * cfg_.head_dim, kvd = cfg_.kv_dim();
  x_.resize(n * d);
  h_.resize(n * d);
  q_.resize(n * qd);
  k_.resize(n * kvd);
  v_.resize(n * kvd);
  att_.resize(n * qd);
  gate_.resize(n * size_t(cfg_.mlp_hidden));
  up_.resize(n * size_t(cfg_.mlp_hidden));
}

void Model::forward(const ForwardArgs& a, float* logits) {
  const int n = static_cast<int>(a.ids.size());
  const int d = cfg_.d_model, hd = cfg_.head_dim, nh = cfg_.n_heads, nkv = cfg_.n_kv_heads;
  const int kvd = cfg_.kv_dim();
  assert(a.logits.begin >= a.pos0 && a.logits.end <= a.pos0 + n);
  assert(a.write.empty() || (a.write.begin >= a.pos0 && a.write.end <= a.pos0 + n));
  grow(n);
  rope_.reserve(a.pos0 + n);

  // x: [n, d] token embeddings (no scaling).
  for (int i = 0; i < n; ++i) {
    const int id = a.ids[i];
    if (id < 0 || id >= cfg_.vocab_size)
      fail("token id {} at row {} outside the vocabulary [0, {})", id, i, cfg_.vocab_size);
    tensor_row_f32(*w_.embed, id, d, x_.data() + size_t(i) * d);
  }

  int n_keys = n;
  for (const PosRange& r : a.cached) n_keys += r.size();
  flops_done_ += forward_flops(n, n_keys, a.logits.size());

  std::vector<StoredKvRows> stored;  // a handful of ranges; tiny
  stored.reserve(a.cached.size());
  sources_.clear();
  for (int l = 0; l < cfg_.n_layers; ++l) {
    const LayerWeights& L = w_.layers[l];
    rmsnorm(x_.data(), n, d, L.attn_norm.data(), cfg_.rms_eps, h_.data());
    linear(h_.data(), n, L.q, q_.data());  // [n, nh*hd]
    linear(h_.data(), n, L.k, k_.data());  // [n, kvd] pre-RoPE
    linear(h_.data(), n, L.v, v_.data());  // [n, kvd]
    if (a.store != nullptr && !a.write.empty()) {
      const int r0 = a.write.begin - a.pos0;
      a.store->write(l, a.write.begin, a.write.size(), k_.data() + size_t(r0) * kvd,
                     v_.data() + size_t(r0) * kvd);
    }
    if (a.observer) a.observer->on_kv(l, a.pos0, n, k_.data(), v_.data());
    rope_.apply(q_.data(), n, nh, a.pos0);
    rope_.apply(k_.data(), n, nkv, a.pos0);

    stored.clear();
    sources_.clear();
    for (const PosRange& r : a.cached) stored.emplace_back(*a.store, l, r);
    FreshKvRows fresh(k_.data(), v_.data(), n, kvd, hd);
    // Keys in canvas order; softmax does not care, but it keeps summation order close to the
    // references, which attend over the whole canvas left to right.
    bool fresh_added = false;
    for (size_t i = 0; i < stored.size(); ++i) {
      if (!fresh_added && a.cached[i].begin > a.pos0) {
        sources_.push_back(&fresh);
        fresh_added = true;
      }
      sources_.push_back(&stored[i]);
    }
    if (!fresh_added) sources_.push_back(&fresh);
    attention(q_.data(), n, nh, nkv, hd, sources_, att_.data());  // [n, nh*hd]
    if (a.observer) a.observer->on_layer(l, a.pos0, n, k_.data(), v_.data(), att_.data());

    linear(att_.data(), n, L.o, h_.data());
    for (size_t i = 0; i < size_t(n) * d; ++i) x_[i] += h_[i];

    rmsnorm(x_.data(), n, d, L.ffn_norm.data(), cfg_.rms_eps, h_.data());
    linear(h_.data(), n, L.gate, gate_.data());  // [n, mlp]
    linear(h_.data(), n, L.up, up_.data());      // [n, mlp]
    silu_mul(gate_.data(), up_.data(), size_t(n) * cfg_.mlp_hidden);
    linear(gate_.data(), n, L.down, h_.data());  // [n, d]
    for (size_t i = 0; i < size_t(n) * d; ++i) x_[i] += h_[i];
  }

  if (a.logits.empty()) return;
  const int r0 = a.logits.begin - a.pos0, nl = a.logits.size();
  rmsnorm(x_.data() + size_t(r0) * d, nl, d, w_.final_norm.data(), cfg_.rms_eps, h_.data());
  linear(h_.data(), nl, w_.lm_head, logits);  // [nl, vocab]
}

double Model::forward_flops(int n, int n_keys, int n_logits) const {
  const double d = cfg_.d_model, qd = double(cfg_.n_heads) * cfg_.head_dim, kvd = cfg_.kv_dim();
  const double per_row = 2.0 * (d * qd + 2 * d * kvd + qd * d + 3 * d * cfg_.mlp_hidden);
  const double attn = 2.0 * 2.0 * double(n) * n_keys * qd;
  return cfg_.n_layers * (n * per_row + attn) + 2.0 * n_logits * d * cfg_.vocab_size;
}

}  // namespace dllmq
