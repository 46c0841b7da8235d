// The decode loop. Samplers follow the reference functions exactly (see
// shared reference dllm-models-and-fast-dllm.md §2.5, §3, §4 and tools/ref_decode.py):
//   LLaDA, any cache mode ........ block driver (none = LLaDA generate, prefix/dual = Fast-dLLM)
//   Dream, --cache none ........... Dream's whole-canvas sampler (or Fast-dLLM's global threshold)
//   Dream, --cache prefix|dual .... Fast-dLLM's Dream block mode
#include "decode/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <random>

#include "decode/cache_trace.h"
#include "decode/options.h"
#include "decode/transfer_schedule.h"
#include "decode/unmask_policy.h"
#include "util/error.h"
#include "util/finite_scan.h"
#include "util/memory.h"
#include "util/parallel_for.h"

namespace dllmq {

namespace {

// Logits values below which the proposals of a step stay on one thread (a parallel region costs
// about a microsecond; a row of 4,096 values about ten).
constexpr double kParallelSoftmaxValues = 16384;

struct Candidate {
  int pos;
  Proposal p;
};

// Descending confidence, ties to the lower position (a stable top-k).
void rank_candidates(std::vector<Candidate>& c) {
  std::stable_sort(c.begin(), c.end(),
                   [](const Candidate& a, const Candidate& b) { return a.p.conf > b.p.conf; });
}

enum class Rule { kQuota, kThreshold, kFactor };

class Decoder {
 public:
  Decoder(Model& m, std::span<const int32_t> prompt, const GenerateOptions& opt,
          const StepCallback& cb)
      : m_(m),
        cfg_(m.config()),
        opt_(opt),
        cb_(cb),
        rng_(opt.seed),
        eot_(cfg_.eot_id >= 0 ? cfg_.eot_id : opt.eot_id),
        policy_(resolved_alg(opt, m.config().arch), opt, cfg_.eos_id, eot_, rng_) {
    P_ = static_cast<int>(prompt.size());
    N_ = P_ + opt.gen_length;
    x_.assign(prompt.begin(), prompt.end());
    x_.resize(N_, cfg_.mask_id);
    m_.reserve_positions(N_);
    rule_ = opt.threshold ? Rule::kThreshold : opt.factor ? Rule::kFactor : Rule::kQuota;
    if (opt.cache != CacheMode::kNone) {
      store_ = make_kv_store(opt.kv, {cfg_.n_layers, cfg_.n_kv_heads, cfg_.head_dim}, m_.rope(),
                             m_.fingerprint());
      store_->reset(N_);
    }
    if (!opt.trace_cache.empty())
      tracer_ = std::make_unique<CacheTracer>(opt.trace_cache, m_.config());
    if (opt.teacher) {
      if (int(opt.teacher->target.size()) != opt.gen_length)
        fail("teacher forcing: {} target ids for gen length {}", opt.teacher->target.size(),
             opt.gen_length);
      teacher_ = &*opt.teacher;
    }
  }

  GenerateResult run() {
    const auto t0 = std::chrono::steady_clock::now();
    if (!uses_block_driver(opt_, cfg_.arch)) {
      if (opt_.threshold || opt_.factor)
        dream_global_threshold();
      else
        dream_whole_canvas();
    } else {
      block_driver();
    }
    if (tracer_) tracer_->close();
    GenerateResult r;
    r.tokens.assign(x_.begin() + P_, x_.end());
    r.nfe = nfe_;
    r.steps = steps_;
    r.time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.kv_bytes = kv_peak_.total();
    r.kv_bytes_k = kv_peak_.k;
    r.kv_bytes_v = kv_peak_.v;
    r.kv_bytes_fp16 = kv_peak_fp16_;
    r.kv_store = store_ ? store_->name() : "none";
    r.kv_method = store_ ? store_->method() : "none";
    r.kv_bits_k = store_ ? store_->bits_k() : 0;
    r.kv_bits_v = store_ ? store_->bits_v() : 0;
    r.flops = flops_;
    return r;
  }

