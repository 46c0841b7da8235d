// Internal: the instruction-set kernels of ops/exp_sum.h (exp_kernel_{avx2,avx512}.cpp, each
// compiled with its set's flags); exp_sum.cpp dispatches and holds the portable twin.
#pragma once

#include <cstddef>

namespace dllmq::kern {

double exp_sum_avx2(const double* l, int n, double m, double* out);
double exp_sum_avx512(const double* l, int n, double m, double* out);
void silu_mul_avx2(float* gate, const float* up, size_t n);
void silu_mul_avx512(float* gate, const float* up, size_t n);
float max_f32_avx2(const float* s, int n);
float max_f32_avx512(const float* s, int n);
double exp_sub_f32_avx2(float* s, int n, float m);
double exp_sub_f32_avx512(float* s, int n, float m);

}  // namespace dllmq::kern
