#include "model/kv_grad.h"

#include <algorithm>
#include <cmath>

#include "model/ffn_grad.h"
#include "model/moe.h"
#include "ops/attention.h"
#include "ops/backward.h"
#include "ops/gemm.h"
#include "ops/norm_act.h"
#include "util/error.h"

namespace dllmq {

namespace {

// Per-thread scratch of the attention: probabilities, their gradient and two transposes, each
// [n, S] floats.
struct AttnScratch {
  std::vector<float> p, dp, pt, dst;
  void reserve(size_t n) {
    for (auto* b : {&p, &dp, &pt, &dst})
      if (b->size() < n) b->resize(n);
  }
};

void transpose(const float* a, int rows, int cols, float* at) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) at[size_t(c) * rows + r] = a[size_t(r) * cols + c];
}

// P = softmax(scale * q_h K_g^T) over every key row: [n, S].
void attention_probs(const float* qh, int ldq, const float* kg, int ldk, int n, int S, int hd,
                     float scale, float* p) {
  std::fill(p, p + size_t(n) * S, 0.0f);
  sgemm(true, n, S, hd, scale, qh, ldq, kg, ldk, 0.0f, p, S);
  for (int i = 0; i < n; ++i) {
    float* r = p + size_t(i) * S;
    const float mx = *std::max_element(r, r + S);
    double sum = 0.0;
    for (int j = 0; j < S; ++j) sum += (r[j] = std::exp(r[j] - mx));
    const float inv = float(1.0 / sum);
    for (int j = 0; j < S; ++j) r[j] *= inv;
  }
}

// One layer's forward state, recomputed from the layer input during the backward.
struct LayerState {
  std::vector<float> h1, q, k, v;   // normed input; q post-RoPE; k, v of the fresh rows
  std::vector<float> q_raw, k_raw;  // q and k before LLaDA-MoE's per-head norms (if any)
  std::vector<float> keys, vals;    // [S, kvd]: every row attended to (k post-RoPE)
  std::vector<float> att, x2, h2;
  std::vector<float> gate, up;  // dense MLP pre-activations (a MoE layer's stay in moe_)
  std::vector<float> act;       // the FFN output
};

class Backprop {
 public:
  Backprop(const Model& m, const ForwardArgs& a, const std::optional<KvPerturbation>& pert)
      : m_(m), c_(m.config()), a_(a), pert_(pert), dt_(m.compute_dtype()) {
    n_ = int(a.ids.size());
    d_ = c_.d_model, hd_ = c_.head_dim, nh_ = c_.n_heads, nkv_ = c_.n_kv_heads;
    kvd_ = c_.kv_dim(), qd_ = nh_ * hd_;
    for (const PosRange& r : a.cached) {
      if (!a.store) fail("internal: kv_loss_gradient: cached rows without a store");
      for (int p = r.begin; p < r.end; ++p) pos_.push_back(p);
    }
    n_cached_ = int(pos_.size());
    for (int i = 0; i < n_; ++i) pos_.push_back(a.pos0 + i);
    S_ = int(pos_.size());
    if (pert_ && std::find(pos_.begin(), pos_.end(), pert_->pos) == pos_.end())
      fail("internal: kv_loss_gradient: perturbed position {} is not read", pert_->pos);
  }

