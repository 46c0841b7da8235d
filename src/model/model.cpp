#include "model/model.h"

#include <time.h>

#include <cassert>
#include <cstring>

#include <fmt/format.h>

#include "ops/attention.h"
#include "ops/gemm.h"
#include "ops/norm_act.h"
#include "util/error.h"

namespace dllmq {

namespace {

double clock_s(clockid_t id) {
  timespec t;
  clock_gettime(id, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// Charges the wall and process CPU time since the previous charge to a phase. Phases follow one
// another on the calling thread; CPU time counts every thread (worker spin-waits included).
class PhaseClock {
 public:
  PhaseClock() : wall_(clock_s(CLOCK_MONOTONIC)), cpu_(clock_s(CLOCK_PROCESS_CPUTIME_ID)) {}
  void charge(PhaseStat& s) {
    const double w = clock_s(CLOCK_MONOTONIC), c = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    s.wall_s += w - wall_;
    s.cpu_s += c - cpu_;
    wall_ = w;
    cpu_ = c;
  }

 private:
  double wall_, cpu_;
};

double weight_bytes(const Linear& l) {
  return double(l.out) * l.in * dtype_size(l.w->dtype);
}

}  // namespace

std::unique_ptr<Model> Model::load(const std::string& dir) {
  (void)gemm_info();  // selects the GEMM backend (and says so on stderr if it is generic)
  pin_threads();
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
  const ComputeDType dt = dtype_;
  assert(a.logits.begin >= a.pos0 && a.logits.end <= a.pos0 + n);
  assert(a.write.empty() || (a.write.begin >= a.pos0 && a.write.end <= a.pos0 + n));
  // Weights are read in place from the mapped checkpoint: a shard rewritten since loading would
  // give SIGBUS or other weights (util/mmap_file.h). A few fstat calls per forward.
  ckpt_->check_unchanged();
  PhaseClock clock;
  ForwardProfile& pf = profile_;
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
  // Roofline work of this forward, per phase: FLOPs from the model count; bytes are what each
  // phase must move at least (weights once, activations in and out, every K/V row read).
  const double qd = double(nh) * hd, mlp = cfg_.mlp_hidden;
  double cached_kv_bytes = 0.0;
  if (a.store != nullptr)
    for (const PosRange& r : a.cached)
      cached_kv_bytes += double(r.size()) * kvd * (a.store->bits_k() + a.store->bits_v()) / 8.0;
  ++pf.forwards;
  for (const LayerWeights& L : w_.layers) {
    pf.proj.bytes += weight_bytes(L.q) + weight_bytes(L.k) + weight_bytes(L.v) + weight_bytes(L.o) +
                     weight_bytes(L.gate) + weight_bytes(L.up) + weight_bytes(L.down);
    pf.proj.bytes += 4.0 * n * (d + qd + 2 * kvd + qd + d + d + 2 * mlp + mlp + d);
    pf.proj.flops += 2.0 * n * (d * qd + 2 * d * kvd + qd * d + 3 * d * mlp);
    pf.attn.flops += 4.0 * n * n_keys * qd;
    pf.attn.bytes += 4.0 * n * 2 * qd + 4.0 * n * 2 * kvd + cached_kv_bytes;
  }
  clock.charge(pf.other);

  if (a.observer) a.observer->on_forward(a);
  std::vector<StoredKvRows> stored;  // a handful of ranges; tiny
  stored.reserve(a.cached.size());
  sources_.clear();
  for (int l = 0; l < cfg_.n_layers; ++l) {
    const LayerWeights& L = w_.layers[l];
    rmsnorm(x_.data(), n, d, L.attn_norm.data(), cfg_.rms_eps, h_.data());
    clock.charge(pf.other);
    linear(h_.data(), n, L.q, q_.data(), 0, dt);  // [n, nh*hd]
    linear(h_.data(), n, L.k, k_.data(), 0, dt);  // [n, kvd] pre-RoPE
    linear(h_.data(), n, L.v, v_.data(), 0, dt);  // [n, kvd]
    clock.charge(pf.proj);
    if (a.store != nullptr && !a.write.empty()) {
      const int r0 = a.write.begin - a.pos0;
      a.store->write(l, a.write.begin, a.write.size(), k_.data() + size_t(r0) * kvd,
                     v_.data() + size_t(r0) * kvd);
    }
    if (a.observer) a.observer->on_kv(l, a.pos0, n, k_.data(), v_.data());
    rope_.apply(q_.data(), n, nh, a.pos0);
    rope_.apply(k_.data(), n, nkv, a.pos0);
    if (a.observer) a.observer->on_query(l, a.pos0, n, q_.data());
    clock.charge(pf.other);

    stored.clear();
    for (const PosRange& r : a.cached) stored.emplace_back(*a.store, l, r);
    FreshKvRows fresh(k_.data(), v_.data(), n, kvd, hd);
    sources_in_canvas_order(a.cached, stored, &fresh, a.pos0, sources_);
    attention(q_.data(), n, nh, nkv, hd, sources_, att_.data());  // [n, nh*hd]
    clock.charge(pf.attn);
    if (a.observer) a.observer->on_layer(l, a.pos0, n, k_.data(), v_.data(), att_.data());
    clock.charge(pf.other);

    linear(att_.data(), n, L.o, h_.data(), 0, dt);
    clock.charge(pf.proj);
    for (size_t i = 0; i < size_t(n) * d; ++i) x_[i] += h_[i];

    rmsnorm(x_.data(), n, d, L.ffn_norm.data(), cfg_.rms_eps, h_.data());
    clock.charge(pf.other);
    linear(h_.data(), n, L.gate, gate_.data(), 0, dt);  // [n, mlp]
    linear(h_.data(), n, L.up, up_.data(), 0, dt);      // [n, mlp]
    clock.charge(pf.proj);
    silu_mul(gate_.data(), up_.data(), size_t(n) * cfg_.mlp_hidden);
    clock.charge(pf.other);
    linear(gate_.data(), n, L.down, h_.data(), 0, dt);  // [n, d]
    clock.charge(pf.proj);
    for (size_t i = 0; i < size_t(n) * d; ++i) x_[i] += h_[i];
  }

  if (a.logits.empty()) {
    clock.charge(pf.other);
    return;
  }
  const int r0 = a.logits.begin - a.pos0, nl = a.logits.size();
  rmsnorm(x_.data() + size_t(r0) * d, nl, d, w_.final_norm.data(), cfg_.rms_eps, h_.data());
  linear(h_.data(), nl, w_.lm_head, logits, 0, dt);  // [nl, vocab]
  pf.head.flops += 2.0 * nl * d * cfg_.vocab_size;
  pf.head.bytes += weight_bytes(w_.lm_head) + 4.0 * nl * (d + double(cfg_.vocab_size));
  pf.logit_rows += nl;
  clock.charge(pf.head);
}

double Model::forward_flops(int n, int n_keys, int n_logits) const {
  const double d = cfg_.d_model, qd = double(cfg_.n_heads) * cfg_.head_dim, kvd = cfg_.kv_dim();
  const double per_row = 2.0 * (d * qd + 2 * d * kvd + qd * d + 3 * d * cfg_.mlp_hidden);
  const double attn = 2.0 * 2.0 * double(n) * n_keys * qd;
  return cfg_.n_layers * (n * per_row + attn) + 2.0 * n_logits * d * cfg_.vocab_size;
}

}  // namespace dllmq
