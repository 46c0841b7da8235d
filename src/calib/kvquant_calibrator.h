// KVQuant's own calibration (METHODS.md §2, trajectory "ar"): observe the pre-RoPE K and the V
// of full forwards over prompt+answer (every token revealed) and derive, per layer, the K
// per-channel outlier thresholds (percentiles outlier_percent/2 and 100 - outlier_percent/2),
// and k-means codebooks of the normalised non-outlier K and V values: unweighted ("noF"), or
// weighted by Fisher information (calib/fisher.h), each value's weight being its squared loss
// gradient times the square of its normalisation range, i.e. the second-order loss increase of
// a codebook error measured in normalised units. Memory is bounded: each layer keeps a
// reservoir of at most
// `reservoir_rows` token rows (Algorithm R, seeded), from which everything is computed at the
// end; with fewer observed rows the statistics are exact.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "io/calib_artifact.h"
#include "io/model_config.h"
#include "model/model.h"

namespace dllmq {

struct KvQuantCalibOptions {
  int bits_k = 4;
  int bits_v = 4;
  double outlier_percent = 1.0;
  int sink = 1;  // leading canvas positions: kept at fp16 by the store, left out of calibration
  int reservoir_rows = 2048;
  uint64_t seed = 0;
  bool fisher = false;  // every row comes with squared K/V gradients (weights)
};

class PositionFisher;

class KvQuantCalibrator final : public LayerObserver {
 public:
  KvQuantCalibrator(const ModelConfig& cfg, KvQuantCalibOptions opt);

  void on_layer(int, int, int, const float*, const float*, const float*) override {}
  // `ar`: every fresh row of a full forward is one observation.
  void on_kv(int layer, int pos0, int n, const float* k_pre, const float* v) override;
  // One observed row (pre-RoPE K and V, kv_dim each) at canvas position `pos` (TRACE feeds the
  // rows each step read). Rows below the sink are skipped. With opt.fisher, k2 / v2 are the
  // row's squared gradients (kv_dim each), else null.
  void add_row(int layer, int pos, const float* k_pre, const float* v, const float* k2 = nullptr,
               const float* v2 = nullptr);
  // `ar` with Fisher: the weights of the rows on_kv sees next come from here (per position).
  void set_position_fisher(const PositionFisher* f) { position_fisher_ = f; }

  // Rows observed in layer 0 (tokens calibrated on).
  int64_t rows_seen() const { return layers_.empty() ? 0 : layers_[0].seen; }
  // Thresholds and codebooks; the caller fills the provenance fields (model, data, pairs).
  CalibArtifact finish() const;

 private:
  struct Layer {
    std::vector<float> k, v;    // [reservoir_rows, kv_dim]
    std::vector<float> k2, v2;  // Fisher: squared gradients, same layout
    int64_t seen = 0;
    std::mt19937_64 rng;
  };
  int kvd_, hd_, n_kv_;
  KvQuantCalibOptions opt_;
  std::vector<Layer> layers_;
  const PositionFisher* position_fisher_ = nullptr;
};

}  // namespace dllmq