  double run(std::span<const LossTerm> terms, const KvGradSink& sink) {
    const int L = c_.n_layers;
    std::vector<std::vector<float>> xin(L);
    std::vector<float> x(size_t(n_) * d_);
    for (int i = 0; i < n_; ++i) {
      const int id = a_.ids[i];
      if (id < 0 || id >= c_.vocab_size)
        fail("token id {} at row {} outside the vocabulary [0, {})", id, i, c_.vocab_size);
      tensor_row_f32(*m_.weights().embed, id, d_, x.data() + size_t(i) * d_);
    }
    LayerState st;
    for (int l = 0; l < L; ++l) {
      xin[l] = x;
      layer_forward(l, x.data(), st);
      x = st.x2;
      for (size_t i = 0; i < x.size(); ++i) x[i] += st.act[i];
    }

    // Loss on the requested rows: final norm, LM head, weighted cross-entropy.
    const int m = int(terms.size()), V = c_.vocab_size;
    std::vector<float> xr(size_t(m) * d_), hf(xr.size()), logits(size_t(m) * V);
    for (int t = 0; t < m; ++t) {
      const int r = terms[t].row - a_.pos0;
      if (r < 0 || r >= n_) fail("internal: loss row {} is not a fresh row", terms[t].row);
      if (terms[t].target < 0 || terms[t].target >= V)
        fail("internal: loss target {} outside the vocabulary", terms[t].target);
      std::copy_n(x.data() + size_t(r) * d_, d_, xr.data() + size_t(t) * d_);
    }
    const std::vector<float>& fn = m_.weights().final_norm;
    rmsnorm(xr.data(), m, d_, fn.data(), c_.rms_eps, hf.data());
    linear(hf.data(), m, m_.weights().lm_head, logits.data(), 0, dt_);
    double loss = 0.0;
    for (int t = 0; t < m; ++t) {
      float* z = logits.data() + size_t(t) * V;
      const double mx = *std::max_element(z, z + V);
      double sum = 0.0;
      for (int j = 0; j < V; ++j) sum += std::exp(double(z[j]) - mx);
      const double lse = mx + std::log(sum);
      loss += terms[t].weight * (lse - z[terms[t].target]);
      // z becomes d loss / d z = weight * (softmax - onehot).
      for (int j = 0; j < V; ++j) z[j] = float(terms[t].weight * std::exp(double(z[j]) - lse));
      z[terms[t].target] -= float(terms[t].weight);
    }
    if (!sink) return loss;

    std::vector<float> dhf(size_t(m) * d_), dx(size_t(n_) * d_, 0.0f), dxr(size_t(m) * d_, 0.0f);
    linear_backward_input(logits.data(), m, m_.weights().lm_head, dhf.data(), false);
    rmsnorm_backward(xr.data(), m, d_, fn.data(), c_.rms_eps, dhf.data(), dxr.data());
    for (int t = 0; t < m; ++t) {
      float* dst = dx.data() + size_t(terms[t].row - a_.pos0) * d_;
      for (int k = 0; k < d_; ++k) dst[k] += dxr[size_t(t) * d_ + k];
    }
    std::vector<float> gk, gv;
    for (int l = L - 1; l >= 0; --l) {
      layer_forward(l, xin[l].data(), st);
      layer_backward(l, xin[l].data(), st, dx, gk, gv);
      LayerKvGrad out;
      out.layer = l;
      out.pos = pos_;
      out.n_cached = n_cached_;
      out.kv_dim = kvd_;
      out.gk = gk.data();
      out.gv = gv.data();
      out.k_fresh = st.k.data();
      out.v_fresh = st.v.data();
      sink(out);
    }
    return loss;
  }