 private:
  // Every forward of the decoder: Model::forward, or the batching runner when one is given.
  void run_forward(const ForwardArgs& f, float* out) {
    flops_ += m_.forward_flops(f);
    if (opt_.runner)
      opt_.runner->forward(f, out);
    else
      m_.forward(f, out);
  }

  // Logits rows for canvas positions [first, last): the raw row predicting each position.
  float* logits_for(int n_rows) {
    const size_t want = size_t(n_rows) * cfg_.vocab_size;
    if (logits_.size() < want) logits_.resize(want);
    return logits_.data();
  }

  // Raw row r predicts canvas position r + shift; rows needed for positions [a, b).
  PosRange raw_rows(int a, int b) const {
    return {std::max(a - cfg_.logits_shift, 0), std::max(b - cfg_.logits_shift, 0)};
  }

  // Full forward over the canvas; store rows `write` when caching. Returns logits for
  // positions [a, b) (row i predicts position a + i).
  const float* full_forward(int a, int b, PosRange write) {
    ForwardArgs f;
    f.ids = x_;
    f.pos0 = 0;
    f.store = store_.get();
    f.write = write;
    f.logits = raw_rows(a, b);
    f.logit_rows = masked_rows(f.logits);
    f.active = {a, b};
    f.observer = opt_.observer;
    float* out = logits_for(f.logits.size());
    run_forward(f, out);
    check_logits(out, f);
    ++nfe_;
    note_kv();
    if (opt_.probe) opt_.probe->after_forward(m_, f, out);
    return out;
  }

  // Cached forward of canvas rows [q0, q1) attending to stored `cached` rows; returns the raw
  // logits rows `rows` (canvas rows inside [q0, q1)).
  const float* cached_forward(int q0, int q1, std::vector<PosRange> cached, PosRange rows,
                              int block) {
    ForwardArgs f;
    f.ids = std::span<const int32_t>(x_).subspan(q0, q1 - q0);
    f.pos0 = q0;
    f.store = store_.get();
    f.cached = cached;
    f.logits = rows;
    f.logit_rows = masked_rows(rows);
    f.active = active_;
    if (tracer_ && opt_.observer) fail("--trace-cache and a calibration observer are exclusive");
    f.observer = tracer_ ? tracer_->cached_observer() : opt_.observer;
    float* out = logits_for(f.logits.size());
    run_forward(f, out);
    check_logits(out, f);
    ++nfe_;
    if (opt_.probe) opt_.probe->after_forward(m_, f, out);
    if (tracer_) tracer_->finish_step(m_, x_, *store_, cached, q0, q1, block, steps_, nfe_);
    return out;
  }

  // The offsets in `rows` of the raw rows whose positions are still masked: the only rows the
  // proposals read (propose: position p reads row p - a), so the LM head skips the others
  // (ForwardArgs::logit_rows; up to half of its work over a block's steps). Only where a row
  // predicts its own position (no logits shift: LLaDA) and no probe reads every row; empty
  // (every row) otherwise or when every row is masked.
  std::vector<int> masked_rows(PosRange rows) const {
    std::vector<int> r;
    if (cfg_.logits_shift != 0 || opt_.probe) return r;
    for (int p = rows.begin; p < rows.end; ++p)
      if (x_[p] == cfg_.mask_id) r.push_back(p - rows.begin);
    if (static_cast<int>(r.size()) == rows.size()) r.clear();
    return r;
  }

  // check_logits over the rows the forward computed.
  void check_logits(const float* p, const ForwardArgs& f) const {
    if (f.logit_rows.empty()) return check_logits(p, f.logits.size());
    check_rows(p, f.logit_rows);
  }

