// y = x W^T (+ b) with W kept in its stored dtype (bf16/f16/f32), on the GEMM backend of
// ops/gemm.h. f32 weights are multiplied in place; 16-bit weights are widened to f32 panel by
// panel into per-thread scratch (no f32 copy of the model ever exists), or, in bf16 compute on a
// CPU with bf16 dot products, multiplied as they are stored.
#pragma once

#include <span>
#include <string>

#include "io/safetensors.h"

namespace dllmq {

// Precision of the projections. kF32: f32 inputs and accumulation (exact against the f64
// references). kBF16: inputs rounded to bf16 (activations and, for f32 checkpoints, weights),
// products and sums in f32 (the numerics of the released models under torch bf16 autocast);
// norms, softmax, RoPE and attention stay f32 in both.
enum class ComputeDType { kF32, kBF16 };

ComputeDType parse_compute_dtype(const std::string& s);  // "fp32" | "bf16"; throws otherwise
const char* compute_dtype_name(ComputeDType d);

struct Linear {
  const TensorView* w = nullptr;  // [out, in]
  const TensorView* b = nullptr;  // [out] or null
  int out = 0;
  int in = 0;
};

// x: [n, in] f32, y: [n, out] f32 (row stride `ldy`, default out).
void linear(const float* x, int n, const Linear& l, float* y, int ldy = 0,
            ComputeDType dt = ComputeDType::kF32);

// One block of rows of a grouped product: x [n, in] -> y [n, ldy].
struct LinearRows {
  const float* x = nullptr;
  int n = 0;
  float* y = nullptr;
  // A tile of a stacked product (model/stacked_gemm.h): rows of several canvases, a shape no lone
  // forward has, so it owes no forward its threading context. Tiles run side by side, one GEMM
  // per thread; whether that gives every row its lone forward's bits is what
  // stacked_gemm_exact checks.
  bool tile = false;
};

// The same weights applied to several independent row blocks (the canvases of a batched
// forward). Each weight panel is widened once and multiplied with every block in a GEMM call of
// that block's own shape, so every block's result is bit-identical to linear() on it alone: a
// GEMM library may pick other kernels, hence other summation orders, for another row count.
// Blocks marked `tile` are spread over the threads instead (each panel widened once per thread).
void linear_grouped(std::span<const LinearRows> blocks, const Linear& l, int ldy = 0,
                    ComputeDType dt = ComputeDType::kF32);

// Whether linear_grouped spreads small blocks and tiles of `l` over the threads as (panel,
// block) pairs (a weight of fewer panels than threads), rather than splitting it by panel.
bool pairs_blocks(const Linear& l);

// Makes BLAS calls single-threaded (the engine parallelises around them). Idempotent.
void blas_use_one_thread();

// Scalar reference twin (double accumulation) for tests; kBF16 rounds x and W to bf16 first.
void linear_ref(const float* x, int n, const Linear& l, float* y,
                ComputeDType dt = ComputeDType::kF32);

// Row `row` of a [rows, d] tensor widened to f32 (embedding lookup, norm weights).
void tensor_row_f32(const TensorView& t, int64_t row, int d, float* dst);

// Rounds each value to the nearest bf16 (ties to even), kept as f32. Finite inputs.
void round_to_bf16(const float* src, float* dst, size_t n);

}  // namespace dllmq