 private:
  // Forward of layer l from its input x: fills st (st.act ends as the FFN output [n, d]).
  void layer_forward(int l, const float* x, LayerState& st) {
    const LayerWeights& W = m_.weights().layers[l];
    const RopeTable& rope = m_.rope();
    st.h1.resize(size_t(n_) * d_);
    st.q.resize(size_t(n_) * qd_);
    st.k.resize(size_t(n_) * kvd_);
    st.v.resize(size_t(n_) * kvd_);
    rmsnorm(x, n_, d_, W.attn_norm.data(), c_.rms_eps, st.h1.data());
    linear(st.h1.data(), n_, W.q, st.q.data(), 0, dt_);
    linear(st.h1.data(), n_, W.k, st.k.data(), 0, dt_);
    linear(st.h1.data(), n_, W.v, st.v.data(), 0, dt_);
    if (!W.q_norm.empty()) {
      // LLaDA-MoE: every head's q and k RMS-normed before RoPE, as Model::forward does; the
      // store holds the normed K, so the perturbation and the K gradient are the normed K's.
      st.q_raw = st.q;
      st.k_raw = st.k;
      rmsnorm(st.q.data(), n_ * nh_, hd_, W.q_norm.data(), c_.rms_eps, st.q.data());
      rmsnorm(st.k.data(), n_ * nkv_, hd_, W.k_norm.data(), c_.rms_eps, st.k.data());
    }
    const bool pert_here = pert_ && pert_->layer == l;
    const int pert_row =
        pert_here ? int(std::find(pos_.begin(), pos_.end(), pert_->pos) - pos_.begin()) : -1;
    if (pert_row >= n_cached_) {
      float* row = (pert_->value ? st.v : st.k).data() + size_t(pert_row - n_cached_) * kvd_;
      row[pert_->channel] += pert_->delta;
    }
    rope.apply(st.q.data(), n_, nh_, a_.pos0);
    // Keys and values read: cached rows as the store hands them out, then the fresh rows.
    st.keys.resize(size_t(S_) * kvd_);
    st.vals.resize(size_t(S_) * kvd_);
    std::vector<float> ks(size_t(hd_) * std::max(1, a_.store ? a_.store->max_tile() : 1)),
        vs(ks.size());
    int row = 0;
    for (const PosRange& r : a_.cached) {
      const int tile = std::max(1, a_.store->max_tile());
      for (int p0 = r.begin; p0 < r.end; p0 += tile) {
        const int cnt = std::min(tile, r.end - p0);
        for (int g = 0; g < nkv_; ++g) {
          const KvRows kv = a_.store->read(l, g, p0, cnt, ks.data(), vs.data());
          for (int i = 0; i < cnt; ++i) {
            std::copy_n(kv.k + size_t(i) * kv.ld, hd_,
                        st.keys.data() + size_t(row + i) * kvd_ + size_t(g) * hd_);
            std::copy_n(kv.v + size_t(i) * kv.ld, hd_,
                        st.vals.data() + size_t(row + i) * kvd_ + size_t(g) * hd_);
          }
        }
        row += cnt;
      }
    }
    if (pert_row >= 0 && pert_row < n_cached_) {
      float* kr = st.keys.data() + size_t(pert_row) * kvd_;
      if (pert_->value) {
        st.vals[size_t(pert_row) * kvd_ + pert_->channel] += pert_->delta;
      } else {
        rope.apply_inverse(kr, 1, nkv_, pert_->pos);
        kr[pert_->channel] += pert_->delta;
        rope.apply(kr, 1, nkv_, pert_->pos);
      }
    }
    std::copy(st.k.begin(), st.k.end(), st.keys.begin() + size_t(n_cached_) * kvd_);
    std::copy(st.v.begin(), st.v.end(), st.vals.begin() + size_t(n_cached_) * kvd_);
    rope.apply(st.keys.data() + size_t(n_cached_) * kvd_, n_, nkv_, a_.pos0);

    // The attention output exactly as Model::forward computes it (same kernel, sources in the
    // same canvas order, cached tiles of the store's size): the layers above then see
    // bit-identical inputs, so the K/V rows handed to the sink are the rows the step read.
    st.att.resize(size_t(n_) * qd_);
    std::vector<FreshKvRows> cached_src;
    cached_src.reserve(a_.cached.size());
    int off = 0;
    for (const PosRange& r : a_.cached) {
      cached_src.emplace_back(st.keys.data() + size_t(off) * kvd_,
                              st.vals.data() + size_t(off) * kvd_, r.size(), kvd_, hd_,
                              a_.store->max_tile());
      off += r.size();
    }
    FreshKvRows fresh(st.keys.data() + size_t(n_cached_) * kvd_,
                      st.vals.data() + size_t(n_cached_) * kvd_, n_, kvd_, hd_);
    std::vector<const KvRowSource*> sources;
    sources_in_canvas_order(a_.cached, cached_src, &fresh, a_.pos0, sources);
    attention(st.q.data(), n_, nh_, nkv_, hd_, sources, st.att.data());
    st.x2.resize(size_t(n_) * d_);
    linear(st.att.data(), n_, W.o, st.x2.data(), 0, dt_);
    add_in_place(st.x2.data(), x, st.x2.size());
    st.h2.resize(size_t(n_) * d_);
    rmsnorm(st.x2.data(), n_, d_, W.ffn_norm.data(), c_.rms_eps, st.h2.data());
    st.act.resize(size_t(n_) * d_);
    if (W.moe) {
      // The runner Model::forward uses, on one canvas: the same bits and the same routing.
      const CanvasRows all{0, n_};
      const float* y = moe_.forward(*W.moe, st.h2.data(), d_, {&all, 1}, dt_);
      std::copy_n(y, st.act.size(), st.act.data());
      return;
    }
    const int mlp = W.gate.out;
    st.gate.resize(size_t(n_) * mlp);
    st.up.resize(size_t(n_) * mlp);
    linear(st.h2.data(), n_, W.gate, st.gate.data(), 0, dt_);
    linear(st.h2.data(), n_, W.up, st.up.data(), 0, dt_);
    std::vector<float> a(st.gate);
    silu_mul(a.data(), st.up.data(), a.size());
    linear(a.data(), n_, W.down, st.act.data(), 0, dt_);
  }

