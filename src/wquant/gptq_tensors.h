// The GPTQ checkpoint layout of a quantized projection `<base>` (AutoGPTQ / GPTQModel, read by
// Hugging Face transformers), for W [n, k] (n outputs, k inputs), pf = 32 / bits codes per int32:
//   <base>.qweight  I32 [k / pf, n]   qweight[i, c] bits [b*j, b*j + b) = q[c, i * pf + j]
//   <base>.qzeros   I32 [G, n / pf]   qzeros[g, i]  bits [b*j, b*j + b) = z[g, i * pf + j] - off
//   <base>.scales   F16 [G, n]
//   <base>.g_idx    I32 [k]           group of each input column (a permutation's groups with
//                                     desc_act), in [0, G)
// and `<base>.bias` unchanged. `off` is the zero-point offset of the checkpoint format:
// "gptq" (v1, what AutoGPTQ and GPTQModel save by default and transformers reads) stores z - 1
// and reads a field f as z = f + 1 (so a field of 2^b - 1 means 2^b, and z = 0 cannot be
// written); "gptq_v2" (GPTQModel's internal format) stores z itself.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "wquant/quant_config.h"
#include "wquant/weight_quant.h"

namespace dllmq {

struct GptqTensors {
  std::vector<int32_t> qweight, qzeros, g_idx;
  std::vector<uint16_t> scales;  // fp16 bits
  std::vector<int64_t> qweight_shape, qzeros_shape, scales_shape, g_idx_shape;
};

// Packs `m` in the layout above; `v1`: the "gptq" zero offset (every zero point must be >= 1).
// Throws naming `base` when a dimension does not divide into int32 words.
GptqTensors encode_gptq(const QuantMatrix& m, bool v1, const std::string& base);

// Reads `<base>.{qweight,qzeros,scales,g_idx}` from the checkpoint for W [n, k] under `qc`,
// validating every dtype, shape and g_idx value; errors name the tensor, the file and what was
// expected.
QuantMatrix decode_gptq(const Checkpoint& ckpt, const std::string& base, int n, int k,
                        const WeightQuantConfig& qc);

// The names decode_gptq reads, for the binder's bookkeeping of used tensors.
std::vector<std::string> gptq_tensor_names(const std::string& base);

}  // namespace dllmq
