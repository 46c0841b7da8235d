#include "settings/text_codec.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/json_limits.h"

namespace dllmq::settings {

namespace {

// tokenizer_config.json's add_bos_token / bos_token (the model's own BOS handling for plain text).
std::optional<std::string> plain_text_bos(const std::string& dir) {
  const auto path = std::filesystem::path(dir) / "tokenizer_config.json";
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  const nlohmann::json j = parse_json_or_discarded(text.str());
  // Typed reads only: "add_bos_token": "yes" is no reason for a type_error (internal error).
  if (!j.is_object() || !j.contains("add_bos_token") || !j["add_bos_token"].is_boolean() ||
      !j["add_bos_token"].get<bool>())
    return std::nullopt;
  if (j.contains("bos_token") && j["bos_token"].is_string())
    return j["bos_token"].get<std::string>();
  if (j.contains("bos_token") && j["bos_token"].is_object() && j["bos_token"].contains("content") &&
      j["bos_token"]["content"].is_string())
    return j["bos_token"]["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace

TextCodec::TextCodec(std::string model_dir, const ModelConfig& cfg)
    : dir_(std::move(model_dir)), cfg_(cfg) {
  tok_ = load_tokenizer_for_model(dir_);
  eot_ = cfg_.eot_id;
  if (eot_ < 0 && tok_) {
    if (auto id = tok_->token_to_id("<|eot_id|>"))
      eot_ = *id;
    else if (auto id2 = tok_->token_to_id("<|im_end|>"))
      eot_ = *id2;
  }
}

TextCodec::~TextCodec() = default;

std::vector<int32_t> TextCodec::text_ids(const std::string& text) const {
  if (!tok_) fail("{}", missing_tokenizer_message(dir_));
  return tok_->encode(text, /*allow_special=*/true);
}

std::vector<int32_t> TextCodec::prompt_ids(const std::string& text, bool chat,
                                           const std::string& system) const {
  if (!tok_) fail("{}", missing_tokenizer_message(dir_));
  if (chat) {
    std::vector<ChatMessage> messages;
    if (!system.empty()) messages.push_back({"system", system});
    messages.push_back({"user", text});
    return chat_ids(messages);
  }
  if (!system.empty()) fail("--system needs --chat");
  std::vector<int32_t> ids;
  if (auto bos = plain_text_bos(dir_))
    if (auto id = tok_->token_to_id(*bos)) ids.push_back(*id);
  auto body = tok_->encode(text, /*allow_special=*/true);
  ids.insert(ids.end(), body.begin(), body.end());
  return ids;
}

std::vector<int32_t> TextCodec::chat_ids(std::span<const ChatMessage> messages) const {
  if (!tok_) fail("{}", missing_tokenizer_message(dir_));
  const std::optional<ChatFormat> by_tokens = chat_format_for(*tok_);
  // LLaDA-MoE-Instruct's template could not be checked against its tokenizer_config.json here
  // (docs/models.md): refuse rather than render LLaDA's template for it.
  if (!by_tokens && cfg_.layout == Layout::kLLaDAMoE)
    fail(
        "{}: --chat: the LLaDA-MoE chat template is not implemented (docs/models.md); pass the "
        "prompt already rendered in the model's template as plain text (special tokens in it are "
        "recognised)",
        dir_);
  const ChatFormat f = by_tokens.value_or(chat_format_for(cfg_.arch));
  return tok_->encode(render_chat(f, messages), /*allow_special=*/true);
}

std::string TextCodec::answer_text(std::span<const int32_t> gen) const {
  if (!tok_) return "";
  size_t n = 0;
  while (n < gen.size() && gen[n] != cfg_.eos_id && gen[n] != eot_) ++n;
  return tok_->decode(gen.subspan(0, n), /*skip_special=*/true);
}

std::string TextCodec::piece(int32_t id) const {
  if (tok_) {
    const int32_t one[] = {id};
    if (id == cfg_.eos_id || id == eot_) return "\u00b7";  // padding shown as a dot
    return tok_->decode(one, /*skip_special=*/false);
  }
  return fmt::format("[{}]", id);
}

}  // namespace dllmq::settings
