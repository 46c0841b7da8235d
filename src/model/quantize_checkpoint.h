// `dllmq quantize`: a checkpoint directory rewritten with its projection weights as integer
// codes (wquant/weight_quant.h) in the GPTQ layout (wquant/gptq_tensors.h), loadable by dllmq
// and by GPTQ loaders alike.
#pragma once

#include <string>

#include "wquant/weight_quant.h"

namespace dllmq {

struct QuantizeReport {
  int n_quantized = 0;           // projection tensors quantized
  size_t proj_bytes_before = 0;  // those tensors in their stored dtype
  size_t proj_bytes_after = 0;   // their codes, scales, zero points and g_idx
  size_t total_bytes_before = 0, total_bytes_after = 0;  // whole safetensors data
};

// Reads the model in `in_dir` (LLaDA, Dream or LLaDA-MoE), quantizes every attention and MLP
// projection (and MoE expert) by round-to-nearest under `s`, and writes `out_dir`:
// model.safetensors (projections as <name>.qweight/.qzeros/.scales/.g_idx, every other tensor
// unchanged: embeddings, norms, the LM head, MoE routers), config.json with quantization_config,
// and every other file of `in_dir` (tokenizer, generation config) copied. Symmetric schemes are
// written in the "gptq" (v1) format; asymmetric ones in "gptq_v2", since v1 cannot store a zero
// point of 0. Every file is written to a temporary name and renamed. Throws naming the flag,
// tensor or file on any defect (an already quantized input, out_dir == in_dir, a dimension not a
// multiple of 8).
QuantizeReport quantize_checkpoint(const std::string& in_dir, const std::string& out_dir,
                                   const WeightQuantScheme& s);

}  // namespace dllmq
