// PCRE2 regex (UTF + Unicode properties, JIT when available) for pre-tokenizer patterns written
// for Oniguruma (HF tokenizers) or Rust regex (tiktoken). Input must be valid UTF-8.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace dllmq {

class Regex {
 public:
  // `where` names the file/field for error messages. literal=true matches `pattern` as plain text.
  Regex(const std::string& pattern, const std::string& where, bool literal = false);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Calls on_match(begin, end) for each non-overlapping match, left to right (byte offsets).
  void find_all(std::string_view text, const std::function<void(size_t, size_t)>& on_match) const;

  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  std::string where_;
  void* code_ = nullptr;  // pcre2_code_8
  bool jit_ = false;
};

// Rewrites \s and \S so they match Unicode White_Space exactly as Rust regex and Oniguruma do
// (PCRE2's UCP \s leaves out U+0085 NEL).
std::string translate_pattern(std::string_view pattern);

}  // namespace dllmq