  void check_logits(const float* p, int rows) const {
    std::vector<int> all(rows);
    std::iota(all.begin(), all.end(), 0);
    check_rows(p, all);
  }

  // Non-finite logits (NaN or inf in the checkpoint's weights, an overflow) would make every
  // ranking garbage while decoding went on and exited 0; stop with an error instead, naming the
  // first bad row. One vectorised pass over the rows (util/finite_scan.h), on the threads when
  // there are enough values: on one thread it held the sampling phase under 1.85 cores.
  void check_rows(const float* p, const std::vector<int>& rows) const {
    const size_t V = cfg_.vocab_size;
    std::vector<size_t> bad(rows.size());
    for_each_item(rows.size(), double(V) * rows.size() >= kParallelSoftmaxValues,
                  [&](size_t i) { bad[i] = first_non_finite(p + size_t(rows[i]) * V, V); });
    for (size_t i = 0; i < rows.size(); ++i)
      if (bad[i] < V)
        fail(
            "{}: the model produced a non-finite logit ({} at row {}, token {}) in forward {}; "
            "its weights or config.json hold values that do not compute (NaN/inf weights, an "
            "extreme rope_theta or rms_norm_eps?)",
            m_.dir(), p[size_t(rows[i]) * V + bad[i]], rows[i], bad[i], nfe_ + 1);
  }

  void note_kv() {
    if (!store_) return;
    // One snapshot at the peak: bytes held and the fp16 size of the same rows belong together
    // (a refresh can complete a K group and shrink its full-precision tail, so the peak of the
    // bytes held need not be where the most rows are held).
    const KvBytes b = store_->held();
    if (b.total() >= kv_peak_.total()) {
      kv_peak_ = b;
      kv_peak_fp16_ = store_->bytes_fp16();
    }
  }

  int masks_in(int s, int e) const {
    int m = 0;
    for (int p = s; p < e; ++p) m += x_[p] == cfg_.mask_id;
    return m;
  }

  // A reveal writes the argmax, which can be the mask id itself (a checkpoint whose LM head does
  // not rule the mask token out: random ones), so a step can leave its block as it was. Upstream
  // Fast-dLLM then steps on: under the step quota it stops with an IndexError once the block's
  // steps are spent (num_transfer_tokens[:, i]); under a threshold at temperature 0 the next
  // forward sees the same canvas and repeats the step forever, and so did dllmq under both. Stop
  // with an error naming the cause instead. (Dream's block mode ends a block after its steps,
  // masks kept, as upstream does: dream_block.) `masks_before`: the block's masks before the step.
  // Returns the masks left, the next step's `masks_before`.
  int check_progress(int block, int s, int e, int step, int spb, int masks_before) {
    const int left = masks_in(s, e);
    if (left == 0) return 0;
    stalled_ = left < masks_before ? 0 : stalled_ + 1;
    const bool quota_spent = rule_ == Rule::kQuota && step + 1 >= spb;
    const bool stuck = rule_ != Rule::kQuota && stalled_ > 0 &&
                       (opt_.temperature <= 0.0 || stalled_ >= kMaxStalledSteps);
    if (!quota_spent && !stuck) return left;
    fail(
        "{}: block {} still holds {} masked position(s) after {} step(s){}: the model's most "
        "likely token there is the mask token (id {}) itself, which reveals nothing (a "
        "checkpoint whose LM head never ranks the mask first decodes; upstream Fast-dLLM stops "
        "here with an IndexError, or under a threshold repeats the step forever)",
        m_.dir(), block, left, step + 1,
        quota_spent ? fmt::format(", all {} of its --steps share", spb)
                    : fmt::format(", the last {} without revealing anything", stalled_),
        cfg_.mask_id);
  }

