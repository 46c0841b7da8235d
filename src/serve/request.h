// An OpenAI completion or chat completion request, validated before it is queued: every prompt
// tokenized and within the canvas limit, the decoding options resolved over the server's
// defaults and checked against the model (so decoding cannot fail on them later). Any problem
// is an ApiError (400) naming the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "decode/generate.h"
#include "settings/generate_flags.h"
#include "settings/text_codec.h"

namespace dllmq::serve {

enum class Endpoint { kCompletions, kChat };

// What every request starts from.
struct RequestDefaults {
  settings::GenerateFlags flags;  // the server's decoding flags
  std::string model_dir;          // for generation_config.json defaults
  int max_positions = 0;          // prompt + generated tokens of one canvas at most
};

struct CompletionRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::vector<std::vector<int32_t>> prompts;  // one choice each
  GenerateOptions options;
  bool stream = false;
  bool stream_steps = false;   // extension: every denoising step's canvas as an SSE event
  bool include_usage = false;  // stream_options.include_usage
  std::vector<std::string> stop;
  std::string model;  // as the client named it ("" if it did not)
};

CompletionRequest parse_request(const std::string& body, Endpoint endpoint,
                                const RequestDefaults& defaults, const settings::TextCodec& codec,
                                const ModelConfig& cfg);

}  // namespace dllmq::serve
