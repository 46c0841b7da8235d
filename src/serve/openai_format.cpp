#include "serve/openai_format.h"
#include "util/json_limits.h"

#include <atomic>
#include <chrono>

#include <fmt/format.h>

namespace dllmq::serve {

using nlohmann::json;

ResponseHead make_head(Endpoint e, const std::string& model) {
  static std::atomic<uint64_t> counter{0};
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const char* prefix = e == Endpoint::kChat ? "chatcmpl" : "cmpl";
  return {e, fmt::format("{}-{:x}{:06x}", prefix, now, counter.fetch_add(1) & 0xffffff), now,
          model};
}

json usage_json(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

namespace {

json dllmq_extension(const ChoiceOut& c) {
  const GenerateResult& r = *c.result;
  return {{"tokens", r.tokens},     {"nfe", r.nfe},
          {"steps", r.steps},       {"decode_s", r.time_s},
          {"queue_s", c.queue_s},   {"max_batch", c.max_batch},
          {"kv_bytes", r.kv_bytes}, {"kv_bytes_fp16", r.kv_bytes_fp16},
          {"kv_store", r.kv_store}};
}

json base(const ResponseHead& h, const char* object) {
  return {{"id", h.id}, {"object", object}, {"created", h.created}, {"model", h.model}};
}

}  // namespace

json response_json(const ResponseHead& h, const std::vector<ChoiceOut>& choices,
                   const json& usage) {
  const bool chat = h.endpoint == Endpoint::kChat;
  json j = base(h, chat ? "chat.completion" : "text_completion");
  json arr = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceOut& c = choices[i];
    json ch = {{"index", i}, {"finish_reason", c.finish_reason}, {"logprobs", nullptr}};
    if (chat)
      ch["message"] = {{"role", "assistant"}, {"content", c.text}};
    else
      ch["text"] = c.text;
    if (c.result != nullptr) ch["dllmq"] = dllmq_extension(c);
    arr.push_back(std::move(ch));
  }
  j["choices"] = std::move(arr);
  j["usage"] = usage;
  return j;
}

json chunk_json(const ResponseHead& h, const std::string& delta, bool first,
                const std::string& finish_reason) {
  const bool chat = h.endpoint == Endpoint::kChat;
  json j = base(h, chat ? "chat.completion.chunk" : "text_completion");
  json ch = {{"index", 0},
             {"finish_reason", finish_reason.empty() ? json(nullptr) : json(finish_reason)},
             {"logprobs", nullptr}};
  if (chat) {
    json d = json::object();  // the closing chunk's delta is empty
    if (first) d["role"] = "assistant";
    if (!delta.empty() || (first && finish_reason.empty())) d["content"] = delta;
    ch["delta"] = std::move(d);
  } else {
    ch["text"] = delta;
  }
  j["choices"] = json::array({std::move(ch)});
  return j;
}

json usage_chunk_json(const ResponseHead& h, const json& usage) {
  json j = base(h, h.endpoint == Endpoint::kChat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = json::array();
  j["usage"] = usage;
  return j;
}

json step_json(const Job::Step& s, const settings::TextCodec& codec, int mask_id) {
  json canvas = json::array();
  int masked = 0;
  for (int32_t id : s.canvas) {
    if (id == mask_id) {
      canvas.push_back(nullptr);
      ++masked;
    } else {
      canvas.push_back(codec.piece(id));
    }
  }
  return {{"object", "dllmq.step"}, {"step", s.step},   {"block", s.block},
          {"revealed", s.revealed}, {"masked", masked}, {"canvas", std::move(canvas)},
          {"ids", s.canvas}};
}

std::string sse(const json& data, const char* event) {
  std::string s;
  if (event != nullptr) s += fmt::format("event: {}\n", event);
  s += "data: " + json_text(data) + "\n\n";
  return s;
}

}  // namespace dllmq::serve
