// The JSON bodies and server-sent events of the OpenAI completion and chat completion APIs, plus
// dllmq's extensions: per-choice decoding figures ("dllmq") and the denoising-step event.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "decode/generate.h"
#include "serve/job.h"
#include "serve/request.h"
#include "settings/text_codec.h"

namespace dllmq::serve {

// Identifies one response: its id ("cmpl-..." / "chatcmpl-..."), creation time and model name.
struct ResponseHead {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string id;
  int64_t created = 0;
  std::string model;
};
ResponseHead make_head(Endpoint e, const std::string& model);

struct ChoiceOut {
  std::string text;
  std::string finish_reason;  // "stop" | "length"
  const GenerateResult* result = nullptr;
  int max_batch = 0;
  double queue_s = 0.0;
};

nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens);
// The whole (non-streamed) response.
nlohmann::json response_json(const ResponseHead& h, const std::vector<ChoiceOut>& choices,
                             const nlohmann::json& usage);
// One streamed chunk of choice 0: a text delta (chat: the first one also carries the role)
// and/or the finish reason ("" for none).
nlohmann::json chunk_json(const ResponseHead& h, const std::string& delta, bool first,
                          const std::string& finish_reason);
// The chunk carrying only usage (stream_options.include_usage).
nlohmann::json usage_chunk_json(const ResponseHead& h, const nlohmann::json& usage);
// A denoising step: the generated region with each position's piece, null where still masked.
nlohmann::json step_json(const Job::Step& s, const settings::TextCodec& codec, int mask_id);

// One server-sent event: "data: ...\n\n", with "event: NAME" first when named.
std::string sse(const nlohmann::json& data, const char* event = nullptr);
inline const char* kSseDone = "data: [DONE]\n\n";

}  // namespace dllmq::serve
