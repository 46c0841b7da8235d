// exp_shifted_sum written once for every vector width (ops/exp_sum.h). Included by
// exp_kernel_{avx2,avx512}.cpp and exp_sum.cpp (the portable twin) after they define, in an
// anonymous namespace, a traits struct V over 8 doubles (one AVX-512 vector, two AVX2 ones, or an
// array) with: D, load, store, set1, add, sub, mul, fma, round (to nearest even), pow2 (2^k of
// integer-valued lanes, as exp_c::pow2_scalar), all_in_range (whether every lane is in [lo, hi]),
// from_f32_neg (8 floats, negated, widened to doubles), from_f32 (widened), from_f32_sub (8 floats
// minus a float, in float, widened), store_f32 (rounds 8 lanes to float, stores them and returns
// them widened), max (vmaxpd's rule: b unless a > b), silu_store (g[j] = g[j] / (1 + float(e_j))
// * up[j] over the 8 lanes, in float, each operation rounded once as the scalar expression).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "ops/exp_constants.h"

namespace dllmq::kern {
namespace {

template <class V>
inline __attribute__((always_inline)) typename V::D exp_lanes(typename V::D x, bool* all_in) {
  using D = typename V::D;
  *all_in = V::all_in_range(x, exp_c::kLo, exp_c::kHi);
  const D k = V::round(V::mul(x, V::set1(exp_c::kInvLn2)));
  D r = V::fma(k, V::set1(-exp_c::kLn2Hi), x);
  r = V::fma(k, V::set1(-exp_c::kLn2Lo), r);
  D p = V::set1(exp_c::kC[13]);
#pragma GCC unroll 13
  for (int i = 12; i >= 0; --i) p = V::fma(p, r, V::set1(exp_c::kC[i]));
  return V::mul(p, V::pow2(k));
}

// exp of 8 lanes as exp_c::exp_scalar computes each: the polynomial, or (rarely: a lane outside
// [-708, 708], -inf or NaN) std::exp for such lanes.
template <class V>
inline typename V::D exp8(typename V::D x) {
  bool all_in;
  typename V::D e = exp_lanes<V>(x, &all_in);
  if (all_in) return e;
  alignas(64) double xs[8], es[8];
  V::store(xs, x);
  V::store(es, e);
  for (int j = 0; j < 8; ++j)
    if (!(xs[j] >= exp_c::kLo && xs[j] <= exp_c::kHi)) es[j] = std::exp(xs[j]);
  return V::load(es);
}

template <class V>
double exp_sum_impl(const double* l, int n, double m, double* out) {
  using D = typename V::D;
  const D mv = V::set1(m);
  D acc = V::set1(0.0);
  int v = 0;
  for (; v + 8 <= n; v += 8) {
    const D e = exp8<V>(V::sub(V::load(l + v), mv));
    if (out != nullptr) V::store(out + v, e);
    acc = V::add(acc, e);
  }
  alignas(64) double s[8];
  V::store(s, acc);
  double total = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; v < n; ++v) {
    const double e = exp_c::exp_scalar(l[v] - m);
    if (out != nullptr) out[v] = e;
    total += e;
  }
  return total;
}

// The largest of s[0 .. n): 8 running maxima over the lanes, then the lanes and the tail in order
// (the maximum of finite values does not depend on the order; a NaN is not looked for).
template <class V>
float max_f32_impl(const float* s, int n) {
  float mt = -std::numeric_limits<float>::infinity();
  int k = 0;
  if (n >= 8) {
    typename V::D mx = V::from_f32(s);
    for (k = 8; k + 8 <= n; k += 8) mx = V::max(mx, V::from_f32(s + k));
    alignas(64) double l[8];
    V::store(l, mx);
    for (double x : l) mt = std::max(mt, float(x));
  }
  for (; k < n; ++k) mt = std::max(mt, s[k]);
  return mt;
}

// s[k] = float(exp(double(s[k] - m))) (the difference in float), returning the sum of the stored
// floats in exp_sum_impl's fixed order.
template <class V>
double exp_sub_f32_impl(float* s, int n, float m) {
  typename V::D acc = V::set1(0.0);
  int v = 0;
  for (; v + 8 <= n; v += 8)
    acc = V::add(acc, V::store_f32(s + v, exp8<V>(V::from_f32_sub(s + v, m))));
  alignas(64) double a[8];
  V::store(a, acc);
  double total = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
  for (; v < n; ++v) {
    s[v] = static_cast<float>(exp_c::exp_scalar(double(s[v] - m)));
    total += s[v];
  }
  return total;
}

// SwiGLU's gate: gate[i] = g / (1 + e) * up[i] in float, e = float(exp(-g)) with exp as above (in
// double, then rounded: the correctly rounded expf except where a double result lies within
// 2^-29 ulp of a float rounding boundary).
template <class V>
void silu_mul_impl(float* gate, const float* up, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const typename V::D e = exp8<V>(V::from_f32_neg(gate + i));
    V::silu_store(gate + i, e, up + i);
  }
  for (; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + static_cast<float>(exp_c::exp_scalar(-double(g)))) * up[i];
  }
}

}  // namespace
}  // namespace dllmq::kern
