// The mixture-of-experts FFN of LLaDA-MoE (a model part of its own: the dense layers never see
// it). Written from the released modeling code (LLaDAMoESparseMoeBlock, derived from OLMoE):
//
//   p        = softmax(h W_router^T)           in f32, over the experts
//   p       += expert_bias                     (only with moe_router_enable_expert_bias)
//   (w, e)   = topk(p, k)                      torch.topk on CPU, ties included (route_row)
//   out      = sum over the row's experts in increasing expert index of  w * FFN_e(h)
//   out     += FFN_shared(h)                   (only with a shared expert)
//
// No renormalisation of w, no scaling: the reference ignores norm_topk_prob and
// routed_scaling_factor. FFN_e is SwiGLU (down(silu(gate h) * up h)) like the dense MLP.
//
// Compute: every forward groups its rows by expert and runs only the routed experts' products,
// on the GEMM path of the dense layers (ops/linear.h), one product per (expert, canvas) so a
// batched forward gives every canvas the bits of its lone forward; experts run side by side on
// the threads when each is small, else one after another with the product split over the
// threads (linear() gives the same bits either way).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "io/model_config.h"
#include "ops/linear.h"

namespace dllmq {

class TensorBinder;

// A SwiGLU MLP: down(silu(gate x) * up x).
struct SwiGlu {
  Linear gate, up, down;  // gate/up: [hidden, d], down: [d, hidden]
  int hidden() const { return gate.out; }
};

struct MoeFfn {
  Linear router;                   // [n_experts, d] (mlp.gate)
  std::vector<SwiGlu> experts;     // [n_experts]
  std::vector<float> expert_bias;  // [n_experts], or empty
  std::vector<SwiGlu> shared;      // zero or one shared expert (always on)
  int top_k = 0;
  int n_experts() const { return static_cast<int>(experts.size()); }
};

// Binds layer `layer`'s MoE tensors (prefix "model.layers.N."); throws naming the tensor or the
// config field on a missing expert, an expert count other than num_experts, or a wrong shape.
std::shared_ptr<MoeFfn> bind_moe_ffn(TensorBinder& b, const ModelConfig& cfg, int layer,
                                     const std::string& prefix);

// Parameters a token uses in one MoE layer: router, top_k experts, the shared expert.
size_t moe_active_params(const MoeFfn& f);
size_t moe_total_params(const MoeFfn& f);

// The routing of one row: softmax of `logits` (f32), plus `bias` if not null, then the top `k`
// (experts[j], weights[j]) as torch.topk(largest, sorted) returns them on CPU: the same
// std::partial_sort (k * 64 <= n) or std::nth_element + std::sort calls over (value, index)
// pairs with the same comparator, so equal probabilities pick the experts torch picks.
void route_row(const float* logits, int n_experts, const float* bias, int k, int32_t* experts,
               float* weights, std::vector<std::pair<float, int64_t>>& scratch);

// Rows [row0, row0 + n) of a forward's activation buffers belong to one canvas.
struct CanvasRows {
  int row0 = 0;
  int n = 0;
};

// The routing a MoE forward chose: for each of its rows the top_k experts and their weights, in
// route_row's order, and the raw router logits (the backward's softmax, model/ffn_grad.h).
struct MoeRouting {
  int rows = 0, n_experts = 0, top_k = 0;
  const float* logits = nullptr;     // [rows, n_experts]
  const int32_t* experts = nullptr;  // [rows, top_k]
  const float* weights = nullptr;    // [rows, top_k]
};

// Workspace and driver of MoE layers (one per Model; grown on demand, reused across forwards).
class MoeRunner {
 public:
  // out (returned, [rows, d] with the canvases' row offsets) = the MoE FFN of h [rows, d].
  const float* forward(const MoeFfn& f, const float* h, int d, std::span<const CanvasRows> canvases,
                       ComputeDType dt);
  // Experts that got rows in the last forward (tests, profiling).
  int last_active_experts() const { return last_active_; }
  // The last forward's routing (valid until the next forward), rows as its canvases placed them.
  MoeRouting last_routing() const {
    return {last_rows_, last_experts_, last_k_, logits_.data(), experts_.data(), weights_.data()};
  }

 private:
  int rows_ = 0;
  int last_active_ = 0;
  int last_rows_ = 0, last_experts_ = 0, last_k_ = 0;
  std::vector<float> logits_, out_, xg_, gate_, up_, yg_;
  std::vector<int32_t> experts_;
  std::vector<float> weights_;
  std::vector<int> slot_pos_, count_, offset_;
  std::vector<LinearRows> blocks_;
  std::vector<std::pair<float, int64_t>> sort_scratch_;
};

}  // namespace dllmq
