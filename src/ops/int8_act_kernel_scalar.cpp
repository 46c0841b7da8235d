// The portable twin of the VNNI kernel (ops/int8_act_kernel.h): the same integer sums, exact,
// and the same epilogue, so the same bits. It also runs the product on CPUs without AVX512-VNNI.
#include <cmath>

#include "ops/int8_act_kernel.h"

namespace dllmq::kern {

float quantize_row_u8_scalar(const float* x, int k, uint8_t* u8) {
  float a = 0.0f;
  bool finite = true;
  for (int i = 0; i < k; ++i) {
    finite = finite && std::isfinite(x[i]);
    a = std::fmax(a, std::fabs(x[i]));
  }
  if (!finite || a == 0.0f) {
    for (int i = 0; i < k; ++i) u8[i] = 128;
    return finite ? 0.0f : std::nanf("");
  }
  const float sx = a / 127.0f;
  for (int i = 0; i < k; ++i)
    u8[i] = uint8_t(int(std::fmin(std::fmax(std::nearbyint(x[i] / sx), -127.0f), 127.0f)) + 128);
  return sx;
}

void i8gemm_scalar(const I8Args& a) {
  const I8Block& b = a.b;
  const size_t panel_bytes = size_t(a.kp) * 16 * a.bits / 8;
  for (int p = a.p0; p < a.p1; ++p) {
    const uint8_t* w = a.codes + size_t(p) * panel_bytes;
    for (int cc = 0; cc < kI8Cols; ++cc) {
      const int c = p * kI8Cols + cc;
      if (c >= a.n) break;
      for (int r = 0; r < b.m; ++r) {
        const uint8_t* x = b.xq + r * b.ldx;
        float y = 0.0f;
        for (int g = 0; g < a.n_groups; ++g) {
          int32_t s = 0;
          for (int pos = a.gstart[g]; pos < a.gstart[g + 1]; ++pos) {
            int code;
            if (a.bits == 8) {
              code = int8_t(w[size_t(pos / 4) * 64 + cc * 4 + pos % 4]);
            } else {
              const uint8_t byte = w[size_t(pos / 8) * 64 + cc * 4 + pos % 4];
              code = pos % 8 < 4 ? (byte & 15) : (byte >> 4);
            }
            s += int32_t(x[pos]) * code;
          }
          const size_t t = (size_t(p) * a.n_groups + g) * kI8Cols + cc;
          s -= a.corr[t];
          if (a.zero != nullptr) s -= a.zero[t] * b.xsum[size_t(r) * a.n_groups + g];
          y = std::fmaf(float(s) * a.scale[t], b.sx[r], y);
        }
        b.y[r * b.ldy + c] = y;
      }
    }
  }
}

}  // namespace dllmq::kern
