#include "ops/norm_act.h"

#include <cmath>

namespace dllmq {

void rmsnorm(const float* x, int n, int d, const float* w, float eps, float* out) {
#pragma omp parallel for schedule(static) if (size_t(n) * d > (1u << 16))
  for (int i = 0; i < n; ++i) {
    const float* xi = x + size_t(i) * d;
    float* oi = out + size_t(i) * d;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int k = 0; k < d; ++k) ss += xi[k] * xi[k];
    const float r = 1.0f / std::sqrt(ss / float(d) + eps);
#pragma omp simd
    for (int k = 0; k < d; ++k) oi[k] = xi[k] * r * w[k];
  }
}

void rmsnorm_ref(const float* x, int n, int d, const float* w, float eps, float* out) {
  for (int i = 0; i < n; ++i) {
    double ss = 0;
    for (int k = 0; k < d; ++k) ss += double(x[i * d + k]) * x[i * d + k];
    double r = 1.0 / std::sqrt(ss / d + eps);
    for (int k = 0; k < d; ++k) out[i * d + k] = float(x[i * d + k] * r * w[k]);
  }
}

void silu_mul(float* gate, const float* up, size_t n) {
#pragma omp parallel for simd schedule(static) if (n > 65536)
  for (size_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void add_in_place(float* x, const float* y, size_t n) {
#pragma omp parallel for simd schedule(static) if (n > 65536)
  for (size_t i = 0; i < n; ++i) x[i] += y[i];
}

void silu_mul_ref(float* gate, const float* up, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    double g = gate[i];
    gate[i] = float(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

}  // namespace dllmq
