// A loaded LLaDA or Dream model and its forward pass (f32 compute, 16-bit weights in place).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cache/kv_store.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/weights.h"
#include "ops/rope.h"

namespace dllmq {

// Sees the per-layer tensors of a forward (error tracing, calibration, tests).
class LayerObserver {
 public:
  virtual ~LayerObserver() = default;
  // Rows are the fresh rows of this forward, canvas positions [pos0, pos0 + n).
  // k_rot: [n, kv_dim] post-RoPE, v: [n, kv_dim], attn: [n, n_heads*hd] attention output.
  virtual void on_layer(int layer, int pos0, int n, const float* k_rot, const float* v,
                        const float* attn) = 0;
  // The same fresh rows before RoPE (k_pre: [n, kv_dim]), as a store receives them; called
  // before on_layer. Calibration of pre-RoPE stores (KVQuant) listens here.
  virtual void on_kv(int layer, int pos0, int n, const float* k_pre, const float* v) {}
};

struct ForwardArgs {
  std::span<const int32_t> ids;  // tokens of the rows computed now (contiguous canvas slice)
  int pos0 = 0;                  // canvas position of ids[0]
  KvStore* store = nullptr;
  std::vector<PosRange> cached;  // store rows attended to besides the fresh rows
  PosRange write;                // canvas rows whose fresh K/V are written to the store
  PosRange logits;               // canvas rows whose raw logits are computed (subset of fresh rows)
  LayerObserver* observer = nullptr;
};

class Model {
 public:
  static std::unique_ptr<Model> load(const std::string& dir);

  const ModelConfig& config() const { return cfg_; }
  const ModelWeights& weights() const { return w_; }
  const Checkpoint& checkpoint() const { return *ckpt_; }
  const RopeTable& rope() const { return rope_; }
  const std::string& dir() const { return dir_; }
  // Identifies the checkpoint (geometry, tensor names/shapes/dtypes and sampled weight bytes) so
  // calibration artifacts can refuse another model. Hex string, computed once.
  const std::string& fingerprint() const;

  // Makes sure the RoPE table covers `n` positions (call before decoding a canvas of n).
  void reserve_positions(int n) { rope_.reserve(n); }

  // logits: [args.logits.size(), vocab_size] raw rows (no shift applied).
  void forward(const ForwardArgs& args, float* logits);

  // Model FLOPs of one forward over `n` fresh rows attending to `n_keys` keys with `n_logits`
  // LM-head rows (2 per multiply-add), for benchmark reports.
  double forward_flops(int n, int n_keys, int n_logits) const;
  // Model FLOPs of every forward run so far (benchmarks read differences of it).
  double flops_done() const { return flops_done_; }

 private:
  Model() = default;
  void grow(int n);

  std::string dir_;
  mutable std::string fingerprint_;
  ModelConfig cfg_;
  std::unique_ptr<Checkpoint> ckpt_;
  ModelWeights w_;
  RopeTable rope_{2, 10000.0};
  // Workspace, grown on demand and reused across forwards (no per-step allocation).
  double flops_done_ = 0.0;
  int cap_ = 0;
  std::vector<float> x_, h_, q_, k_, v_, att_, gate_, up_;
  std::vector<const KvRowSource*> sources_;
};

}  // namespace dllmq
