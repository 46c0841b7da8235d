// Backward twins of the transformer block's ops, for the gradients calibration needs (KVQuant's
// Fisher weights: d loss / d K and d V of every layer, METHODS.md §2). Only gradients with
// respect to activations are computed; weights are never differentiated. f32 throughout.
#pragma once

#include <cstddef>

#include "ops/linear.h"

namespace dllmq {

// y = rmsnorm(x) * w  =>  dx += r * (w*dy) - x * r^3 / d * sum(x * w * dy), r =
// 1/sqrt(mean(x^2)+eps). Accumulates into dx ([n, d]).
void rmsnorm_backward(const float* x, int n, int d, const float* w, float eps, const float* dy,
                      float* dx);

// out = silu(g) * u  =>  dg = dout * u * silu'(g),  du = dout * silu(g)  (overwrites dg, du).
void silu_mul_backward(const float* g, const float* u, const float* dout, size_t n, float* dg,
                       float* du);

// y = x W^T (+ b)  =>  dx (+)= dy W, with W [out, in] in its stored dtype (16-bit weights are
// widened panel by panel, never copied whole). dy: [n, out], dx: [n, in]; `accumulate` adds to
// dx instead of overwriting it.
void linear_backward_input(const float* dy, int n, const Linear& l, float* dx, bool accumulate);

}  // namespace dllmq
