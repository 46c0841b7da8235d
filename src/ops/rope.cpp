#include "ops/rope.h"

#include <cassert>
#include <cmath>

namespace dllmq {

void RopeTable::reserve(int n) {
  if (n <= n_pos_) return;
  const int half = hd_ / 2;
  cos_.resize(size_t(n) * half);
  sin_.resize(size_t(n) * half);
  for (int p = n_pos_; p < n; ++p) {
    for (int i = 0; i < half; ++i) {
      // inv_freq in f32 as the references compute it, angle in double for accuracy.
      const float inv = 1.0f / static_cast<float>(std::pow(theta_, double(2 * i) / hd_));
      const double a = double(p) * double(inv);
      cos_[size_t(p) * half + i] = static_cast<float>(std::cos(a));
      sin_[size_t(p) * half + i] = static_cast<float>(std::sin(a));
    }
  }
  n_pos_ = n;
}

void RopeTable::apply(float* x, int n, int n_heads, int pos0) const {
  rotate<false>(x, n, n_heads, pos0);
}

void RopeTable::apply_inverse(float* x, int n, int n_heads, int pos0) const {
  rotate<true>(x, n, n_heads, pos0);
}

template <bool kInverse>
void RopeTable::rotate(float* x, int n, int n_heads, int pos0) const {
  assert(pos0 + n <= n_pos_);
  const int half = hd_ / 2;
  // Split from 16,384 values, as ops/norm_act.cpp's row-wise operations.
#pragma omp parallel for schedule(static) if (size_t(n) * n_heads * hd_ > 16384)
  for (int r = 0; r < n; ++r) {
    const float* c = cos_.data() + size_t(pos0 + r) * half;
    const float* s = sin_.data() + size_t(pos0 + r) * half;
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + (size_t(r) * n_heads + h) * hd_;
#pragma omp simd
      for (int i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half], si = kInverse ? -s[i] : s[i];
        v[i] = a * c[i] - b * si;
        v[i + half] = b * c[i] + a * si;
      }
    }
  }
}

void rope_ref(float* x, int n, int n_heads, int hd, int pos0, double theta) {
  const int half = hd / 2;
  for (int r = 0; r < n; ++r)
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + (size_t(r) * n_heads + h) * hd;
      for (int i = 0; i < half; ++i) {
        // inv_freq rounded to f32 like the PyTorch references; everything else in double.
        const float inv = 1.0f / float(std::pow(theta, double(2 * i) / hd));
        double ang = double(pos0 + r) * double(inv);
        double a = v[i], b = v[i + half];
        v[i] = float(a * std::cos(ang) - b * std::sin(ang));
        v[i + half] = float(b * std::cos(ang) + a * std::sin(ang));
      }
    }
}

}  // namespace dllmq
