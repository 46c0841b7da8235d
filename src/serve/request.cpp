#include "serve/request.h"

#include <algorithm>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "serve/api_error.h"
#include "serve/decode_fields.h"
#include "util/error.h"
#include "util/json_limits.h"

namespace dllmq::serve {

namespace {

using nlohmann::json;

constexpr size_t kMaxStops = 16;
// String fields that are names or short markers, not text to decode: longer ones are refused (a
// stop sequence is matched against the answer as it grows; the rest are echoed or ignored).
constexpr size_t kMaxStopBytes = 1024;
constexpr size_t kMaxNameBytes = 1024;  // model, user, messages[i].name

void check_length(const std::string& field, const std::string& s, size_t max_bytes) {
  if (s.size() > max_bytes)
    bad_field(field, "{} is {} bytes; at most {} are accepted", field, s.size(), max_bytes);
}

// OpenAI fields that carry no meaning for a diffusion model: accepted at their neutral value
// (clients send them by default), refused otherwise, with the reason.
void check_neutral(const std::string& field, const json& v) {
  auto refuse = [&](const char* why) {
    bad_field(field, "{} {} is not supported: {}", field, json_brief(v), why);
  };
  if (field == "n" || field == "best_of") {
    if (!v.is_number_integer())
      bad_field(field, "{} must be an integer, got {}", field, json_brief(v));
    if (v.get<int64_t>() != 1) refuse("one choice per prompt (send several prompts instead)");
  } else if (field == "presence_penalty" || field == "frequency_penalty") {
    if (!v.is_number()) bad_field(field, "{} must be a number, got {}", field, json_brief(v));
    if (v.get<double>() != 0.0)
      refuse("a diffusion model reveals tokens in parallel, without penalties");
  } else if (field == "logprobs" || field == "top_logprobs") {
    if (!(v.is_boolean() || v.is_number_integer()))
      bad_field(field, "{} must be a boolean or an integer, got {}", field, json_brief(v));
    if ((v.is_boolean() && v.get<bool>()) || (v.is_number_integer() && v.get<int64_t>() != 0))
      refuse("masked diffusion has no left-to-right token log-probabilities");
  } else if (field == "echo") {
    if (!v.is_boolean()) bad_field(field, "echo must be true or false, got {}", json_brief(v));
    if (v.get<bool>()) refuse("the prompt is not returned");
  } else if (field == "logit_bias") {
    if (!v.is_object()) bad_field(field, "logit_bias must be an object, got {}", json_brief(v));
    if (!v.empty()) refuse("no logit biases");
  } else if (field == "suffix") {
    if (!v.is_string()) bad_field(field, "suffix must be a string, got {}", json_brief(v));
    if (!v.get<std::string>().empty()) refuse("no insertion after a suffix");
  } else if (field == "user") {
    if (!v.is_string()) bad_field(field, "user must be a string, got {}", json_brief(v));
    check_length(field, v.get_ref<const std::string&>(), kMaxNameBytes);
  }
}

const std::set<std::string>& neutral_fields() {
  static const std::set<std::string> s = {"n",
                                          "best_of",
                                          "presence_penalty",
                                          "frequency_penalty",
                                          "logprobs",
                                          "top_logprobs",
                                          "echo",
                                          "logit_bias",
                                          "suffix",
                                          "user"};
  return s;
}

std::vector<int32_t> id_array(const json& v, const std::string& field) {
  std::vector<int32_t> ids;
  for (const json& x : v) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX)
      bad_field(field, "{} must hold non-negative token ids, got {}", field, json_brief(x));
    ids.push_back(static_cast<int32_t>(x.get<int64_t>()));
  }
  return ids;
}

// "prompt": a string, an array of strings, an array of token ids, or an array of id arrays.
std::vector<std::vector<int32_t>> prompt_ids(const json& v, const settings::TextCodec& codec) {
  auto text = [&](const json& s) {
    try {
      return codec.prompt_ids(s.get<std::string>(), false, "");
    } catch (const Error& e) {
      bad_field("prompt", "{}", e.what());  // no tokenizer: only token-id prompts work
    }
  };
  if (v.is_string()) return {text(v)};
  if (!v.is_array() || v.empty())
    bad_field("prompt",
              "prompt must be a string, an array of strings, an array of token ids or an array "
              "of token-id arrays (non-empty), got {}",
              json_brief(v));
  if (v[0].is_number_integer()) return {id_array(v, "prompt")};
  std::vector<std::vector<int32_t>> out;
  for (const json& p : v) {
    if (p.is_string())
      out.push_back(text(p));
    else if (p.is_array())
      out.push_back(id_array(p, "prompt"));
    else
      bad_field("prompt", "prompt entries must be strings or token-id arrays, got {}",
                json_brief(p));
  }
  return out;
}

