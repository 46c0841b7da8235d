// TRACE calibration (METHODS.md §3-4): observes the states a teacher-forced reveal trajectory
// actually produces through the real block driver and cache policy, and turns them into what a
// method needs.
//
// Per forward and layer it sees the rows that step read: stale cached rows as the store holds
// them (a pre-RoPE shadow of what the refresh wrote) and the fresh rows as computed, labelled by
// region (prompt / decoded prefix / active block / masked suffix). From these:
//   kvquant  - the rows feed KVQuant's statistics (thresholds, codebooks), so "trace"
//              calibration sees every row as often as decoding reads it; with Fisher weights
//              (calib/fisher.h) each row read comes with its squared loss gradient at that step;
//   dllm-kvq - attention-level channel scores E[(q_c (k_c - kivi(k_c)))^2] over the active
//              block's queries and the cached rows they attend to (or, --score-weight fisher,
//              the second-order loss increase E[sum_rows (g_c (k_c - kivi(k_c)))^2] with g the
//              masked-diffusion loss gradient of the post-RoPE cached key); output-level layer
//              sensitivities from re-running each cached step with one layer's cache quantized
//              (active-block KL, changed reveal decisions); the budget split across layers with
//              floor and cap; the channel choice.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/kivi_kv_store.h"
#include "cache/kvquant_kv_store.h"
#include "calib/kvquant_calibrator.h"
#include "calib/state_dump.h"
#include "decode/generate.h"

namespace dllmq {

enum class ScoreWeight { kNone, kAttention, kFisher };
ScoreWeight parse_score_weight(const std::string& s);  // throws naming --score-weight
const char* score_weight_name(ScoreWeight w);

struct TraceCalibOptions {
  std::string method = "kvquant";  // kvquant | dllm-kvq | observe (statistics and dump only)
  KvQuantCalibOptions kvq;         // kvquant: bits, outliers, sink, reservoir
  int bits_k = 2, bits_v = 2;      // dllm-kvq: the KIVI codec of its store
  int group = 32;
  // dllm-kvq --kv-base kvquant: the KVQuant artifact (checked against the model) whose codec
  // scores the channels in place of KIVI's (METHODS.md §4: the channels the base serves worst).
  std::optional<CalibArtifact> base_codec;
  double budget = 0.05;  // share of all K channels kept at fp16
  double floor = 0.25;   // per-layer share bounds, relative to the uniform share
  double cap = 4.0;
  std::optional<double> threshold;  // the schedule's tau (changed-decision rule), else top-1
  bool sensitivity = true;          // output-level pass (one extra forward per layer per step)
  int sensitivity_pairs = 0;        // run it on the first N pairs only (0 = every pair)
  // dllm-kvq channel score: none (every (query, head, cached row) term alike), attention (each
  // term weighted by the step's attention probability of the row, METHODS.md §4.1's option) or
  // fisher (the loss gradient in place of the queries).
  ScoreWeight score_weight = ScoreWeight::kNone;
  // kvquant: Fisher-weighted codebooks (a backward pass per decoding forward).
  bool fisher = false;
};

enum Region { kPromptRegion, kPrefixRegion, kActiveRegion, kSuffixRegion, kNumRegions };
const char* region_name(int r);

class TraceCalibrator final : public LayerObserver, public StepProbe {
 public:
  TraceCalibrator(const ModelConfig& cfg, const RopeTable& rope, TraceCalibOptions opt);
  ~TraceCalibrator() override;

  // Starts a pair: canvas length, prompt length and the reference ids of the generated part.
  void begin_pair(int canvas_len, int prompt_len, const std::vector<int32_t>& target);
  // --dump-states: every forward, the rows it read and the active block's queries go here too.
  void set_dump(StateDump* d) { dump_ = d; }

  void on_forward(const ForwardArgs& a) override;
  void on_kv(int layer, int pos0, int n, const float* k_pre, const float* v) override;
  void on_query(int layer, int pos0, int n, const float* q_rot) override;
  void on_layer(int, int, int, const float*, const float*, const float*) override {}
  void after_forward(Model& m, const ForwardArgs& f, const float* logits) override;

  CalibArtifact finish() const;

  // Per layer and region: rows observed and the per-channel min / max of the pre-RoPE K and
  // of V seen there (--stats writes them).
  struct RegionStats {
    int64_t rows = 0;
    std::vector<float> k_min, k_max, v_min, v_max;
  };
  const std::vector<std::array<RegionStats, kNumRegions>>& region_stats() const { return regions_; }
  struct LayerSensitivity {
    double kl_sum = 0.0;
    int64_t kl_rows = 0;
    int64_t changed = 0, steps = 0;
    double mean_kl() const { return kl_rows ? kl_sum / double(kl_rows) : 0.0; }
  };
  const std::vector<LayerSensitivity>& sensitivity() const { return sens_; }
  // Attention-level score of every K channel (flattened kv_head * head_dim + c) per layer.
  std::vector<std::vector<double>> channel_scores() const;
  int64_t rows_observed() const { return rows_observed_; }

 private:
  int region_of(int pos) const;
  void observe_row(int layer, int pos, const float* k, const float* v, bool fresh);
  // Fisher: the masked-diffusion loss of the forward, its backward, and what the gradients feed
  // (KVQuant's weighted reservoir, dLLM-KVQ's fisher channel scores, --dump-states).
  void fisher_step(const Model& m, const ForwardArgs& f);
  // Attention probabilities of one query head over the rows this forward reads (cached rows,
  // then fresh rows [pos0, pos0 + n)), from the exact post-RoPE keys in krot_.
  void attention_probs(int layer, const float* qh, int g, int pos0, int n,
                       std::vector<double>& p) const;

  const ModelConfig& cfg_;
  const RopeTable& rope_;
  TraceCalibOptions opt_;
  int kvd_, hd_;
  // The current pair and forward.
  int N_ = 0, P_ = 0;
  int pair_ = -1;  // index of the current pair
  std::vector<int32_t> target_;
  std::vector<int32_t> canvas_;  // the current canvas: each forward's rows as it computes them
  PosRange active_, write_;
  std::vector<PosRange> cached_;
  const KvStore* store_ = nullptr;
  // Pre-RoPE shadow of what the decoder's store holds: [layer][pos][kvd].
  std::vector<std::vector<float>> shadow_k_, shadow_v_;
  std::unique_ptr<KvQuantCalibrator> kvq_;
  std::vector<std::array<RegionStats, kNumRegions>> regions_;
  int64_t rows_observed_ = 0;
  // dllm-kvq.
  std::unique_ptr<KvStore> kivi_;  // the low-bit base store (KIVI or KVQuant), written with the
                                   // refreshes
  std::vector<std::vector<float>> err_;         // [layer][pos][kvd] post-RoPE K - kivi(K)
  std::vector<std::vector<double>> score_sum_;  // [layer][kvd]
  std::vector<double> score_pairs_;             // [layer] the scores' divisor (see on_query)
  std::vector<std::vector<float>> krot_;  // attention_weighted: [layer][pos][kvd] post-RoPE K read
  int fresh0_ = 0, fresh_n_ = 0;          // the current forward's computed rows
  StateDump* dump_ = nullptr;
  std::vector<int> d_pos_, d_region_, d_fresh_;  // rows read by the current forward and layer
  std::vector<float> d_k_, d_v_;
  std::vector<LayerSensitivity> sens_;
};

}  // namespace dllmq
