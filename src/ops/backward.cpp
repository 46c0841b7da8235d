#include "ops/backward.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "io/dtype.h"
#include "ops/gemm.h"
#include "ops/packed_gemm.h"
#include "util/error.h"

namespace dllmq {

void rmsnorm_backward(const float* x, int n, int d, const float* w, float eps, const float* dy,
                      float* dx) {
#pragma omp parallel for schedule(static) if (size_t(n) * d > (1u << 16))
  for (int i = 0; i < n; ++i) {
    const float* xi = x + size_t(i) * d;
    const float* gi = dy + size_t(i) * d;
    float* di = dx + size_t(i) * d;
    double ss = 0.0, dot = 0.0;
    for (int k = 0; k < d; ++k) {
      ss += double(xi[k]) * xi[k];
      dot += double(xi[k]) * w[k] * gi[k];
    }
    const double r = 1.0 / std::sqrt(ss / d + eps);
    const double c = r * r * r * dot / d;
    for (int k = 0; k < d; ++k) di[k] += float(r * w[k] * gi[k] - c * xi[k]);
  }
}

void silu_mul_backward(const float* g, const float* u, const float* dout, size_t n, float* dg,
                       float* du) {
#pragma omp parallel for schedule(static) if (n > 65536)
  for (size_t i = 0; i < n; ++i) {
    const float s = 1.0f / (1.0f + std::exp(-g[i]));  // sigmoid
    const float silu = g[i] * s;
    dg[i] = dout[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
    du[i] = dout[i] * silu;
  }
}

void linear_backward_input(const float* dy, int n, const Linear& l, float* dx, bool accumulate) {
  if (n <= 0) return;
  const int out = l.out, in = l.in;
  // Column blocks of dx are independent: one per work item; 16-bit weights are widened a
  // [kRows, kCols] tile at a time into per-thread scratch.
  constexpr int kCols = 256, kRows = 256;
  const int n_blocks = (in + kCols - 1) / kCols;
  // Integer codes (a quantized checkpoint): tiles dequantized from the packed panels.
  const PackedWeight* codes = l.w == nullptr ? l.packed.get() : nullptr;
  if (l.w == nullptr && (codes == nullptr || codes->bits == 0))
    fail("linear_backward_input: projection [{}, {}] has neither weights nor packed codes", out,
         in);
  const bool f32 = codes == nullptr && l.w->dtype == DType::kF32;
  const size_t esz = codes ? 0 : dtype_size(l.w->dtype);
  const auto* base = codes ? nullptr : static_cast<const uint8_t*>(l.w->data);
  const bool par = n_blocks > 1 && double(n) * out * in > 4e6;
  if (!accumulate) std::fill(dx, dx + size_t(n) * in, 0.0f);
#pragma omp parallel if (par)
  {
    std::vector<float> tile(f32 ? 0 : size_t(kRows) * kCols);
#pragma omp for schedule(dynamic, 1)
    for (int b = 0; b < n_blocks; ++b) {
      const int c0 = b * kCols, cols = std::min(kCols, in - c0);
      for (int o0 = 0; o0 < out; o0 += kRows) {
        const int rows = std::min(kRows, out - o0);
        const float* w;
        int ldw;
        if (f32) {
          w = reinterpret_cast<const float*>(base) + size_t(o0) * in + c0;
          ldw = in;
        } else if (codes != nullptr) {
          dequant_packed(*codes, o0, rows, c0, cols, tile.data(), cols);
          w = tile.data();
          ldw = cols;
        } else {
          for (int r = 0; r < rows; ++r)
            to_f32(l.w->dtype, base + (size_t(o0 + r) * in + c0) * esz,
                   tile.data() + size_t(r) * cols, cols);
          w = tile.data();
          ldw = cols;
        }
        sgemm(false, n, cols, rows, 1.0f, dy + o0, out, w, ldw, 1.0f, dx + c0, in);
      }
    }
  }
}

}  // namespace dllmq
