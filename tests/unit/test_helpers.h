// Small helpers shared by the kernel tests: seeded normal data, the largest difference, and a
// TensorView over owned storage in a chosen dtype (the weights a Linear points at).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "io/safetensors.h"
#include "util/half.h"

namespace dllmq::test_util {

inline std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// The value the AMX tile unit multiplies: bf16, a denormal as zero.
inline double tile_value(uint16_t h) {
  if ((h & 0x7f80u) == 0) return 0.0;
  return bf16_to_f32(h);
}

// bf16 of an activation as the AMX kernels convert it: a denormal to zero, then nearest even.
inline uint16_t act_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0) u &= 0x80000000u;
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// Values rounded to dt (f32 kept as is, f16 / bf16 to nearest) behind a TensorView.
struct OwnedTensor {
  std::vector<uint16_t> h;
  std::vector<float> f;
  TensorView t;
  OwnedTensor(const std::vector<float>& vals, std::vector<int64_t> shape, DType dt) {
    t.dtype = dt;
    t.shape = std::move(shape);
    if (dt == DType::kF32) {
      f = vals;
      t.data = f.data();
    } else {
      for (float v : vals) h.push_back(dt == DType::kBF16 ? f32_to_bf16(v) : f32_to_f16(v));
      t.data = h.data();
    }
    t.nbytes = vals.size() * dtype_size(dt);
  }
  // Element i as the tensor holds it, widened to f32.
  float at(size_t i) const {
    if (t.dtype == DType::kF32) return f[i];
    return t.dtype == DType::kBF16 ? bf16_to_f32(h[i]) : f16_to_f32(h[i]);
  }
};

}  // namespace dllmq::test_util
