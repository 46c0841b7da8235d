// exp over a row of logits in double, the costly part of the float64 softmax that ranks masked
// positions (decode/unmask_policy.cpp: upstream computes softmax(logits.to(float64))): 32 rows x
// the vocabulary per dual-cache step, which glibc's scalar exp took a quarter of a step for at a
// 32,000 vocabulary. Written once (exp_kernel_impl.h) for AVX-512, AVX2 and scalar, dispatched on
// util/cpu_isa.h's instruction set.
//
// Each term is exp_shifted(x) below, computed alike on every path (the same operations, each
// rounded once: bit for bit the scalar twin), and the sum is taken in one fixed order on every
// path: 8 partial sums, lane j over the terms j, j + 8, j + 16, ..., added as
// ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)), then the last n % 8 terms in order. So the
// result does not depend on the instruction set, and tests demand equality with the twin.
#pragma once

#include <cstddef>

namespace dllmq {

// exp(x): for x in [-708, 708], 2^k * p(r) with k = round(x / ln 2), r = x - k ln 2 (two-part
// ln 2, FMA) and p the degree-13 Taylor polynomial of exp evaluated by Horner's rule with FMA
// (within 2 ulp of the exact value; the tests measure it against std::exp); elsewhere (and for
// -inf, +inf, NaN) std::exp itself.
double exp_shifted(double x);

// sum over v of exp_shifted(l[v] - m) in the order above; when out is not null, out[v] receives
// each term. (l[v] = -inf contributes 0.)
double exp_shifted_sum(const double* l, int n, double m, double* out);

// The same on the portable path whatever the CPU (the twin the tests compare against).
double exp_shifted_sum_scalar(const double* l, int n, double m, double* out);

// SwiGLU's gating on one thread: gate[i] = g / (1 + float(exp_shifted(-g))) * up[i] in float
// (g = gate[i]): the exponential in double rounded to float is the correctly rounded expf except
// in vanishingly rare ties, and the same bits on every instruction set (ops/norm_act.h's
// silu_mul splits rows over the threads and calls this).
void silu_mul_vec(float* gate, const float* up, size_t n);
void silu_mul_scalar(float* gate, const float* up, size_t n);  // the portable twin

// Attention's online softmax over one row of a score tile (ops/attention.cpp), on the vector
// units: the row's maximum, and s[k] = float(exp_shifted(double(s[k] - m))) with the difference
// taken in float (the correctly rounded expf of it, as above), returning the sum of the stored
// terms taken in double in the fixed order of exp_shifted_sum. The same bits on every
// instruction set; the _scalar forms are the twins.
float max_f32(const float* s, int n);
float max_f32_scalar(const float* s, int n);
double exp_sub_f32(float* s, int n, float m);
double exp_sub_f32_scalar(float* s, int n, float m);

}  // namespace dllmq
