// Thin PCRE2 wrapper with Python `re` semantics where the lm-eval extraction depends on them:
// `.` stops at "\n" only, `$` matches before a final newline, \d is Unicode-aware (UCP).
// Subjects may hold invalid UTF-8 (model output): it never matches, and no match crosses it.
// Costs are linear in the subject: it is validated once per find_all / sub / search, not once
// per match.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dllmq::eval {

struct RegexMatch {
  size_t begin = 0, end = 0;                       // whole match, byte offsets
  std::vector<std::optional<std::string>> groups;  // groups[0] = whole match; nullopt = unset group
};

class Regex {
 public:
  explicit Regex(std::string_view pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // First match at or after `start` (Python re.search).
  std::optional<RegexMatch> search(std::string_view s, size_t start = 0) const;
  // All non-overlapping matches (Python re.finditer).
  std::vector<RegexMatch> find_all(std::string_view s) const;
  // Python re.sub with a template that uses \1..\9 for groups (nothing else is special).
  std::string sub(std::string_view s, std::string_view repl) const;

 private:
  struct Subject;
  std::optional<RegexMatch> search(const Subject& s, size_t start) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string pattern_;
};

}  // namespace dllmq::eval