  // Proposals for the masked positions of [s, e) from logits rows (row i -> position a + i).
  // Rows without random draws go to the threads: each is a float64 softmax over the vocabulary
  // (32 rows x 32,000 per dual-cache step, a quarter of a step's time on one core), independent
  // of the others, so the split changes no bits.
  std::vector<Candidate> propose(int s, int e, const float* lg, int a, bool dream, RankAlg alg) {
    std::vector<Candidate> c;
    const int V = cfg_.vocab_size;
    for (int p = s; p < e; ++p)
      if (x_[p] == cfg_.mask_id) c.push_back({p, {}});
    const int n = static_cast<int>(c.size());
    const bool spread = !teacher_ && !policy_.draws(dream ? alg : policy_.alg()) && n > 1 &&
                        double(V) * n >= kParallelSoftmaxValues;
#pragma omp parallel for schedule(static) if (spread)
    for (int i = 0; i < n; ++i) {
      const int p = c[i].pos;
      const float* row = lg + size_t(p - a) * V;
      c[i].p = teacher_ ? teach(row, p)
               : dream  ? policy_.dream(row, V, alg)
                        : policy_.llada(row, V);
    }
    return c;
  }

  // Dream window of a cached forward starting at s: position p uses raw row p-1, and position s
  // (committed at refresh unless its argmax was the mask id) copies raw row s, as upstream's shift.
  // `w` holds raw rows starting at s.
  std::vector<Candidate> propose_window(int s, int e, const float* w, RankAlg alg) {
    std::vector<Candidate> c;
    const int V = cfg_.vocab_size;
    for (int p = s; p < e; ++p) {
      if (x_[p] != cfg_.mask_id) continue;
      const float* row = w + size_t(std::max(p - 1, s) - s) * V;
      c.push_back({p, teacher_ ? teach(row, p) : policy_.dream(row, V, alg)});
    }
    return c;
  }

  Proposal teach(const float* row, int p) {
    const TeacherPick t =
        teacher_proposal(row, cfg_.vocab_size, teacher_->target[p - P_], teacher_->rank, rng_);
    Proposal out;
    out.token = t.token;
    out.conf = t.conf;
    return out;
  }

  int rule_count(const std::vector<Candidate>& c, int quota) const {
    std::vector<double> sorted(c.size());
    for (size_t i = 0; i < c.size(); ++i) sorted[i] = c[i].p.conf;
    switch (rule_) {
      case Rule::kQuota:
        return std::min<int>(quota, static_cast<int>(c.size()));
      case Rule::kThreshold:
        return threshold_count(sorted, *opt_.threshold);
      case Rule::kFactor:
        return factor_count(sorted, *opt_.factor);
    }
    return 0;
  }

  // Reveals the first `k` ranked candidates and reports the step.
  void reveal(const std::vector<Candidate>& ranked, int k, int block) {
    revealed_.clear();
    for (int i = 0; i < k && i < int(ranked.size()); ++i) {
      x_[ranked[i].pos] = ranked[i].p.token;
      revealed_.push_back(ranked[i].pos);
    }
    report(block);
  }

  void report(int block) {
    if (cb_) cb_({x_, revealed_, block, steps_, P_, store_.get()});
    ++steps_;
  }

