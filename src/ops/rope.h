// Rotary position embedding, NeoX half-rotation layout (LLaDA and Dream):
//   x' = x * cos + rotate_half(x) * sin,  rotate_half(x) = cat(-x[hd/2:], x[:hd/2]),
//   angle(p, i) = p / theta^(2i / hd) for i < hd/2.
#pragma once

#include <vector>

namespace dllmq {

class RopeTable {
 public:
  RopeTable(int head_dim, double theta) : hd_(head_dim), theta_(theta) {}

  // Grows the cos/sin table to cover positions [0, n); not thread-safe, call before parallel use.
  void reserve(int n);

  // Rotates rows of x: [n, n_heads * hd], row r at absolute position pos0 + r.
  void apply(float* x, int n, int n_heads, int pos0) const;
  // The inverse (= transpose) rotation, by -angle: maps post-RoPE rows back to pre-RoPE ones,
  // and a gradient with respect to post-RoPE values to one with respect to pre-RoPE values.
  void apply_inverse(float* x, int n, int n_heads, int pos0) const;

  int head_dim() const { return hd_; }

 private:
  template <bool kInverse>
  void rotate(float* x, int n, int n_heads, int pos0) const;

  int hd_;
  double theta_;
  int n_pos_ = 0;
  std::vector<float> cos_, sin_;  // [n_pos, hd/2]
};

// Scalar reference (angles in double) for tests.
void rope_ref(float* x, int n, int n_heads, int hd, int pos0, double theta);

}  // namespace dllmq
