// Decoding defaults a model directory may carry in generation_config.json (as HF generate
// uses it): the generation length (`max_new_tokens`) and dllmq's `block_length` / `steps`.
// Flags given on the command line always win; an absent file or field means "no default".
#pragma once

#include <optional>
#include <string>

namespace dllmq {

struct GenerationDefaults {
  std::optional<int> gen_length;    // max_new_tokens
  std::optional<int> block_length;  // block_length (dllmq / Fast-dLLM naming)
  std::optional<int> steps;         // steps (Dream's diffusion steps naming)
};

// Reads DIR/generation_config.json; throws naming the file and field when a present field is
// not a positive integer or the file is not a JSON object.
GenerationDefaults load_generation_defaults(const std::string& dir);
// The same checks on the text of a generation_config.json; `path` names it in errors.
GenerationDefaults parse_generation_defaults(const std::string& text, const std::string& path);

}  // namespace dllmq