  // --- LLaDA block driver (also Fast-dLLM's Dream block mode) ------------------------------
  // (check_generate_options made sure the blocks and steps divide evenly.)
  void block_driver() {
    const int nb = opt_.gen_length / opt_.block_length, spb = opt_.steps / nb;
    const bool dream = cfg_.arch == Arch::kDream;
    const auto ts = dream_timesteps(spb, opt_.eps);
    for (int b = 0; b < nb; ++b) {
      const int s = P_ + b * opt_.block_length, e = s + opt_.block_length;
      active_ = {s, e};
      int masked = masks_in(s, e);
      const auto quota = num_transfer_tokens(masked, spb);
      stalled_ = 0;
      if (opt_.cache == CacheMode::kNone) {
        for (int j = 0; masked > 0; ++j) {
          const float* lg = opt_.cfg_scale > 0 ? cfg_forward(s, e) : full_forward(s, e, {});
          auto c = propose(s, e, lg, s, false, policy_.alg());
          rank_candidates(c);
          reveal(c, rule_count(c, j < spb ? quota[j] : 0), b);
          masked = check_progress(b, s, e, j, spb, masked);
        }
      } else {
        // Refresh: full forward that also decodes; dual caches every row, prefix [0, s).
        const PosRange write = opt_.cache == CacheMode::kDual ? PosRange{0, N_} : PosRange{0, s};
        if (!dream) {
          const float* lg = full_forward(s, e, write);
          auto c = propose(s, e, lg, s, false, policy_.alg());
          rank_candidates(c);
          reveal(c, rule_count(c, quota[0]), b);
          masked = check_progress(b, s, e, 0, spb, masked);
          for (int j = 1; masked > 0; ++j) {
            lg = step_forward(s, e, {s, e}, b);
            c = propose(s, e, lg, s, false, policy_.alg());
            rank_candidates(c);
            reveal(c, rule_count(c, j < spb ? quota[j] : 0), b);
            masked = check_progress(b, s, e, j, spb, masked);
          }
        } else {
          dream_block(b, s, e, spb, ts, write);
        }
      }
      if (opt_.early_stop && block_all_eos(s, e)) {
        std::fill(x_.begin() + e, x_.end(), cfg_.eos_id);
        break;
      }
    }
  }

  // In-block forward of the cache policy (prefix: block + whole suffix attend to [0, s);
  // dual: block rows attend to [0, s) and [e, N)); returns the raw logits rows `rows`.
  const float* step_forward(int s, int e, PosRange rows, int block) {
    if (opt_.cache == CacheMode::kPrefix) return cached_forward(s, N_, {{0, s}}, rows, block);
    return cached_forward(s, e, {{0, s}, {e, N_}}, rows, block);
  }

  bool block_all_eos(int s, int e) const {
    for (int p = s; p < e; ++p)
      if (x_[p] != cfg_.eos_id && x_[p] != eot_) return false;
    return true;
  }

  // LLaDA classifier-free guidance: un = canvas with the prompt masked;
  // logits = un + (cfg + 1)(cond - un). Upstream batches both rows into one call: one NFE.
  const float* cfg_forward(int s, int e) {
    const int V = cfg_.vocab_size, n = e - s;
    std::vector<float> cond(size_t(n) * V);
    ForwardArgs f;
    f.ids = x_;
    f.logits = {s, e};
    run_forward(f, cond.data());
    std::vector<int32_t> un(x_);
    std::fill(un.begin(), un.begin() + P_, cfg_.mask_id);
    f.ids = un;
    float* out = logits_for(n);
    run_forward(f, out);
    check_logits(cond.data(), n);  // each forward's own logits: the model's
    check_logits(out, n);
    const float w = static_cast<float>(opt_.cfg_scale + 1.0);
    for (size_t i = 0; i < size_t(n) * V; ++i) out[i] = out[i] + w * (cond[i] - out[i]);
    // The guidance's: name the scale, not the model.
    if (const size_t i = first_non_finite(out, size_t(n) * V); i < size_t(n) * V)
      fail(
          "--cfg-scale {}: the guided logit un + (scale + 1) (cond - un) overflows float at "
          "token {}; use a smaller scale",
          opt_.cfg_scale, i % V);
    ++nfe_;
    return out;
  }

