// Backward of the feed-forward half of a block: d loss / d h (h the normed FFN input) from
// d loss / d out, for the dense SwiGLU MLP and for LLaDA-MoE's routed experts (model/moe.h).
// model/kv_grad.cpp runs it for every layer; weights are never differentiated, f32 throughout.
//
// MoE layer, out = sum_j w_j FFN_{e_j}(h) (+ FFN_shared(h)), w_j = p[e_j] (+ bias[e_j]),
// p = softmax(router h): the gradient reaches h through the routed experts AND through the
// weights w_j of the experts the row was routed to (torch autograd's answer: top-k selection is
// piecewise constant, the unselected experts get no gradient, and there is no renormalisation
// to differentiate since the reference never renormalises):
//   dw_j  = <dout, FFN_{e_j}(h)>,      dp[e_j] = dw_j,      dlogits = p * (dp - <p, dp>),
//   dh    = sum_j w_j J_{e_j}^T dout + router^T dlogits (+ J_shared^T dout).
#pragma once

#include "model/moe.h"
#include "ops/linear.h"

namespace dllmq {

// out = down(silu(g) * u), g = gate h, u = up h (pre-activations given, [n, hidden] each) =>
// dh (+)= gate^T dg + up^T du. `accumulate` adds to dh instead of overwriting it.
void swiglu_backward(const Linear& gate, const Linear& up, const Linear& down, const float* g,
                     const float* u, int n, const float* dout, float* dh, bool accumulate);

// The MoE FFN of h [n, d] was computed with routing `r` (MoeRunner::last_routing of that
// forward, rows 0..n-1): dh = d loss / d h from dout = d loss / d out, both [n, d] (overwritten).
void moe_ffn_backward(const MoeFfn& f, const MoeRouting& r, const float* h, int n, int d,
                      const float* dout, float* dh, ComputeDType dt);

}  // namespace dllmq
