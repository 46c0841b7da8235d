// y = x W^T (+ b) with W kept in its stored dtype (bf16/f16/f32). 16-bit weights are widened
// to f32 panel by panel into per-thread scratch and multiplied with BLAS sgemm, so no f32
// copy of the model ever exists.
#pragma once

#include "io/safetensors.h"

namespace dllmq {

struct Linear {
  const TensorView* w = nullptr;  // [out, in]
  const TensorView* b = nullptr;  // [out] or null
  int out = 0;
  int in = 0;
};

// x: [n, in] f32, y: [n, out] f32 (row stride `ldy`, default out).
void linear(const float* x, int n, const Linear& l, float* y, int ldy = 0);

// Makes BLAS calls single-threaded (the engine parallelises around them). Idempotent.
void blas_use_one_thread();

// Scalar reference twin (double accumulation) for tests.
void linear_ref(const float* x, int n, const Linear& l, float* y);

// Row `row` of a [rows, d] tensor widened to f32 (embedding lookup, norm weights).
void tensor_row_f32(const TensorView& t, int64_t row, int d, float* dst);

}  // namespace dllmq
