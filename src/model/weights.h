// Binds checkpoint tensors to the roles of the transformer, validating names and shapes
// against config.json. LLaDA, Dream and LLaDA-MoE share one attention block; names differ, and
// LLaDA-MoE adds per-head q/k norms and routed experts in place of the dense MLP (model/moe.h).
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "io/safetensors.h"
#include "ops/linear.h"
#include "wquant/quant_config.h"

namespace dllmq {

struct MoeFfn;  // model/moe.h

struct LayerWeights {
  std::vector<float> attn_norm;       // [d_model], widened (tiny)
  Linear q, k, v, o;                  // q: [n_heads*hd, d], k/v: [kv_dim, d], o: [d, n_heads*hd]
  std::vector<float> q_norm, k_norm;  // [head_dim]: per-head RMSNorm before RoPE, or empty
  std::vector<float> ffn_norm;        // [d_model]
  Linear gate, up, down;        // dense MLP: gate/up: [mlp, d], down: [d, mlp]; unset in MoE layers
  std::shared_ptr<MoeFfn> moe;  // routed experts in place of the dense MLP, or null
};

struct ModelWeights {
  const TensorView* embed = nullptr;  // [vocab, d_model]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // [d_model]
  Linear lm_head;                 // [vocab, d_model] (the embedding when tied)
  DType dtype = DType::kBF16;     // dtype of the embedding (reported by inspect)
  WeightQuantConfig quant;        // the projections' integer codes, if any
  // The attention/MLP/expert projections as stored (codes, scales, zeros and g_idx for a
  // quantized checkpoint) and their bits per weight (the widest, if they differ).
  size_t proj_bytes = 0;
  int proj_bits = 0;
  size_t n_params = 0;
  // Parameters one token uses: n_params less the experts a MoE layer does not route it to.
  size_t n_active_params = 0;
};

// Looks checkpoint tensors up by name, checks their shapes against config.json, counts their
// parameters and remembers which were used (anything left over is an error).
class TensorBinder {
 public:
  TensorBinder(const Checkpoint& c, const ModelConfig& cfg, const WeightQuantConfig& qc = {})
      : c_(c), cfg_(cfg), qc_(qc) {}
  const Checkpoint& checkpoint() const { return c_; }
  const TensorView* get(const std::string& name, std::vector<int64_t> shape);
  std::vector<float> vec(const std::string& name, int d);  // widened to f32
  // `base`.weight, or, in a quantized checkpoint, `base`.{qweight,qzeros,scales,g_idx}.
  Linear lin(const std::string& base, int out, int in, bool bias);
  void check_unexpected() const;
  size_t n_params() const { return n_params_; }

 private:
  const Checkpoint& c_;
  const ModelConfig& cfg_;
  WeightQuantConfig qc_;
  std::set<std::string> used_;
  size_t n_params_ = 0;
};

// "int4-g128-sym" for GPTQ-coded projections, else the stored dtype ("BF16").
std::string weight_format(const ModelWeights& w);

// Throws naming the directory, the tensor and what config.json expects.
// `qc`: the checkpoint's weight quantization (wquant/quant_config.h); projections stored as GPTQ
// codes are bound as Linear::quant.
ModelWeights bind_weights(const Checkpoint& ckpt, const ModelConfig& cfg,
                          const WeightQuantConfig& qc = {});

}  // namespace dllmq
