#include "util/json_limits.h"

#include <fmt/format.h>

#include "util/error.h"

namespace dllmq {

size_t json_depth_exceeded_at(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character (\" or \\) cannot end the string
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if (c == ']' || c == '}') {
      if (depth > 0) --depth;  // unbalanced: the parser refuses it
    }
  }
  return std::string_view::npos;
}

void check_json_depth(std::string_view text, std::string_view what, int max_depth) {
  if (const size_t at = json_depth_exceeded_at(text, max_depth); at != std::string_view::npos)
    fail("{}: JSON nested deeper than {} levels (at byte {}); dllmq accepts at most {}", what,
         max_depth, at, max_depth);
}

nlohmann::json parse_json_or_discarded(std::string_view text, int max_depth) {
  if (json_depth_exceeded_at(text, max_depth) != std::string_view::npos)
    return nlohmann::json(nlohmann::json::value_t::discarded);
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

nlohmann::json parse_json_bounded(std::string_view text, std::string_view what, int max_depth) {
  check_json_depth(text, what, max_depth);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: malformed JSON: {}", what, e.what());
  }
}

std::string json_brief(const nlohmann::json& v, size_t max_chars) {
  std::string s;
  try {
    s = json_text(v);
  } catch (const std::exception&) {
    return "(a value)";
  }
  if (s.size() <= max_chars) return s;
  size_t cut = max_chars;
  // Never cut a UTF-8 character in two (the message itself is sent as JSON).
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return fmt::format("{}... ({} bytes)", s.substr(0, cut), s.size());
}

}  // namespace dllmq
