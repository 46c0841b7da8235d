#include "ops/linear.h"

#include <cblas.h>

#include <omp.h>

#include <algorithm>
#include <vector>

namespace dllmq {

namespace {

// Output rows of W widened per panel: ~1 MiB of f32 so a panel stays in L2 while sgemm runs.
int panel_rows(int in) {
  int r = (262144 / std::max(in, 1)) / 16 * 16;
  return std::clamp(r, 16, 1024);
}

}  // namespace

void tensor_row_f32(const TensorView& t, int64_t row, int d, float* dst) {
  const auto* base = static_cast<const uint8_t*>(t.data) + row * d * dtype_size(t.dtype);
  to_f32(t.dtype, base, dst, d);
}

void blas_use_one_thread() {
  // All parallelism is ours (panels, heads): OpenBLAS threading inside small products only
  // adds fork/join barriers, which stall badly when the cores are shared.
  static const bool once = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
}

void linear(const float* x, int n, const Linear& l, float* y, int ldy) {
  if (ldy == 0) ldy = l.out;
  const int out = l.out, in = l.in;
  const int pr = panel_rows(in);
  const int n_panels = (out + pr - 1) / pr;
  const size_t esz = dtype_size(l.w->dtype);
  const bool widen = l.w->dtype != DType::kF32;
  // Small products stay on one thread: a parallel region costs more than it saves there.
  const bool par = n_panels > 1 && double(n) * out * in > 4e6;
#pragma omp parallel if (par)
  {
    thread_local std::vector<float> panel;
    if (widen && panel.size() < size_t(pr) * in) panel.resize(size_t(pr) * in);
#pragma omp for schedule(dynamic, 1)
    for (int p = 0; p < n_panels; ++p) {
      const int r0 = p * pr, rows = std::min(pr, out - r0);
      const auto* src = static_cast<const uint8_t*>(l.w->data) + size_t(r0) * in * esz;
      const float* w = reinterpret_cast<const float*>(src);
      if (widen) {
        to_f32(l.w->dtype, src, panel.data(), size_t(rows) * in);
        w = panel.data();
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, rows, in, 1.0f, x, in, w, in, 0.0f,
                  y + r0, ldy);
    }
  }
  if (l.b != nullptr) {
    thread_local std::vector<float> bias;
    if (bias.size() < size_t(out)) bias.resize(out);
    to_f32(l.b->dtype, l.b->data, bias.data(), out);
    for (int i = 0; i < n; ++i) {
      float* yi = y + size_t(i) * ldy;
      for (int o = 0; o < out; ++o) yi[o] += bias[o];
    }
  }
}

void linear_ref(const float* x, int n, const Linear& l, float* y) {
  std::vector<float> wrow(l.in), b(l.out, 0.0f);
  if (l.b) to_f32(l.b->dtype, l.b->data, b.data(), l.out);
  for (int o = 0; o < l.out; ++o) {
    tensor_row_f32(*l.w, o, l.in, wrow.data());
    for (int i = 0; i < n; ++i) {
      double acc = b[o];
      for (int k = 0; k < l.in; ++k) acc += double(x[size_t(i) * l.in + k]) * wrow[k];
      y[size_t(i) * l.out + o] = static_cast<float>(acc);
    }
  }
}

}  // namespace dllmq
