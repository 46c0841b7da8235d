// Elementwise and row-wise ops of the transformer block, each with a scalar reference twin.
#pragma once

#include "io/safetensors.h"

namespace dllmq {

// out[i] = x[i] / sqrt(mean(x[i]^2) + eps) * w  for each of n rows of width d (f32 math).
void rmsnorm(const float* x, int n, int d, const float* w, float eps, float* out);
void rmsnorm_ref(const float* x, int n, int d, const float* w, float eps, float* out);

// gate[i] = silu(gate[i]) * up[i] over n elements (SwiGLU), in place on gate.
void silu_mul(float* gate, const float* up, size_t n);
void silu_mul_ref(float* gate, const float* up, size_t n);

}  // namespace dllmq
