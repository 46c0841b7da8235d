#include "ops/norm_act.h"

#include <algorithm>
#include <cmath>

#include "ops/exp_sum.h"

namespace dllmq {

namespace {
// Values from which a row-wise operation is split over the threads: a dual-cache step's 32 rows
// of d 1024 (32,768 values) are. A top-level region costs about 1 us here; these operations run
// at several values per ns, so below this the split saves less than it costs. (These were 65,536
// while RoPE and the KV writes ran inside an inactive region, where each region cost 35-45 us:
// util/parallel_for.h.)
constexpr size_t kParallelValues = 16384;
}  // namespace

// One row of rmsnorm. Not inlined, so that rmsnorm and add_rmsnorm run the same machine code for
// a row (the vectorised sum of squares has one order, whatever loop calls it): same bits.
__attribute__((noinline)) static void rmsnorm_row(const float* xi, int d, const float* w, float eps,
                                                  float* oi) {
  float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
  for (int k = 0; k < d; ++k) ss += xi[k] * xi[k];
  const float r = 1.0f / std::sqrt(ss / float(d) + eps);
#pragma omp simd
  for (int k = 0; k < d; ++k) oi[k] = xi[k] * r * w[k];
}

void rmsnorm(const float* x, int n, int d, const float* w, float eps, float* out) {
#pragma omp parallel for schedule(static) if (size_t(n) * d > kParallelValues)
  for (int i = 0; i < n; ++i) rmsnorm_row(x + size_t(i) * d, d, w, eps, out + size_t(i) * d);
}

void add_rmsnorm(float* x, const float* y, int n, int d, const float* w, float eps, float* out) {
#pragma omp parallel for schedule(static) if (size_t(n) * d > kParallelValues)
  for (int i = 0; i < n; ++i) {
    float* xi = x + size_t(i) * d;
    const float* yi = y + size_t(i) * d;
#pragma omp simd
    for (int k = 0; k < d; ++k) xi[k] += yi[k];  // the whole row before out's row (out may be y)
    rmsnorm_row(xi, d, w, eps, out + size_t(i) * d);
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

// The exponentials on the vector units (ops/exp_sum.h: glibc's expf is a call per value, which
// with the projections on AMX tiles was 8% of a bf16 dual-cache step).
void silu_mul(float* gate, const float* up, size_t n) {
  constexpr size_t kChunk = 4096;  // a multiple of the kernels' 8 lanes
  const size_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > kParallelValues)
  for (size_t c = 0; c < chunks; ++c) {
    const size_t i0 = c * kChunk;
    silu_mul_vec(gate + i0, up + i0, std::min(kChunk, n - i0));
  }
}

void add_in_place(float* x, const float* y, size_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelValues)
  for (size_t i = 0; i < n; ++i) x[i] += y[i];
}

void silu_mul_ref(float* gate, const float* up, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    double g = gate[i];
    gate[i] = float(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

}  // namespace dllmq
