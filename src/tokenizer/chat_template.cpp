#include "tokenizer/chat_template.h"

#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace dllmq {

namespace {

// Python's str.isspace() (what Jinja's `trim` strips): White_Space plus U+001C..U+001F.
bool py_space(char32_t c) {
  return is_unicode_whitespace(c) || (c >= 0x1C && c <= 0x1F);
}

std::string py_strip(std::string_view s) {
  const std::string fixed = utf8_lossy(s);
  std::string_view v = fixed;
  size_t b = 0;
  while (b < v.size()) {
    size_t i = b;
    if (!py_space(utf8_next(v, i))) break;
    b = i;
  }
  size_t e = v.size();
  while (e > b) {
    size_t p = e - 1;
    while (p > b && (static_cast<unsigned char>(v[p]) & 0xC0) == 0x80) --p;
    size_t i = p;
    if (!py_space(utf8_next(v, i))) break;
    e = p;
  }
  return std::string(v.substr(b, e - b));
}

}  // namespace

std::string render_chat(ChatFormat format, std::span<const ChatMessage> messages) {
  std::string out;
  if (format == ChatFormat::kLLaDA) {
    out += "<|startoftext|>";  // BOS before the first message only
    for (const ChatMessage& m : messages) {
      out += "<|start_header_id|>";
      out += m.role;
      out += "<|end_header_id|>\n\n";
      out += py_strip(m.content);
      out += "<|eot_id|>";
    }
    out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  } else {
    const bool sys = !messages.empty() && messages[0].role == "system";
    out += "<|im_start|>system\n";
    out += sys ? messages[0].content : std::string("You are a helpful assistant.");
    out += "<|im_end|>\n";
    for (size_t i = sys ? 1 : 0; i < messages.size(); ++i) {
      out += "<|im_start|>";
      out += messages[i].role;
      out += "\n";
      out += messages[i].content;
      out += "<|im_end|>\n";
    }
    out += "<|im_start|>assistant\n";
  }
  return out;
}

std::string render_chat(ChatFormat format, std::string_view user,
                        std::optional<std::string_view> system) {
  std::vector<ChatMessage> messages;
  if (system) messages.push_back({"system", std::string(*system)});
  messages.push_back({"user", std::string(user)});
  return render_chat(format, messages);
}

ChatFormat chat_format_for(Arch arch) {
  return arch == Arch::kDream ? ChatFormat::kQwen : ChatFormat::kLLaDA;
}

std::optional<ChatFormat> chat_format_for(const Tokenizer& tok) {
  if (tok.token_to_id("<|start_header_id|>") && tok.token_to_id("<|eot_id|>"))
    return ChatFormat::kLLaDA;
  if (tok.token_to_id("<|im_start|>") && tok.token_to_id("<|im_end|>")) return ChatFormat::kQwen;
  return std::nullopt;
}

const char* chat_format_name(ChatFormat f) {
  return f == ChatFormat::kLLaDA ? "llada" : "qwen";
}

}  // namespace dllmq
