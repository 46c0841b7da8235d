// Elementwise and row-wise ops of the transformer block; norms and activations have a scalar
// reference twin.
#pragma once

#include "io/safetensors.h"

namespace dllmq {

// out[i] = x[i] / sqrt(mean(x[i]^2) + eps) * w  for each of n rows of width d (f32 math).
void rmsnorm(const float* x, int n, int d, const float* w, float eps, float* out);
void rmsnorm_ref(const float* x, int n, int d, const float* w, float eps, float* out);
// x += y, then out = rmsnorm(x, w), row by row in one parallel region: the residual add and the
// norm after it in one pass over the rows and one barrier instead of two (1.5 us of 14 a call at
// 32 rows of d 1,024 on the AMD EPYC; small, docs/performance.md). The same bits as add_in_place
// then rmsnorm. out may be y (each row is added before its norm is written).
void add_rmsnorm(float* x, const float* y, int n, int d, const float* w, float eps, float* out);

// gate[i] = silu(gate[i]) * up[i] over n elements (SwiGLU), in place on gate.
void silu_mul(float* gate, const float* up, size_t n);

// x += y over n floats (the residual stream); on the threads when n is large.
void add_in_place(float* x, const float* y, size_t n);
void silu_mul_ref(float* gate, const float* up, size_t n);

}  // namespace dllmq
