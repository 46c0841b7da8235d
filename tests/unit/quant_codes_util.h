// Random weights and their integer codes, shared by the tests of the integer-code kernels
// (test_weight_quant.cpp, test_int8_act.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "wquant/weight_quant.h"

namespace dllmq::testutil {

inline std::vector<float> normal(size_t n, float sd, std::mt19937& g) {
  std::normal_distribution<float> nd(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = nd(g);
  return v;
}

// Codes of random f32 weights (a few large ones, an all-positive row), then, with `desc_act`,
// g_idx of a random permutation's groups as GPTQ's act-order writes them.
inline QuantMatrix random_codes(int n, int k, const WeightQuantScheme& s, bool desc_act,
                                std::mt19937& g) {
  std::vector<float> w = normal(size_t(n) * k, 0.05f, g);
  for (size_t i = 0; i < w.size(); i += 53) w[i] *= 20.0f;
  for (int kk = 0; kk < k; ++kk) w[kk] = std::abs(w[kk]);  // row 0 without negatives
  QuantMatrix m = quantize_rtn(w.data(), DType::kF32, n, k, s, "test");
  if (desc_act) {
    std::vector<int> perm(k);
    for (int i = 0; i < k; ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), g);
    const int G = s.group_size == -1 ? k : s.group_size;
    for (int i = 0; i < k; ++i) m.g_idx[perm[i]] = i / G;
  }
  return m;
}

}  // namespace dllmq::testutil