  // Fast-dLLM's Dream block mode (generation_utils_block.py).
  void dream_block(int b, int s, int e, int spb, const std::vector<double>& ts, PosRange write) {
    // The refresh forward commits the argmax at s unconditionally (nothing else).
    const float* lg = full_forward(s, s + 1, write);
    const Proposal first =
        teacher_ ? teach(lg, s) : policy_.dream(lg, cfg_.vocab_size, RankAlg::kMaskgitPlus);
    x_[s] = first.token;
    revealed_.assign(1, s);
    report(b);
    // Then a do-while over cached forwards; inside the window position s+j uses raw row s+j-1.
    // `masked`: the block's masks before each step.
    int masked = masks_in(s, e);
    for (int i = 1;; ++i) {
      const float* w = step_forward(s, e, {s, std::max(e - 1, s + 1)}, b);  // raw rows [s, e-1)
      if (opt_.threshold || opt_.factor) {
        auto c = propose_window(s, e, w, RankAlg::kMaskgitPlus);
        rank_candidates(c);
        reveal(c, rule_count(c, 0), b);
        masked = check_progress(b, s, e, i, spb, masked);
      } else {
        if (i == spb) break;  // upstream breaks after the forward (counted), block may keep MASKs
        const int k = i < spb - 1 ? static_cast<int>(masked * (1.0 - ts[i + 1] / ts[i])) : masked;
        auto c = propose_window(s, e, w, RankAlg::kEntropy);  // upstream: entropy whatever --alg
        choose_and_reveal(c, k, b);
        masked = masks_in(s, e);
      }
      if (masked == 0) break;
    }
  }

  // Top-k by confidence, or (alg_temp > 0) k draws without replacement from softmax(conf /
  // alg_temp).
  void choose_and_reveal(std::vector<Candidate>& c, int k, int block) {
    k = std::min<int>(k, static_cast<int>(c.size()));
    if (k <= 0 || opt_.alg_temp <= 0.0) {
      rank_candidates(c);
      reveal(c, std::max(k, 0), block);
      return;
    }
    std::vector<Candidate> chosen;
    std::vector<double> w(c.size());
    double mx = -1e300;
    for (auto& x : c) mx = std::max(mx, x.p.conf / opt_.alg_temp);
    for (size_t i = 0; i < c.size(); ++i) w[i] = std::exp(c[i].p.conf / opt_.alg_temp - mx);
    for (int t = 0; t < k; ++t) {
      std::discrete_distribution<size_t> d(w.begin(), w.end());
      const size_t i = d(rng_);
      chosen.push_back(c[i]);
      w[i] = 0.0;
    }
    reveal(chosen, k, block);
  }

  // --- Dream's own sampler over the whole canvas ---------------------------------------------
  void dream_whole_canvas() {
    const int steps = opt_.steps;
    const auto ts = dream_timesteps(steps, opt_.eps);
    const RankAlg alg = policy_.alg();
    for (int i = 0; i < steps; ++i) {
      const float* lg = full_forward(P_, N_, {});
      const double t = ts[i], s = ts[i + 1];
      if (alg == RankAlg::kOrigin) {
        const double p_tr = i < steps - 1 ? 1.0 - s / t : 1.0;
        revealed_.clear();
        for (int p = P_; p < N_; ++p) {
          if (x_[p] != cfg_.mask_id || policy_.uniform() >= p_tr) continue;
          x_[p] = policy_.dream(lg + size_t(p - P_) * cfg_.vocab_size, cfg_.vocab_size, alg).token;
          revealed_.push_back(p);
        }
        report(0);
        continue;
      }
      auto c = propose(P_, N_, lg, P_, true, alg);
      const int m = static_cast<int>(c.size());
      const int k = i < steps - 1 ? static_cast<int>(m * (1.0 - s / t)) : m;
      choose_and_reveal(c, k, 0);
    }
  }

