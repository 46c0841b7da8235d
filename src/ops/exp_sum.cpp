#include "ops/exp_sum.h"

#include <cmath>

#include "ops/exp_constants.h"
#include "ops/exp_kernel.h"
#include "util/cpu_isa.h"

namespace dllmq::kern {
namespace {

// The portable lanes: 8 doubles in an array, each operation the scalar one (std::fma, rounding
// to nearest even with nearbyint), so each lane computes exp_c::exp_scalar exactly.
struct VScalar {
  struct D {
    double x[8];
  };
  template <class F>
  static D map(F f) {
    D r;
    for (int j = 0; j < 8; ++j) r.x[j] = f(j);
    return r;
  }
  static D load(const double* p) {
    return map([&](int j) { return p[j]; });
  }
  static void store(double* p, const D& v) {
    for (int j = 0; j < 8; ++j) p[j] = v.x[j];
  }
  static D set1(double v) {
    return map([&](int) { return v; });
  }
  static D add(const D& a, const D& b) {
    return map([&](int j) { return a.x[j] + b.x[j]; });
  }
  static D sub(const D& a, const D& b) {
    return map([&](int j) { return a.x[j] - b.x[j]; });
  }
  static D mul(const D& a, const D& b) {
    return map([&](int j) { return a.x[j] * b.x[j]; });
  }
  static D fma(const D& a, const D& b, const D& c) {
    return map([&](int j) { return std::fma(a.x[j], b.x[j], c.x[j]); });
  }
  static D round(const D& a) {
    return map([&](int j) { return std::nearbyint(a.x[j]); });
  }
  static D pow2(const D& k) {
    return map([&](int j) { return exp_c::pow2_scalar(k.x[j]); });
  }
  static D from_f32_neg(const float* p) {
    return map([&](int j) { return -double(p[j]); });
  }
  static D from_f32(const float* p) {
    return map([&](int j) { return double(p[j]); });
  }
  static D from_f32_sub(const float* p, float m) {
    return map([&](int j) { return double(p[j] - m); });
  }
  static D store_f32(float* p, const D& e) {
    for (int j = 0; j < 8; ++j) p[j] = static_cast<float>(e.x[j]);
    return map([&](int j) { return double(p[j]); });
  }
  // As vmaxpd: the second operand unless the first is greater (so a NaN lane yields b).
  static D max(const D& a, const D& b) {
    return map([&](int j) { return a.x[j] > b.x[j] ? a.x[j] : b.x[j]; });
  }
  static void silu_store(float* g, const D& e, const float* up) {
    for (int j = 0; j < 8; ++j) g[j] = g[j] / (1.0f + static_cast<float>(e.x[j])) * up[j];
  }
  static bool all_in_range(const D& a, double lo, double hi) {
    for (double v : a.x)
      if (!(v >= lo && v <= hi)) return false;
    return true;
  }
};

}  // namespace
}  // namespace dllmq::kern

#include "ops/exp_kernel_impl.h"

namespace dllmq {

namespace {

// The kernel of the dispatched instruction set (util/cpu_isa.h), chosen once per entry point.
template <class Fn>
Fn for_isa(Fn avx512, Fn avx2, Fn scalar) {
  switch (dispatch_isa()) {
    case Isa::kAvx512:
      return avx512;
    case Isa::kAvx2:
      return avx2;
    case Isa::kScalar:
      break;
  }
  return scalar;
}

}  // namespace

double exp_shifted(double x) {
  return kern::exp_c::exp_scalar(x);
}

double exp_shifted_sum_scalar(const double* l, int n, double m, double* out) {
  return kern::exp_sum_impl<kern::VScalar>(l, n, m, out);
}

double exp_shifted_sum(const double* l, int n, double m, double* out) {
  static const auto fn = for_isa(kern::exp_sum_avx512, kern::exp_sum_avx2, exp_shifted_sum_scalar);
  return fn(l, n, m, out);
}

void silu_mul_scalar(float* gate, const float* up, size_t n) {
  kern::silu_mul_impl<kern::VScalar>(gate, up, n);
}

void silu_mul_vec(float* gate, const float* up, size_t n) {
  static const auto fn = for_isa(kern::silu_mul_avx512, kern::silu_mul_avx2, silu_mul_scalar);
  fn(gate, up, n);
}

float max_f32_scalar(const float* s, int n) {
  return kern::max_f32_impl<kern::VScalar>(s, n);
}

float max_f32(const float* s, int n) {
  static const auto fn = for_isa(kern::max_f32_avx512, kern::max_f32_avx2, max_f32_scalar);
  return fn(s, n);
}

double exp_sub_f32_scalar(float* s, int n, float m) {
  return kern::exp_sub_f32_impl<kern::VScalar>(s, n, m);
}

double exp_sub_f32(float* s, int n, float m) {
  static const auto fn =
      for_isa(kern::exp_sub_f32_avx512, kern::exp_sub_f32_avx2, exp_sub_f32_scalar);
  return fn(s, n, m);
}

}  // namespace dllmq
