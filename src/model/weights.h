// Binds checkpoint tensors to the roles of the transformer, validating names and shapes
// against config.json. LLaDA and Dream share one block structure; only names differ.
#pragma once

#include <string>
#include <vector>

#include "io/model_config.h"
#include "io/safetensors.h"
#include "ops/linear.h"

namespace dllmq {

struct LayerWeights {
  std::vector<float> attn_norm;  // [d_model], widened (tiny)
  Linear q, k, v, o;             // q: [n_heads*hd, d], k/v: [kv_dim, d], o: [d, n_heads*hd]
  std::vector<float> ffn_norm;   // [d_model]
  Linear gate, up, down;         // gate/up: [mlp, d], down: [d, mlp]
};

struct ModelWeights {
  const TensorView* embed = nullptr;  // [vocab, d_model]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // [d_model]
  Linear lm_head;                 // [vocab, d_model] (the embedding when tied)
  DType dtype = DType::kBF16;     // dtype of the embedding (reported by inspect)
  size_t n_params = 0;
};

// Throws naming the directory, the tensor and what config.json expects.
ModelWeights bind_weights(const Checkpoint& ckpt, const ModelConfig& cfg);

}  // namespace dllmq