// "messages": [{"role": "system"|"user"|"assistant", "content": string | [{"type": "text",
// "text": string}]}, ...] rendered with the model's chat template.
std::vector<int32_t> chat_ids(const json& v, const settings::TextCodec& codec) {
  if (!v.is_array() || v.empty())
    bad_field("messages", "messages must be a non-empty array of {{role, content}} objects");
  std::vector<ChatMessage> msgs;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = fmt::format("messages[{}]", i);
    const json& m = v[i];
    if (!m.is_object()) bad_field(at, "{} must be an object with role and content", at);
    for (const auto& [k, x] : m.items())
      if (k != "role" && k != "content" && k != "name")
        bad_field(at + "." + k, "unknown field '{}' in {} (expected role, content, name)", k, at);
    if (m.contains("name")) {
      if (!m["name"].is_string())
        bad_field(at + ".name", "{}.name must be a string, got {}", at, json_brief(m["name"]));
      check_length(at + ".name", m["name"].get_ref<const std::string&>(), kMaxNameBytes);
    }
    if (!m.contains("role") || !m["role"].is_string())
      bad_field(at + ".role", "{}.role must be a string", at);
    const std::string role = m["role"];
    if (role != "system" && role != "user" && role != "assistant")
      bad_field(at + ".role", "{}.role must be system, user or assistant, got '{}'", at, role);
    std::string content;
    static const json kNone;
    const json& c = m.contains("content") ? m["content"] : kNone;
    if (c.is_string()) {
      content = c.get<std::string>();
    } else if (c.is_array()) {
      for (size_t pi = 0; pi < c.size(); ++pi) {
        // Every member's type is checked before it is read: a number where "type" or "text"
        // should be a string is the client's error (400), not the server's.
        const json& part = c[pi];
        const std::string pat = fmt::format("{}.content[{}]", at, pi);
        const bool text_part = part.is_object() && part.contains("type") &&
                               part["type"].is_string() && part["type"] == "text" &&
                               part.contains("text") && part["text"].is_string();
        if (!text_part)
          bad_field(pat, "{} must be {{\"type\": \"text\", \"text\": STRING}}, got {}", pat,
                    json_brief(part));
        for (const auto& [pk, pv] : part.items())
          if (pk != "type" && pk != "text")
            bad_field(pat + "." + pk, "unknown field '{}' in {} (expected type, text)", pk, pat);
        content += part["text"].get_ref<const std::string&>();
      }
    } else {
      bad_field(at + ".content", "{}.content must be a string or an array of text parts", at);
    }
    msgs.push_back({role, content});
  }
  try {
    return codec.chat_ids(msgs);
  } catch (const Error& e) {
    bad_field("messages", "{}", e.what());
  }
}

std::vector<std::string> stop_list(const json& v) {
  std::vector<std::string> out;
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    for (const json& s : v) {
      if (!s.is_string()) bad_field("stop", "stop must hold strings, got {}", json_brief(s));
      out.push_back(s.get<std::string>());
    }
  } else {
    bad_field("stop", "stop must be a string or an array of strings, got {}", json_brief(v));
  }
  if (out.size() > kMaxStops)
    bad_field("stop", "stop has {} sequences; at most {} are accepted", out.size(), kMaxStops);
  for (const std::string& s : out) {
    if (s.empty()) bad_field("stop", "stop sequences must not be empty");
    check_length("stop", s, kMaxStopBytes);
  }
  return out;
}

bool boolean(const json& v, const std::string& field) {
  if (!v.is_boolean()) bad_field(field, "{} must be true or false, got {}", field, json_brief(v));
  return v.get<bool>();
}

}  // namespace