  // Fast-dLLM's global threshold variant for Dream without cache (generation_utils.py).
  void dream_global_threshold() {
    int steps = opt_.steps;
    int q = opt_.gen_length / steps, carry = 0;
    for (int i = 0; i < steps; ++i) {
      const float* lg = full_forward(P_, N_, {});
      auto c = propose(P_, N_, lg, P_, true, RankAlg::kMaskgitPlus);
      rank_candidates(c);
      int k = std::min<int>(q + carry, static_cast<int>(c.size()));
      carry = 0;
      std::vector<Candidate> keep;
      if (k > 0) {
        keep.push_back(c[0]);
        for (int r = 1; r < k; ++r) {
          const double tau = opt_.threshold ? *opt_.threshold : 1.0 - *opt_.factor / double(r + 2);
          if (c[r].p.conf < tau) {
            ++carry;  // dropped ranks carry over to the next step
            if (i >= steps - 1) {
              q = 0;
              ++steps;  // live bound: one extra step per final step that drops anything
            }
          } else {
            keep.push_back(c[r]);
          }
        }
      }
      reveal(keep, static_cast<int>(keep.size()), 0);
    }
  }

  Model& m_;
  const ModelConfig& cfg_;
  const GenerateOptions& opt_;
  const StepCallback& cb_;
  std::mt19937_64 rng_;
  int eot_;
  UnmaskPolicy policy_;
  Rule rule_ = Rule::kQuota;
  // Steps in a row that revealed nothing (check_progress); at temperature > 0 the draws can still
  // move on, so a threshold or factor rule is given this many before it stops.
  static constexpr int kMaxStalledSteps = 1000;
  int stalled_ = 0;
  int P_ = 0, N_ = 0;
  std::vector<int32_t> x_;  // canvas [prompt | generated]
  std::vector<float> logits_;
  std::vector<int> revealed_;
  std::unique_ptr<KvStore> store_;
  std::unique_ptr<CacheTracer> tracer_;
  const TeacherForcing* teacher_ = nullptr;
  PosRange active_;
  int nfe_ = 0, steps_ = 0;
  double flops_ = 0.0;  // model FLOPs of the decoder's forwards
  KvBytes kv_peak_;
  size_t kv_peak_fp16_ = 0;
};

}  // namespace

namespace {

// Bytes a canvas of P + gen_length positions needs at its peak (canvas ids, the forward's
// activations over every row, RoPE tables, logits rows, a full-precision KV store), checked
// against what the process may allocate: a length that cannot fit is refused with the figure,
// before any allocation turns into std::bad_alloc.
void check_canvas_memory(const Model& m, size_t P, const GenerateOptions& o) {
  const ModelConfig& c = m.config();
  const double N = double(P) + o.gen_length;
  const double qd = double(c.n_heads) * c.head_dim, kvd = c.kv_dim();
  const double act = N * (2.0 * c.d_model + 2.0 * qd + 2.0 * kvd + 2.0 * c.mlp_hidden) * 4.0;
  const double rope = N * c.head_dim * 8.0;
  const bool whole_canvas = c.arch == Arch::kDream && o.cache == CacheMode::kNone;
  const double rows = whole_canvas ? N : std::min<double>(N, o.block_length + 1.0);
  const double logits = rows * c.vocab_size * 4.0 * (o.cfg_scale > 0 ? 3.0 : 1.0);
  const double kv = o.cache == CacheMode::kNone ? 0.0 : N * c.n_layers * kvd * 2.0 * 4.0;
  const double need = N * 4.0 + act + rope + logits + kv;
  const double have = double(usable_memory_bytes());
  if (need > have)
    fail(
        "--gen-length {}: a canvas of {} positions (prompt {} + generation {}) needs about {} "
        "(activations {}, logits {}, KV cache {}), more than the {} this process may use",
        o.gen_length, size_t(N), P, o.gen_length, format_bytes(need), format_bytes(act),
        format_bytes(logits), format_bytes(kv), format_bytes(have));
}

}  // namespace

GenerateResult generate(Model& model, std::span<const int32_t> prompt, const GenerateOptions& opt,
                        const StepCallback& on_step) {
  check_generate_options(opt, model.config(), prompt);
  check_canvas_memory(model, prompt.size(), opt);
  Decoder d(model, prompt, opt, on_step);
  return d.run();
}

}  // namespace dllmq
