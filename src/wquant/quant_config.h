// The weight quantization a checkpoint declares: `quantization_config` in config.json (the
// Hugging Face convention), or, for checkpoints saved by older AutoGPTQ, quantize_config.json.
// Only quant_method "gptq" (GPTQ layout, also written by `dllmq quantize`) is read; anything else
// is an error naming the field and what is accepted.
#pragma once

#include <string>

#include "wquant/weight_quant.h"

namespace dllmq {

struct WeightQuantConfig {
  bool enabled = false;  // false: no quantization_config, every weight in its stored dtype
  WeightQuantScheme scheme;
  bool desc_act = false;
  bool v1 = true;      // checkpoint_format "gptq" (zero points stored minus one) vs "gptq_v2"
  std::string source;  // the file it came from (for errors)
};

// Reads DIR/config.json's quantization_config, else DIR/quantize_config.json; disabled when
// neither declares one.
WeightQuantConfig load_weight_quant_config(const std::string& dir);

// The same on the JSON text of a config (the object holding quantization_config, or a
// quantize_config.json itself when `bare`); `path` names it in errors.
WeightQuantConfig parse_weight_quant_config(const std::string& text, const std::string& path,
                                            bool bare);

// quantization_config for config.json (quant_method gptq, bits, group_size, sym, desc_act,
// checkpoint_format), as a JSON object text.
std::string weight_quant_config_json(const WeightQuantConfig& qc);

// "int4-g128-sym", "int8-asym", "bf16" style label for reports.
std::string weight_format_label(const WeightQuantConfig& qc);

}  // namespace dllmq
