// W8A8 / W4A8 (--w8a8): y = x W^T with the activations quantized per row to int8 and the integer
// weight codes of a quantized checkpoint (wquant/), summed exactly in int32 by the integer dot
// product (AVX-512 VNNI vpdpbusd: 64 multiply-adds per instruction, four times the f32 FMA's 16)
// and scaled once per group. It is an approximation chosen by a flag (the activations lose
// precision: about 1/254 of each row's largest value); the exact path is the widening kernels of
// ops/packed_gemm.h.
//
// Definition. Per row i: a = max_k |x[i, k]|, sx = a / 127 (f32), xq[k] = clamp(rne(x[i, k] / sx),
// -127, 127) (all 0 when a = 0). Per output column c and group g (the weight's groups, in the
// reduction order of wquant/weight_quant.h):
//   A_g = sum over the group's k of xq[k] * (q[c, k] - z[g, c])         (exact integer)
//   y[i, c] = fmaf(float(A_g) * s[g, c], sx, y[i, c]) over g in order from 0.
// Non-finite activations give a NaN row (sx = NaN), never garbage.
//
// Every scheme (vpdpbusd multiplies unsigned by signed bytes): 8-bit symmetric codes are stored
// as q - z (a signed byte); 8-bit asymmetric ones as q - 128 with the zero point z - 128, and
// 4-bit ones as the unsigned nibble q with z, the zero point applied through the per-group sum
// of the activation codes. Only groups too long for int32 sums are refused.
//
// Layout: panels of 16 output columns; the k positions are the reduction order with every group
// padded with zero codes to a multiple of 8. 8 bits: per panel and k quad, 64 bytes, column c's 4
// signed codes at bytes 4c..4c+3. 4 bits: per panel and k octet, 64 bytes, byte 4c + j holding
// column c's code of the octet's k j in its low nibble and of k 4 + j in its high nibble.
// Activations enter as u8 = xq + 128; the sums are corrected by 128 * (the group's sum of codes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ops/int8_act_kernel.h"
#include "ops/packed_kernel.h"

namespace dllmq {

struct PackedWeight;
struct QuantMatrix;

struct Int8ActWeight {
  int bits = 8;
  int n = 0, k = 0, n_groups = 0;
  int kp = 0;                   // packed positions: the groups, each padded to a multiple of 8
  std::vector<int32_t> gstart;  // [n_groups + 1] group starts in packed positions
  std::vector<int32_t> src;     // [kp] input column of each packed position, -1 for padding
  bool identity = false;        // src is 0, 1, ..., k - 1 then padding (no desc_act, whole octets)
  std::vector<uint8_t> codes;   // [panels][kp / 4 (8 bits) or kp / 8 (4 bits)][64]
  std::vector<float> scale;     // [panels][n_groups][16]
  std::vector<int32_t> corr;    // [panels][n_groups][16]: 128 * the group's sum of codes
  std::vector<int32_t> zero;    // [panels][n_groups][16]: the stored codes' zero points (4 bits:
                                // z; 8-bit asym: z - 128); empty for 8-bit sym
  int panels() const { return (n + kern::kI8Cols - 1) / kern::kI8Cols; }
  // Bytes held: codes and the per-group tables.
  size_t bytes() const;
};

// Whether codes of this scheme can take the integer path (see above); `why` says why not.
bool int8_act_eligible(const PackedWeight& w, std::string* why = nullptr);

// Repacks the codes of `w` (integer codes, eligible) into the VNNI layout. Parallel over panels.
std::shared_ptr<const Int8ActWeight> pack_int8_act(const PackedWeight& w);

// Whether this process runs the VNNI kernel (AVX512-VNNI present and DLLMQ_ISA allows AVX-512);
// otherwise the scalar twin runs (same bits, slow). "avx512_vnni" or "scalar".
bool int8_act_vnni();
const char* int8_act_kernel_name();

// y = x W^T for each block (x f32 [m, k], y [m, n]), columns of panels [p0, p1) only (p1 = -1:
// all), on the calling thread. `scalar`: the twins (kernel and activation quantizer) on the same
// packed data.
void int8_act_gemm(const Int8ActWeight& w, std::span<const kern::Block> blocks, int p0 = 0,
                   int p1 = -1, bool scalar = false);

// The same product over every block on the OpenMP threads (panels split, or rows where the
// weight has few panels); bits do not depend on the split.
void int8_act_gemm_parallel(const Int8ActWeight& w, std::span<const kern::Block> blocks);

// The definition above written plainly on the unpacked codes (tests).
void int8_act_gemm_ref(const float* x, int m, int ldx, const QuantMatrix& q, float* y, int ldy);

// The per-row activation quantization of the definition: xq [k] int8 codes, returns sx.
float quantize_act_row(const float* x, int k, int8_t* xq);

}  // namespace dllmq
