#include "wquant/weight_quant.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "util/error.h"
#include "util/half.h"

namespace dllmq {

void check_weight_quant_scheme(const WeightQuantScheme& s, const std::string& what) {
  if (s.bits != 4 && s.bits != 8)
    fail("{}: weight bits {} not supported (accepted: 4 or 8)", what, s.bits);
  if (s.group_size != -1 && (s.group_size <= 0 || s.group_size % 8 != 0))
    fail(
        "{}: group size {} not supported (accepted: -1 for one group per output channel, or a "
        "positive multiple of 8)",
        what, s.group_size);
}

QuantMatrix quantize_rtn(const void* w, DType dt, int n, int k, const WeightQuantScheme& s,
                         const std::string& name) {
  check_weight_quant_scheme(s, name);
  const int G = s.group_size == -1 ? k : std::min(s.group_size, k);
  QuantMatrix m;
  m.bits = s.bits;
  m.n = n;
  m.k = k;
  m.n_groups = (k + G - 1) / G;
  m.q.resize(size_t(n) * k);
  m.zero.resize(size_t(m.n_groups) * n);
  m.scale.resize(size_t(m.n_groups) * n);
  m.g_idx.resize(k);
  for (int kk = 0; kk < k; ++kk) m.g_idx[kk] = kk / G;
  const int maxq = (1 << s.bits) - 1;
  const size_t esz = dtype_size(dt);
  std::vector<float> row(k);
  for (int c = 0; c < n; ++c) {
    to_f32(dt, static_cast<const uint8_t*>(w) + size_t(c) * k * esz, row.data(), k);
    for (int g = 0; g < m.n_groups; ++g) {
      const int k0 = g * G, k1 = std::min(k, k0 + G);
      float lo = 0.0f, hi = 0.0f;
      for (int kk = k0; kk < k1; ++kk) {
        if (!std::isfinite(row[kk]))
          fail("{}: weight [{}, {}] is not finite; cannot quantize", name, c, kk);
        lo = std::min(lo, row[kk]);
        hi = std::max(hi, row[kk]);
      }
      float s32;
      int32_t z;
      if (s.sym) {
        float a = std::max(-lo, hi);
        if (a == 0.0f) a = 1.0f;
        s32 = (a + a) / float(maxq);
        z = 1 << (s.bits - 1);
      } else {
        if (lo == 0.0f && hi == 0.0f) lo = -1.0f, hi = 1.0f;
        s32 = (hi - lo) / float(maxq);
        z = 0;  // set below from the fp16 scale
      }
      const float sc = f16_to_f32(f32_to_f16(s32));
      if (!(sc > 0.0f) || !std::isfinite(sc))
        fail(
            "{}: group {} of output column {} has scale {} that fp16 cannot hold (weights in "
            "[{}, {}]); quantize with a larger group or keep this tensor unquantized",
            name, g, c, s32, lo, hi);
      if (!s.sym) z = std::clamp(int32_t(std::nearbyint(-lo / sc)), 0, maxq);
      m.scale[size_t(g) * n + c] = sc;
      m.zero[size_t(g) * n + c] = z;
      for (int kk = k0; kk < k1; ++kk) {
        const float r = std::nearbyint(row[kk] / sc);  // default rounding mode: half to even
        const float qf = std::clamp(r + float(z), 0.0f, float(maxq));
        m.q[size_t(c) * k + kk] = uint8_t(qf);
      }
    }
  }
  return m;
}

std::vector<float> dequantize(const QuantMatrix& m) {
  std::vector<float> w(size_t(m.n) * m.k);
  for (int c = 0; c < m.n; ++c)
    for (int kk = 0; kk < m.k; ++kk) w[size_t(c) * m.k + kk] = m.dequant(c, kk);
  return w;
}

std::vector<int32_t> reduction_order(const QuantMatrix& m) {
  std::vector<int32_t> order(m.k);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return m.g_idx[a] < m.g_idx[b]; });
  return order;
}

size_t quant_matrix_bytes(const QuantMatrix& m) {
  const size_t codes = size_t(m.n) * m.k * m.bits / 8;
  const size_t per_group = size_t(m.n_groups) * m.n;
  return codes + per_group * 2 + per_group * m.bits / 8 + size_t(m.k) * 4;
}

}  // namespace dllmq
