#include "calib/trace_calibrator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "calib/fisher.h"
#include "util/error.h"

namespace dllmq {

namespace {

// Reads one layer from the low-bit store and every other layer from the decoder's store: the
// cache of a step with exactly one layer quantized (output-level sensitivity).
class OneLayerQuantStore final : public KvStore {
 public:
  OneLayerQuantStore(const KvStore& exact, const KvStore& quant, int layer)
      : exact_(exact), quant_(quant), layer_(layer) {}
  void reset(int) override {}
  void write(int, int, int, const float*, const float*) override {
    fail("internal: the sensitivity probe never writes");
  }
  KvRows read(int layer, int g, int p0, int n, float* ks, float* vs) const override {
    return (layer == layer_ ? quant_ : exact_).read(layer, g, p0, n, ks, vs);
  }
  int max_tile() const override { return KvRowSource::kDequantTile; }
  KvBytes held() const override { return exact_.held(); }
  size_t bytes_fp16() const override { return exact_.bytes_fp16(); }
  std::string method() const override { return "probe"; }
  std::string name() const override { return "probe"; }
  int bits_k() const override { return quant_.bits_k(); }
  int bits_v() const override { return quant_.bits_v(); }

 private:
  const KvStore& exact_;
  const KvStore& quant_;
  int layer_;
};

void log_softmax(const float* x, int n, std::vector<double>& out) {
  double m = -std::numeric_limits<double>::infinity();
  for (int i = 0; i < n; ++i) m = std::max(m, double(x[i]));
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += std::exp(double(x[i]) - m);
  const double ls = m + std::log(s);
  out.resize(n);
  for (int i = 0; i < n; ++i) out[i] = double(x[i]) - ls;
}

// The reveal set a step would choose among `conf` (threshold rule, else the top candidate).
std::vector<int> reveal_set(const std::vector<double>& conf, std::optional<double> tau) {
  std::vector<int> s;
  if (conf.empty()) return s;
  const int top = int(std::max_element(conf.begin(), conf.end()) - conf.begin());
  s.push_back(top);
  if (tau)
    for (int i = 0; i < int(conf.size()); ++i)
      if (i != top && conf[i] >= *tau) s.push_back(i);
  std::sort(s.begin(), s.end());
  return s;
}

}  // namespace

ScoreWeight parse_score_weight(const std::string& s) {
  if (s == "none") return ScoreWeight::kNone;
  if (s == "attention") return ScoreWeight::kAttention;
  if (s == "fisher") return ScoreWeight::kFisher;
  fail("--score-weight {}: expected none, attention or fisher", s);
}

const char* score_weight_name(ScoreWeight w) {
  switch (w) {
    case ScoreWeight::kAttention:
      return "attention";
    case ScoreWeight::kFisher:
      return "fisher";
    default:
      return "none";
  }
}

const char* region_name(int r) {
  static const char* kNames[] = {"prompt", "decoded_prefix", "active_block", "masked_suffix"};
  return r >= 0 && r < kNumRegions ? kNames[r] : "?";
}

TraceCalibrator::TraceCalibrator(const ModelConfig& cfg, const RopeTable& rope,
                                 TraceCalibOptions opt)
    : cfg_(cfg), rope_(rope), opt_(std::move(opt)), kvd_(cfg.kv_dim()), hd_(cfg.head_dim) {
  if (opt_.method != "kvquant" && opt_.method != "dllm-kvq" && opt_.method != "observe")
    fail("--method {}: expected kvquant or dllm-kvq", opt_.method);
  if (!(opt_.budget >= 0.0 && opt_.budget <= 1.0))
    fail("--budget {}: accepted range is [0, 1]", opt_.budget);
  if (!(opt_.floor >= 0.0 && opt_.floor <= 1.0) || !(opt_.cap >= 1.0))
    fail("--budget-floor {} / --budget-cap {}: floor in [0, 1], cap >= 1", opt_.floor, opt_.cap);
  const int L = cfg.n_layers;
  regions_.resize(L);
  for (auto& per : regions_)
    for (auto& r : per) {
      r.k_min.assign(kvd_, std::numeric_limits<float>::infinity());
      r.v_min.assign(kvd_, std::numeric_limits<float>::infinity());
      r.k_max.assign(kvd_, -std::numeric_limits<float>::infinity());
      r.v_max.assign(kvd_, -std::numeric_limits<float>::infinity());
    }
  shadow_k_.resize(L);
  shadow_v_.resize(L);
  if (opt_.method == "kvquant") {
    opt_.kvq.fisher = opt_.fisher;
    kvq_ = std::make_unique<KvQuantCalibrator>(cfg, opt_.kvq);
  }
  if (opt_.method == "dllm-kvq") {
    KiviConfig kc;
    kc.bits_k = opt_.bits_k;
    kc.bits_v = opt_.bits_v;
    kc.group = opt_.group;
    const KvGeometry geo{L, cfg.n_kv_heads, hd_};
    if (opt_.base_codec)
      kivi_ = std::make_unique<KvQuantKvStore>(geo, *opt_.base_codec, rope_);
    else
      kivi_ = std::make_unique<KiviKvStore>(geo, kc, rope_);
    err_.resize(L);
    score_sum_.assign(L, std::vector<double>(kvd_, 0.0));
    score_pairs_.assign(L, 0.0);
    sens_.resize(L);
    if (opt_.score_weight == ScoreWeight::kAttention) krot_.resize(L);
  }
}

TraceCalibrator::~TraceCalibrator() = default;

void TraceCalibrator::begin_pair(int canvas_len, int prompt_len,
                                 const std::vector<int32_t>& target) {
  ++pair_;
  N_ = canvas_len;
  P_ = prompt_len;
  target_ = target;
  canvas_.assign(N_, cfg_.mask_id);
  for (int l = 0; l < cfg_.n_layers; ++l) {
    shadow_k_[l].assign(size_t(N_) * kvd_, 0.0f);
    shadow_v_[l].assign(size_t(N_) * kvd_, 0.0f);
  }
  if (kivi_) {
    kivi_->reset(N_);
    for (auto& e : err_) e.assign(size_t(N_) * kvd_, 0.0f);
  }
  for (auto& k : krot_) k.assign(size_t(N_) * kvd_, 0.0f);
}

int TraceCalibrator::region_of(int pos) const {
  if (pos < P_) return kPromptRegion;
  if (active_.empty() || pos < active_.begin) return kPrefixRegion;
  if (pos < active_.end) return kActiveRegion;
  return kSuffixRegion;
}

void TraceCalibrator::on_forward(const ForwardArgs& a) {
  if (a.pos0 + int(a.ids.size()) > N_) fail("internal: TRACE forward past the canvas");
  active_ = a.active;
  write_ = a.store ? a.write : PosRange{};
  cached_ = a.cached;
  store_ = a.store;
  std::copy(a.ids.begin(), a.ids.end(), canvas_.begin() + a.pos0);
  if (dump_) dump_->forward(a);
}

void TraceCalibrator::observe_row(int layer, int pos, const float* k, const float* v, bool fresh) {
  const int region = region_of(pos);
  if (dump_) {
    d_pos_.push_back(pos);
    d_region_.push_back(region);
    d_fresh_.push_back(fresh);
    d_k_.insert(d_k_.end(), k, k + kvd_);
    d_v_.insert(d_v_.end(), v, v + kvd_);
  }
  RegionStats& r = regions_[layer][region];
  ++r.rows;
  for (int c = 0; c < kvd_; ++c) {
    r.k_min[c] = std::min(r.k_min[c], k[c]);
    r.k_max[c] = std::max(r.k_max[c], k[c]);
    r.v_min[c] = std::min(r.v_min[c], v[c]);
    r.v_max[c] = std::max(r.v_max[c], v[c]);
  }
  if (kvq_ && !opt_.fisher) kvq_->add_row(layer, pos, k, v);  // Fisher: after the backward
  if (layer == 0) ++rows_observed_;
}

void TraceCalibrator::on_kv(int layer, int pos0, int n, const float* k_pre, const float* v) {
  // The rows this forward reads: cached rows as the store holds them, then the fresh rows.
  d_pos_.clear(), d_region_.clear(), d_fresh_.clear(), d_k_.clear(), d_v_.clear();
  for (const PosRange& r : cached_)
    for (int p = r.begin; p < r.end; ++p)
      observe_row(layer, p, shadow_k_[layer].data() + size_t(p) * kvd_,
                  shadow_v_[layer].data() + size_t(p) * kvd_, false);
  for (int i = 0; i < n; ++i)
    observe_row(layer, pos0 + i, k_pre + size_t(i) * kvd_, v + size_t(i) * kvd_, true);
  if (dump_) dump_->rows(layer, d_pos_, d_region_, d_fresh_, d_k_, d_v_, kvd_);
  if (!krot_.empty()) {  // the fresh keys as attention sees them (rotated like the model does)
    float* kr = krot_[layer].data() + size_t(pos0) * kvd_;
    std::copy_n(k_pre, size_t(n) * kvd_, kr);
    rope_.apply(kr, n, cfg_.n_kv_heads, pos0);
  }
  if (write_.empty()) return;
  // A refresh: the store now holds these rows; so do the shadow and the low-bit store.
  const size_t off = size_t(write_.begin - pos0) * kvd_;
  std::copy_n(k_pre + off, size_t(write_.size()) * kvd_,
              shadow_k_[layer].begin() + size_t(write_.begin) * kvd_);
  std::copy_n(v + off, size_t(write_.size()) * kvd_,
              shadow_v_[layer].begin() + size_t(write_.begin) * kvd_);
  if (!kivi_) return;
  kivi_->write(layer, write_.begin, write_.size(), k_pre + off, v + off);
  // Post-RoPE K error of the low-bit store on the written rows (the store's K is post-RoPE).
  const int n_w = write_.size();
  std::vector<float> ek(size_t(n_w) * hd_), ev(ek.size()), qk(ek.size()), qv(ek.size());
  for (int g = 0; g < cfg_.n_kv_heads; ++g) {
    const KvRows ex = store_->read(layer, g, write_.begin, n_w, ek.data(), ev.data());
    const KvRows lo = kivi_->read(layer, g, write_.begin, n_w, qk.data(), qv.data());
    for (int i = 0; i < n_w; ++i)
      for (int c = 0; c < hd_; ++c) {
        const size_t at = size_t(write_.begin + i) * kvd_ + size_t(g) * hd_ + c;
        err_[layer][at] = ex.k[size_t(i) * ex.ld + c] - lo.k[size_t(i) * lo.ld + c];
        // Later steps attend to these rows as the store hands them out.
        if (!krot_.empty()) krot_[layer][at] = ex.k[size_t(i) * ex.ld + c];
      }
  }
}

void TraceCalibrator::attention_probs(int layer, const float* qh, int g, int pos0, int n,
                                      std::vector<double>& p) const {
  p.clear();
  const double scale = 1.0 / std::sqrt(double(hd_));
  auto logit = [&](int pos) {
    const float* k = krot_[layer].data() + size_t(pos) * kvd_ + size_t(g) * hd_;
    double s = 0.0;
    for (int c = 0; c < hd_; ++c) s += double(qh[c]) * k[c];
    return s * scale;
  };
  for (const PosRange& r : cached_)
    for (int pos = r.begin; pos < r.end; ++pos) p.push_back(logit(pos));
  for (int i = 0; i < n; ++i) p.push_back(logit(pos0 + i));
  const double m = *std::max_element(p.begin(), p.end());
  double sum = 0.0;
  for (double& x : p) sum += (x = std::exp(x - m));
  for (double& x : p) x /= sum;
}

void TraceCalibrator::on_query(int layer, int pos0, int n, const float* q_rot) {
  const int a0 = std::max(active_.begin, pos0), a1 = std::min(active_.end, pos0 + n);
  const int qd_all = cfg_.n_heads * hd_;
  if (dump_ && a1 > a0)
    dump_->queries(layer, a0, a1 - a0, q_rot + size_t(a0 - pos0) * qd_all, qd_all);
  if (!kivi_ || cached_.empty()) return;  // only cached steps read quantized rows
  if (a1 <= a0 || opt_.score_weight == ScoreWeight::kFisher) return;
  const int rep = cfg_.n_heads / cfg_.n_kv_heads, qd = cfg_.n_heads * hd_;
  std::vector<double>& sum = score_sum_[layer];
  int64_t n_cached = 0;
  for (const PosRange& r : cached_) n_cached += r.size();
  const bool weighted = !krot_.empty();
  std::vector<double> prob;
  for (int qi = a0; qi < a1; ++qi) {
    const float* q = q_rot + size_t(qi - pos0) * qd;
    for (int h = 0; h < cfg_.n_heads; ++h) {
      const int g = h / rep;
      const float* qh = q + size_t(h) * hd_;
      double* sg = sum.data() + size_t(g) * hd_;
      if (weighted) attention_probs(layer, qh, g, pos0, n, prob);
      int j = 0;  // index of the cached row among the rows read (cached rows come first)
      for (const PosRange& r : cached_)
        for (int p = r.begin; p < r.end; ++p, ++j) {
          const double w = weighted ? prob[j] : 1.0;
          const float* e = err_[layer].data() + size_t(p) * kvd_ + size_t(g) * hd_;
          for (int c = 0; c < hd_; ++c) {
            const double t = double(qh[c]) * e[c];
            sg[c] += w * t * t;
          }
        }
    }
  }
  // Unweighted: the mean over (query, head, cached row). Weighted: per (query, head), the
  // attention-weighted sum over the cached rows, averaged over (query, head).
  score_pairs_[layer] += double(a1 - a0) * rep * (weighted ? 1.0 : double(n_cached));
}

void TraceCalibrator::fisher_step(const Model& m, const ForwardArgs& f) {
  const std::vector<LossTerm> terms = diffusion_loss_terms(cfg_, f, canvas_, P_, target_);
  const bool scores = kivi_ && opt_.score_weight == ScoreWeight::kFisher && !f.cached.empty();
  std::vector<float> k2(kvd_), v2(kvd_), g(kvd_);
  const double loss = kv_loss_gradient(m, f, terms, [&](const LayerKvGrad& lg) {
    if (dump_) dump_->grads(true, lg);
    const int l = lg.layer, rows = int(lg.pos.size());
    for (int j = 0; j < rows; ++j) {
      const int pos = lg.pos[j];
      const float* gk = lg.gk + size_t(j) * kvd_;
      if (kvq_) {
        const bool cached = j < lg.n_cached;
        const size_t fresh = size_t(j - lg.n_cached) * kvd_;
        const float* k = cached ? shadow_k_[l].data() + size_t(pos) * kvd_ : lg.k_fresh + fresh;
        const float* v = cached ? shadow_v_[l].data() + size_t(pos) * kvd_ : lg.v_fresh + fresh;
        square_into(gk, kvd_, k2.data());
        square_into(lg.gv + size_t(j) * kvd_, kvd_, v2.data());
        kvq_->add_row(l, pos, k, v, k2.data(), v2.data());
      }
      if (scores && j < lg.n_cached) {
        // The store quantizes post-RoPE K: rotate the gradient like the key (R orthogonal).
        std::copy_n(gk, kvd_, g.data());
        rope_.apply(g.data(), 1, cfg_.n_kv_heads, pos);
        const float* e = err_[l].data() + size_t(pos) * kvd_;
        for (int c = 0; c < kvd_; ++c) {
          const double t = double(g[c]) * e[c];
          score_sum_[l][c] += t * t;
        }
      }
    }
  });
  if (scores)
    for (double& n : score_pairs_) n += 1.0;  // the mean over cached steps of the per-step sum
  if (dump_) dump_->fisher(true, f.ids, f.pos0, f.cached, terms, loss);
}

void TraceCalibrator::after_forward(Model& m, const ForwardArgs& f, const float* logits) {
  if (opt_.fisher || (kivi_ && opt_.score_weight == ScoreWeight::kFisher)) fisher_step(m, f);
  if (!kivi_ || !opt_.sensitivity || f.cached.empty() || f.logits.empty()) return;
  if (opt_.sensitivity_pairs > 0 && pair_ >= opt_.sensitivity_pairs) return;
  const int V = cfg_.vocab_size, shift = cfg_.logits_shift, nl = f.logits.size();
  // Candidate rows: raw rows predicting a masked position of the active block.
  std::vector<int> rows, pos;
  for (int r = f.logits.begin; r < f.logits.end; ++r) {
    const int p = r + shift;
    if (p < f.active.begin || p >= f.active.end || p - f.pos0 >= int(f.ids.size())) continue;
    if (f.ids[p - f.pos0] != cfg_.mask_id) continue;
    rows.push_back(r - f.logits.begin);
    pos.push_back(p);
  }
  if (rows.empty()) return;
  std::vector<std::vector<double>> ref(rows.size());
  std::vector<double> conf_ref(rows.size()), conf_q(rows.size()), lq;
  for (size_t i = 0; i < rows.size(); ++i) {
    log_softmax(logits + size_t(rows[i]) * V, V, ref[i]);
    conf_ref[i] = std::exp(ref[i][target_[pos[i] - P_]]);
  }
  const std::vector<int> chosen = reveal_set(conf_ref, opt_.threshold);
  std::vector<float> buf(size_t(nl) * V);
  for (int l = 0; l < cfg_.n_layers; ++l) {
    OneLayerQuantStore mix(*f.store, *kivi_, l);
    ForwardArgs g = f;
    g.store = &mix;
    g.observer = nullptr;
    m.forward(g, buf.data());
    LayerSensitivity& s = sens_[l];
    for (size_t i = 0; i < rows.size(); ++i) {
      log_softmax(buf.data() + size_t(rows[i]) * V, V, lq);
      double kl = 0.0;
      for (int t = 0; t < V; ++t) kl += std::exp(ref[i][t]) * (ref[i][t] - lq[t]);
      s.kl_sum += std::max(kl, 0.0);
      ++s.kl_rows;
      conf_q[i] = std::exp(lq[target_[pos[i] - P_]]);
    }
    s.changed += reveal_set(conf_q, opt_.threshold) != chosen;
    ++s.steps;
  }
}

std::vector<std::vector<double>> TraceCalibrator::channel_scores() const {
  std::vector<std::vector<double>> out(score_sum_.size());
  for (size_t l = 0; l < out.size(); ++l) {
    out[l] = score_sum_[l];
    if (score_pairs_[l] > 0)
      for (double& x : out[l]) x /= score_pairs_[l];
  }
  return out;
}

CalibArtifact TraceCalibrator::finish() const {
  if (kvq_) return kvq_->finish();
  const int L = cfg_.n_layers;
  CalibArtifact a;
  a.method = "dllm-kvq";
  a.fisher = opt_.score_weight == ScoreWeight::kFisher ? "diffusion" : "none";
  a.bits_k = opt_.bits_k;
  a.bits_v = opt_.bits_v;
  a.sink = 0;
  a.outlier_percent = 0.0;
  // Budget split: shares follow the mean active-block KL of quantizing each layer alone,
  // clamped to [floor, cap] x the uniform share and scaled to the total (bisection on the scale).
  const double total = std::round(opt_.budget * L * kvd_);
  const double u = total / L;
  std::vector<double> w(L);
  double wsum = 0.0;
  for (int l = 0; l < L; ++l) {
    w[l] = sens_[l].mean_kl();
    if (!std::isfinite(w[l]) || w[l] < 0.0) fail("calibrate: layer {} sensitivity is {}", l, w[l]);
    wsum += w[l];
  }
  if (!(wsum > 0.0)) std::fill(w.begin(), w.end(), 1.0), wsum = L;
  auto shares = [&](double alpha) {
    std::vector<double> s(L);
    for (int l = 0; l < L; ++l)
      s[l] = std::clamp(alpha * total * w[l] / wsum, opt_.floor * u,
                        std::min(opt_.cap * u, double(kvd_)));
    return s;
  };
  const auto sum_at = [&](double alpha) {
    const std::vector<double> s = shares(alpha);
    return std::accumulate(s.begin(), s.end(), 0.0);
  };
  double lo = 0.0, hi = 1.0;
  while (sum_at(hi) < total && hi < 1e9) hi *= 2;
  for (int it = 0; it < 100; ++it) {
    const double mid = (lo + hi) / 2;
    (sum_at(mid) < total ? lo : hi) = mid;
  }
  const auto share = shares(hi);
  // Round, then hand out what rounding lost (or took) by largest remainder.
  std::vector<int> n(L);
  int assigned = 0;
  for (int l = 0; l < L; ++l) assigned += (n[l] = std::clamp(int(std::floor(share[l])), 0, kvd_));
  std::vector<int> order(L);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
    return share[x] - std::floor(share[x]) > share[y] - std::floor(share[y]);
  });
  for (int i = 0; assigned < int(total) && i < 4 * L; ++i) {
    const int l = order[i % L];
    if (n[l] < kvd_) ++n[l], ++assigned;
  }
  const auto scores = channel_scores();
  std::string kl_list, changed_list, share_list;
  for (int l = 0; l < L; ++l) {
    CalibLayer cl;
    std::vector<int> idx(kvd_);
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(),
                     [&](int x, int y) { return scores[l][x] > scores[l][y]; });
    cl.k_fp16_channels.assign(idx.begin(), idx.begin() + n[l]);
    std::sort(cl.k_fp16_channels.begin(), cl.k_fp16_channels.end());
    cl.k_channel_scores.assign(scores[l].begin(), scores[l].end());
    a.layers.push_back(std::move(cl));
    kl_list += fmt::format("{}{:.6g}", l ? "," : "", sens_[l].mean_kl());
    changed_list += fmt::format("{}{}/{}", l ? "," : "", sens_[l].changed, sens_[l].steps);
    share_list += fmt::format("{}{}", l ? "," : "", n[l]);
  }
  a.extra["kv_group"] = std::to_string(opt_.group);
  if (opt_.base_codec) a.extra["kv_base"] = "kvquant";
  a.extra["budget"] = fmt::format("{}", opt_.budget);
  a.extra["budget_floor"] = fmt::format("{}", opt_.floor);
  a.extra["budget_cap"] = fmt::format("{}", opt_.cap);
  a.extra["layer_kl"] = kl_list;
  a.extra["layer_changed_decisions"] = changed_list;
  a.extra["layer_fp16_channels"] = share_list;
  a.extra["score"] =
      opt_.score_weight == ScoreWeight::kAttention
          ? "E[(q_c (k_c - kivi(k_c)))^2], weighted by attention probability"
      : opt_.score_weight == ScoreWeight::kFisher
          ? "E_step[sum_rows (g_c (k_c - kivi(k_c)))^2], g = d loss / d K (post-RoPE)"
          : "E[(q_c (k_c - kivi(k_c)))^2], unweighted";
  a.extra["score_weight"] = score_weight_name(opt_.score_weight);
  return a;
}

}  // namespace dllmq