CompletionRequest parse_request(const std::string& body, Endpoint endpoint,
                                const RequestDefaults& defaults, const settings::TextCodec& codec,
                                const ModelConfig& cfg) {
  // Depth first: a value nested deeper than any request needs is refused before it is built
  // (copying, comparing or echoing it would recurse once per level).
  if (const size_t at = json_depth_exceeded_at(body, kMaxRequestJsonDepth); at != std::string::npos)
    throw ApiError(400, "",
                   fmt::format("the request body nests arrays/objects deeper than {} levels (at "
                               "byte {}); this server accepts at most {}",
                               kMaxRequestJsonDepth, at, kMaxRequestJsonDepth));
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw ApiError(400, "", "the request body is not valid JSON");
  if (!j.is_object()) throw ApiError(400, "", "the request body must be a JSON object");

  CompletionRequest r;
  r.endpoint = endpoint;
  const char* prompt_field = endpoint == Endpoint::kChat ? "messages" : "prompt";
  json decode = json::object();
  std::optional<int64_t> max_tokens;
  std::string max_tokens_field;
  const json* prompt = nullptr;
  for (const auto& [k, v] : j.items()) {
    if (v.is_null()) continue;  // clients send absent options as null
    if (k == prompt_field) {
      prompt = &v;
    } else if (k == "model") {
      if (!v.is_string()) bad_field(k, "model must be a string, got {}", json_brief(v));
      check_length(k, v.get_ref<const std::string&>(), kMaxNameBytes);
      r.model = v.get<std::string>();
    } else if (k == "stream") {
      r.stream = boolean(v, k);
    } else if (k == "stream_steps") {
      r.stream_steps = boolean(v, k);
    } else if (k == "stream_options") {
      if (!v.is_object()) bad_field(k, "stream_options must be an object");
      for (const auto& [ok, ov] : v.items()) {
        if (ok != "include_usage")
          bad_field("stream_options." + ok, "unknown field '{}' in stream_options", ok);
        r.include_usage = boolean(ov, "stream_options.include_usage");
      }
    } else if (k == "stop") {
      r.stop = stop_list(v);
    } else if (k == "max_tokens" || k == "gen_length" ||
               (k == "max_completion_tokens" && endpoint == Endpoint::kChat)) {
      if (!max_tokens_field.empty())
        bad_field(k, "{} and {} both set the generation length; give one", max_tokens_field, k);
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > cfg.max_seq)
        bad_field(k, "{} must be an integer in [1, {}], got {}", k, cfg.max_seq, json_brief(v));
      max_tokens = v.get<int64_t>();
      max_tokens_field = k;
    } else if (neutral_fields().count(k)) {
      check_neutral(k, v);
    } else if (is_server_only_field(k)) {
      std::string flag = k;
      std::replace(flag.begin(), flag.end(), '_', '-');
      bad_field(k, "{} is a server setting (dllmq serve --{}); requests cannot change it", k, flag);
    } else if (is_decode_field(k)) {
      decode[k] = v;
    } else {
      bad_field(k, "unknown field '{}'", k);
    }
  }
  if (prompt == nullptr) bad_field(prompt_field, "{} is required", prompt_field);
  if (r.stream_steps && !r.stream) bad_field("stream_steps", "stream_steps needs stream: true");
  if (r.include_usage && !r.stream)
    bad_field("stream_options", "stream_options is only for stream: true");

  // Decoding options: the server's flags, then the request's fields, through the CLI's rules.
  settings::GenerateFlags flags = defaults.flags;
  if (decode.contains("kv") && decode["kv"].is_string()) {
    // Another KV store than the server's: the server's store companions do not carry over.
    const std::string server_kv =
        flags.kv.empty() ? (flags.dtype == "bf16" ? "bf16" : "fp32") : flags.kv;
    if (decode["kv"].get<std::string>() != server_kv) {
      flags.calib.clear();
      flags.kv_channels.clear();
      flags.kv_base = "kivi";
      flags.kv_base_calib.clear();
      flags.kv_bits.reset();
      flags.kv_bits_k.reset();
      flags.kv_bits_v.reset();
    }
  }
  apply_decode_fields(decode, flags);
  if (max_tokens) flags.gen_length = static_cast<int>(*max_tokens);
  try {
    r.options = settings::resolve_generate_flags(flags, defaults.model_dir);
  } catch (const Error& e) {
    std::string field;
    const std::string msg = flags_to_fields(e.what(), &field);
    bad_field(field, "{}", msg);
  }
  r.options.eot_id = codec.eot_id();

  r.prompts = endpoint == Endpoint::kChat
                  ? std::vector<std::vector<int32_t>>{chat_ids(*prompt, codec)}
                  : prompt_ids(*prompt, codec);
  if (r.stream && r.prompts.size() > 1)
    bad_field("prompt", "stream: true takes one prompt per request, got {}", r.prompts.size());
  // More steps than tokens only adds steps that reveal nothing (and lets one request hold the
  // batch for as long as it likes).
  if (r.options.steps > r.options.gen_length)
    bad_field("steps", "steps must be in [1, max_tokens {}], got {}", r.options.gen_length,
              r.options.steps);
  for (const auto& p : r.prompts) {
    const int n = static_cast<int>(p.size()) + r.options.gen_length;
    if (n > defaults.max_positions)
      bad_field(prompt_field,
                "{} is {} tokens; with max_tokens {} the canvas of {} exceeds the {} positions "
                "this server decodes",
                prompt_field, p.size(), r.options.gen_length, n, defaults.max_positions);
    try {
      check_generate_options(r.options, cfg, p);
    } catch (const Error& e) {
      std::string field;
      const std::string msg = flags_to_fields(e.what(), &field);
      bad_field(field.empty() ? prompt_field : field, "{}", msg);
    }
  }
  return r;
}

}  // namespace dllmq::serve
