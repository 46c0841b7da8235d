// Decoding defaults a model directory may carry in generation_config.json (as HF generate
// uses it): the generation length (`max_new_tokens`) and dllmq's `block_length` / `steps`.
// Flags given on the command line always win; an absent file or field means "no default".
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dllmq {

struct GenerationDefaults {
  std::optional<int> gen_length;    // max_new_tokens
  std::optional<int> block_length;  // block_length (dllmq / Fast-dLLM naming)
  std::optional<int> steps;         // steps (Dream's diffusion steps naming)
  // mask_token_id: Dream's reference sampler reads the mask id from generation_config.json, not
  // config.json; dllmq reads config.json's, so the two must agree (check_generation_ids).
  std::optional<int64_t> mask_token_id;
};

struct ModelConfig;

// A generation_config.json that contradicts its config.json, or names a token outside the
// vocabulary, is refused with both files named. Called where a model directory is loaded.
void check_generation_ids(const GenerationDefaults& d, const ModelConfig& cfg,
                          const std::string& dir);

// Reads DIR/generation_config.json; throws naming the file and field when a present field is
// not a positive integer or the file is not a JSON object.
GenerationDefaults load_generation_defaults(const std::string& dir);
// The same checks on the text of a generation_config.json; `path` names it in errors.
GenerationDefaults parse_generation_defaults(const std::string& text, const std::string& path);

}  // namespace dllmq
