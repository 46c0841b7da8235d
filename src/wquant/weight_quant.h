// Integer weight codes of one projection W [n, k] (y = x W^T), the scheme GPTQ checkpoints use:
// code q in [0, 2^bits), per (group, output column) a scale s (an fp16 value) and an integer zero
// point z, and g_idx mapping each input column k to its group. The weight a code stands for is
//
//     w[c, k] = float(q[c, k] - z[g_idx[k], c]) * s[g_idx[k], c]      (one f32 multiply)
//
// (q - z is exact, so the f32 product is the only rounding). The packed kernels
// (ops/packed_gemm.h) compute exactly this in registers; dequantize() writes it out.
//
// Round-to-nearest quantization (quantize_rtn), per output column c and group of input columns
// [g * G, min((g + 1) * G, k)) (G = k for int8's default: one group, i.e. per output channel),
// all in f32 on the weights widened from their stored dtype, maxq = 2^bits - 1:
//   sym:  a = max |w| over the group (1 if 0); s = fp16(2a / maxq); z = 2^(bits - 1)
//   asym: lo = min(0, min w), hi = max(0, max w) ((-1, 1) if both 0); s = fp16((hi - lo) / maxq);
//         z = clamp(rne(-lo / s), 0, maxq)
//   q = clamp(rne(w / s) + z, 0, maxq)
// rne: round half to even; fp16(): nearest fp16, ties to even, and s is used as that fp16 value
// from then on (the stored scale is the one the codes were chosen with). A scale that is 0 or
// not finite in fp16 is an error naming the tensor. This is GPTQ's quantizer (min/max including
// 0; symmetric zero point at the middle) without the Hessian update, with the symmetric range
// taken from max |w| on both sides.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "io/dtype.h"

namespace dllmq {

struct WeightQuantScheme {
  int bits = 4;          // 4 or 8
  int group_size = 128;  // input columns per group; -1: one group over all of k
  bool sym = true;
};

// Checks bits (4 or 8) and group size (-1, or a positive multiple of 8); `what` names the source
// (a flag, a config.json) in the error.
void check_weight_quant_scheme(const WeightQuantScheme& s, const std::string& what);

struct QuantMatrix {
  int bits = 4, n = 0, k = 0, n_groups = 0;
  std::vector<uint8_t> q;      // [n, k] row-major codes, each < 2^bits
  std::vector<int32_t> zero;   // [n_groups, n] zero points (checkpoint offsets already applied)
  std::vector<float> scale;    // [n_groups, n], fp16 values widened
  std::vector<int32_t> g_idx;  // [k] group of each input column, in [0, n_groups)
  float dequant(int c, int kk) const {
    const size_t g = size_t(g_idx[size_t(kk)]) * n + c;
    return float(int32_t(q[size_t(c) * k + kk]) - zero[g]) * scale[g];
  }
};

// Round-to-nearest codes of w [n, k] (stored as `dt`); throws naming `name` on a degenerate
// scale. g_idx is k / G (no reordering).
QuantMatrix quantize_rtn(const void* w, DType dt, int n, int k, const WeightQuantScheme& s,
                         const std::string& name);

// The weights the codes stand for, [n, k] row-major f32.
std::vector<float> dequantize(const QuantMatrix& m);

// The order in which the kernels run the reduction: input columns sorted by (g_idx[k], k), so
// that each group is one contiguous run (ascending k when g_idx does not decrease, as without
// desc_act). Every output is the f32 fmaf chain over this order.
std::vector<int32_t> reduction_order(const QuantMatrix& m);

// Bytes of the codes as stored (bits per weight), of the fp16 scales and of the packed zero
// points and int32 g_idx of the GPTQ layout: what the tensor costs on disk and in memory.
size_t quant_matrix_bytes(const QuantMatrix& m);

}  // namespace dllmq
