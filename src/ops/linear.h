// y = x W^T (+ b) with W in its stored dtype (bf16/f16/f32) on the packed-weight micro-kernels
// of ops/packed_gemm.h: weights packed once (pack_linear, at model load) into K-major panels of
// the same bytes, widened in registers, one f32 FMA chain per output in ascending k, so a row's
// bits do not depend on the rows beside it, the tiling, the threads or the instruction set. In
// bf16 compute on a CPU whose bf16 dot-product kernel (oneDNN) measured faster, bf16 weights are
// multiplied by it instead (ops/gemm.h, bf16_native).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>

#include "io/safetensors.h"
#include "wquant/weight_quant.h"

namespace dllmq {

// Precision of the projections. kF32: f32 inputs and accumulation (exact against the f64
// references). kBF16: inputs rounded to bf16 (activations and, for f32 checkpoints, weights),
// products and sums in f32 (the numerics of the released models under torch bf16 autocast);
// norms, softmax, RoPE and attention stay f32 in both (attention's two products take bf16
// operands on AMX tiles where bf16 compute's products run there: ops/attention_amx.h).
enum class ComputeDType { kF32, kBF16 };

ComputeDType parse_compute_dtype(const std::string& s);  // "fp32" | "bf16"; throws otherwise
const char* compute_dtype_name(ComputeDType d);

struct PackedWeight;
struct Int8ActWeight;

struct Linear {
  const TensorView* w = nullptr;  // [out, in]; null for integer codes (`quant`)
  const TensorView* b = nullptr;  // [out] or null
  int out = 0;
  int in = 0;
  // `w` packed for the micro-kernels (pack_linear); null: each product packs it anew (tests,
  // one-off products), same bits, slower.
  std::shared_ptr<const PackedWeight> packed = nullptr;
  // Integer codes of a quantized checkpoint (wquant/), in place of `w`: `quant` itself, or
  // `decode`, which makes them when pack_linear needs them (a checkpoint's projections are
  // decoded one at a time: model/weights.cpp); pack_linear packs them into `packed` and drops
  // both. quant_bits / quant_bytes: the codes' bits and stored bytes (for `decode`).
  std::shared_ptr<const QuantMatrix> quant = nullptr;
  std::function<QuantMatrix()> decode = nullptr;
  int quant_bits = 0;
  size_t quant_bytes = 0;
  // --w8a8: the codes repacked for int8 activations (ops/int8_act_gemm.h), in place of `packed`.
  std::shared_ptr<const Int8ActWeight> a8 = nullptr;
  bool empty() const {
    return w == nullptr && quant == nullptr && !decode && packed == nullptr && a8 == nullptr;
  }
  // Bits per weight: 8 or 4 for codes, else the stored dtype's.
  int weight_bits() const;
};

// Packs l.w (or l.quant, which it then drops) for the kernels of the dispatched instruction set
// (util/cpu_isa.h), on the OpenMP threads. Idempotent. With dt = kBF16 where bf16 compute runs on
// AMX tiles (gemm_info().bf16_amx), float weights are packed for those (ops/amx_gemm.h) instead;
// such a Linear then multiplies only in bf16 compute (Model::set_compute_dtype repacks).
void pack_linear(Linear& l, ComputeDType dt = ComputeDType::kF32);
// Whether l's packed layout is the one pack_linear(l, dt) makes (false when it is unpacked).
bool packed_for(const Linear& l, ComputeDType dt);

// x: [n, in] f32, y: [n, out] f32 (row stride `ldy`, default out).
void linear(const float* x, int n, const Linear& l, float* y, int ldy = 0,
            ComputeDType dt = ComputeDType::kF32);

// One block of rows of a grouped product: x [n, in] -> y [n, ldy].
struct LinearRows {
  const float* x = nullptr;
  int n = 0;
  float* y = nullptr;
  // A tile of a stacked product (model/stacked_gemm.h): rows of several canvases. With the
  // packed kernels a tile is multiplied like any block (a row's bits do not depend on its
  // neighbours); the flag is kept for callers and for the oneDNN bf16 path, which runs tiles
  // side by side, one GEMM per thread.
  bool tile = false;
};

// The same weights applied to several independent row blocks (the canvases of a batched
// forward), in one pass: the threads split the weight's panels (or, for a weight of few panels,
// the rows), and each panel's K block is multiplied with every block's rows while it is in
// cache. Every block's result is bit-identical to linear() on it alone (one FMA chain per
// output; on the oneDNN bf16 path, one GEMM call per block of its own shape).
void linear_grouped(std::span<const LinearRows> blocks, const Linear& l, int ldy = 0,
                    ComputeDType dt = ComputeDType::kF32);

// Whether linear_grouped spreads small blocks and tiles of `l` over the threads one block per
// thread (the oneDNN bf16 path on a weight of fewer panels than threads) rather than splitting
// every block's work across them; a stacked layout then gives each thread an equal share.
bool pairs_blocks(const Linear& l);

// Makes BLAS calls single-threaded (the engine parallelises around them). Idempotent.
void blas_use_one_thread();

// Scalar reference (double accumulation) for tests; kBF16 rounds x and W to bf16 first. (The
// packed kernels' bit-exact twin is gemm_fma_ref in ops/packed_gemm.h.)
void linear_ref(const float* x, int n, const Linear& l, float* y,
                ComputeDType dt = ComputeDType::kF32);

// Row `row` of a [rows, d] tensor widened to f32 (embedding lookup, norm weights).
void tensor_row_f32(const TensorView& t, int64_t row, int d, float* dst);

// Rounds each value to the nearest bf16 (ties to even), kept as f32. Finite inputs.
void round_to_bf16(const float* src, float* dst, size_t n);

}  // namespace dllmq
