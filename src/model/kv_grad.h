// Gradient of a cross-entropy loss on a forward's logits with respect to every layer's K and V:
// the backward pass KVQuant's Fisher weights need (METHODS.md §2: the squared gradient of the
// masked-diffusion loss with respect to each cached K/V activation).
//
// The forward is the one a decoding step runs (ForwardArgs: fresh rows at pos0 attending to
// themselves and to the store's cached ranges); it is recomputed here in f32 with the attention
// probabilities materialised per head, and nothing is written to the store. Cached rows are
// leaves (the step reads them as held), so their gradient comes from this layer's attention
// alone; a fresh row's K/V gradient is its total derivative through the layers above. Memory:
// one [n, d] residual per layer is kept and each layer is recomputed during the backward
// (gradient checkpointing), so a pair of LLaDA-8B size needs a few hundred MiB, not gigabytes.
// Every layout: Dream's biases, LLaDA-MoE's per-head q/k norms and its routed-expert FFNs (the
// FFN half of the backward is model/ffn_grad.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "model/model.h"

namespace dllmq {

// One term of the loss: weight * CE(softmax(raw logits row `row`), target). `row` is a canvas
// position among the forward's fresh rows (the caller applies the model's logits shift).
struct LossTerm {
  int row = 0;
  int32_t target = 0;
  double weight = 1.0;
};

// Adds `delta` to one pre-RoPE K or V element before the attention of `layer` (finite
// differences in tests). `pos` is a canvas position among the rows the forward reads.
struct KvPerturbation {
  int layer = 0;
  int pos = 0;
  bool value = false;  // false: K (pre-RoPE), true: V
  int channel = 0;     // kv_head * head_dim + c
  float delta = 0.0f;
};

// One layer's gradients, handed out during the backward (layers in descending order).
struct LayerKvGrad {
  int layer = 0;
  // Canvas position of every row the forward read, in order: the cached ranges as given, then
  // the fresh rows [pos0, pos0 + n_fresh).
  std::span<const int> pos;
  int n_cached = 0;
  int kv_dim = 0;
  const float* gk = nullptr;  // [rows, kv_dim]: d loss / d K (pre-RoPE)
  const float* gv = nullptr;  // [rows, kv_dim]: d loss / d V
  // The fresh rows' own K (pre-RoPE) and V as recomputed here, [n_fresh, kv_dim] each.
  const float* k_fresh = nullptr;
  const float* v_fresh = nullptr;
};
using KvGradSink = std::function<void(const LayerKvGrad&)>;

// Returns the loss sum_i weight_i * CE_i. With a sink, also runs the backward and hands every
// layer's K/V gradients to it (layer L-1 first). a.store must hold the cached ranges
// (a.write, a.logits and a.observer are ignored). Projections run in the model's compute dtype.
double kv_loss_gradient(const Model& m, const ForwardArgs& a, std::span<const LossTerm> terms,
                        const KvGradSink& sink,
                        const std::optional<KvPerturbation>& perturb = std::nullopt);

}  // namespace dllmq