  // dx: gradient with respect to the layer's output on entry, its input on return.
  void layer_backward(int l, const float* x, const LayerState& st, std::vector<float>& dx,
                      std::vector<float>& gk, std::vector<float>& gv) {
    const LayerWeights& W = m_.weights().layers[l];
    const RopeTable& rope = m_.rope();
    // FFN: x3 = x2 + ffn(h2), dense SwiGLU or routed experts (model/ffn_grad.h).
    std::vector<float> dh(size_t(n_) * d_);
    if (W.moe)
      moe_ffn_backward(*W.moe, moe_.last_routing(), st.h2.data(), n_, d_, dx.data(), dh.data(),
                       dt_);
    else
      swiglu_backward(W.gate, W.up, W.down, st.gate.data(), st.up.data(), n_, dx.data(), dh.data(),
                      false);
    rmsnorm_backward(st.x2.data(), n_, d_, W.ffn_norm.data(), c_.rms_eps, dh.data(), dx.data());
    // Attention output projection: x2 = x + o(att).
    std::vector<float> datt(size_t(n_) * qd_), dq(size_t(n_) * qd_, 0.0f);
    linear_backward_input(dx.data(), n_, W.o, datt.data(), false);
    gk.assign(size_t(S_) * kvd_, 0.0f);
    gv.assign(size_t(S_) * kvd_, 0.0f);
    const int rep = nh_ / nkv_;
    const float scale = 1.0f / std::sqrt(float(hd_));
    // One KV group per work item: its heads all add to the same K/V gradient columns.
#pragma omp parallel for schedule(dynamic, 1)
    for (int g = 0; g < nkv_; ++g) {
      thread_local AttnScratch s;
      s.reserve(size_t(n_) * S_);
      const float* kg = st.keys.data() + size_t(g) * hd_;
      const float* vg = st.vals.data() + size_t(g) * hd_;
      for (int h = g * rep; h < (g + 1) * rep; ++h) {
        const float* qh = st.q.data() + size_t(h) * hd_;
        const float* dah = datt.data() + size_t(h) * hd_;
        attention_probs(qh, qd_, kg, kvd_, n_, S_, hd_, scale, s.p.data());
        // dV += P^T dA
        transpose(s.p.data(), n_, S_, s.pt.data());
        sgemm(false, S_, hd_, n_, 1.0f, s.pt.data(), n_, dah, qd_, 1.0f,
              gv.data() + size_t(g) * hd_, kvd_);
        // dP = dA V^T; dS = P * (dP - rowsum(P * dP))
        std::fill(s.dp.begin(), s.dp.begin() + size_t(n_) * S_, 0.0f);
        sgemm(true, n_, S_, hd_, 1.0f, dah, qd_, vg, kvd_, 0.0f, s.dp.data(), S_);
        for (int i = 0; i < n_; ++i) {
          const float* p = s.p.data() + size_t(i) * S_;
          float* r = s.dp.data() + size_t(i) * S_;
          double dot = 0.0;
          for (int j = 0; j < S_; ++j) dot += double(p[j]) * r[j];
          for (int j = 0; j < S_; ++j) r[j] = p[j] * float(r[j] - dot);
        }
        // dq = scale dS K;  dK += scale dS^T q
        sgemm(false, n_, hd_, S_, scale, s.dp.data(), S_, kg, kvd_, 0.0f,
              dq.data() + size_t(h) * hd_, qd_);
        transpose(s.dp.data(), n_, S_, s.dst.data());
        sgemm(false, S_, hd_, n_, scale, s.dst.data(), n_, qh, qd_, 1.0f,
              gk.data() + size_t(g) * hd_, kvd_);
      }
    }
    // Back through RoPE: the inverse rotation at each row's position.
    rope.apply_inverse(dq.data(), n_, nh_, a_.pos0);
    int row = 0;
    for (const PosRange& r : a_.cached) {
      rope.apply_inverse(gk.data() + size_t(row) * kvd_, r.size(), nkv_, r.begin);
      row += r.size();
    }
    rope.apply_inverse(gk.data() + size_t(n_cached_) * kvd_, n_, nkv_, a_.pos0);
    // The fresh rows' q, k, v came from h1 = rmsnorm(x) (q and k through their per-head
    // norms first, if any; gk stays the normed K's gradient, which the sink receives).
    const float* gk_fresh = gk.data() + size_t(n_cached_) * kvd_;
    std::vector<float> dk_raw;
    if (!W.q_norm.empty()) {
      std::vector<float> dq_raw(dq.size(), 0.0f);
      dk_raw.assign(size_t(n_) * kvd_, 0.0f);
      rmsnorm_backward(st.q_raw.data(), n_ * nh_, hd_, W.q_norm.data(), c_.rms_eps, dq.data(),
                       dq_raw.data());
      rmsnorm_backward(st.k_raw.data(), n_ * nkv_, hd_, W.k_norm.data(), c_.rms_eps, gk_fresh,
                       dk_raw.data());
      dq.swap(dq_raw);
      gk_fresh = dk_raw.data();
    }
    std::vector<float> dh1(size_t(n_) * d_);
    linear_backward_input(dq.data(), n_, W.q, dh1.data(), false);
    linear_backward_input(gk_fresh, n_, W.k, dh1.data(), true);
    linear_backward_input(gv.data() + size_t(n_cached_) * kvd_, n_, W.v, dh1.data(), true);
    rmsnorm_backward(x, n_, d_, W.attn_norm.data(), c_.rms_eps, dh1.data(), dx.data());
  }

  const Model& m_;
  const ModelConfig& c_;
  const ForwardArgs& a_;
  const std::optional<KvPerturbation>& pert_;
  ComputeDType dt_;
  int n_, d_, hd_, nh_, nkv_, kvd_, qd_;
  // LLaDA-MoE layers' forward; its routing of the last layer run feeds that layer's backward.
  MoeRunner moe_;
  std::vector<int> pos_;
  int n_cached_ = 0, S_ = 0;
};

}  // namespace

double kv_loss_gradient(const Model& m, const ForwardArgs& a, std::span<const LossTerm> terms,
                        const KvGradSink& sink, const std::optional<KvPerturbation>& perturb) {
  if (a.ids.empty()) fail("internal: kv_loss_gradient of an empty forward");
  Backprop bp(m, a, perturb);
  return bp.run(terms, sink);
}

}  // namespace dllmq
