// Fisher weights for calibration (METHODS.md §2): the squared gradient of the masked-diffusion
// loss with respect to each K (pre-RoPE) and V activation, from model/kv_grad's backward.
//
// The loss is LLaDA's SFT objective at the canvas a forward sees: cross-entropy of the reference
// token at every masked generated position whose logits row the forward computes, each weighted
// 1 / t / G = 1 / (masked generated positions), t being the share of the G generated positions
// still masked (the prompt is never masked). Under TRACE every decoding forward is scored at its
// own canvas; under `ar`, whose canvas is fully revealed (no masked position, no loss), the
// weights come from one masked copy of the pair: t ~ U(0, 1], each answer position masked with
// probability t (at least one), seeded per pair — the training objective's own noise.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "io/model_config.h"
#include "model/kv_grad.h"

namespace dllmq {

// Loss terms of forward `f` over the canvas `canvas` (length N, current tokens; rows outside the
// forward as they stand), prompt length P, reference ids `target` of the generated part.
std::vector<LossTerm> diffusion_loss_terms(const ModelConfig& cfg, const ForwardArgs& f,
                                           std::span<const int32_t> canvas, int P,
                                           std::span<const int32_t> target);

// [prompt | target] with the answer masked at a random rate (see above).
std::vector<int32_t> masked_copy(std::span<const int32_t> prompt, std::span<const int32_t> target,
                                 int32_t mask_id, uint64_t seed);

// Squared K/V gradients of one pair per layer and canvas position (the `ar` weights).
class PositionFisher {
 public:
  PositionFisher(int n_layers, int kv_dim) : kvd_(kv_dim), k2_(n_layers), v2_(n_layers) {}
  // Runs the masked copy's backward and keeps g^2 for every position of the canvas.
  void compute(const Model& m, std::span<const int32_t> prompt, std::span<const int32_t> target,
               uint64_t seed, const KvGradSink& also = nullptr);
  const float* k2(int layer, int pos) const { return k2_[layer].data() + size_t(pos) * kvd_; }
  const float* v2(int layer, int pos) const { return v2_[layer].data() + size_t(pos) * kvd_; }
  // Ids and loss terms of the last masked copy (state dumps).
  const std::vector<int32_t>& ids() const { return ids_; }
  const std::vector<LossTerm>& terms() const { return terms_; }
  double loss() const { return loss_; }

 private:
  int kvd_;
  std::vector<std::vector<float>> k2_, v2_;
  std::vector<int32_t> ids_;
  std::vector<LossTerm> terms_;
  double loss_ = 0.0;
};

// out[i] = g[i]^2 over n values.
void square_into(const float* g, size_t n, float* out);

}  // namespace dllmq
