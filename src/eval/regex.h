// Thin PCRE2 wrapper with Python `re` semantics where the lm-eval extraction depends on them:
// `.` stops at "\n" only, `$` matches before a final newline, \d is Unicode-aware (UCP).
// Subjects may hold invalid UTF-8 (model output): it never matches, and no match crosses it.
// Costs are linear in the subject: it is validated once per find_all / sub / search, not once
// per match.
#pragma once

#include <functional>
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
  // For patterns of the shape PREFIX (.*?) REST or PREFIX (.*) REST (PREFIX a literal, maybe
  // empty), where nothing matches "\n" and REST needs at least one character. On one line
  // (between "\n"s and invalid UTF-8, which no match crosses) the first start that can match
  // is the first PREFIX, and if it fails, every later start on that line fails too (its dot-star
  // could have reached them). Searching tries that one start per line instead of every byte:
  // the same matches, in linear time (PCRE2 stops checking for a required character in
  // subjects past 5000 bytes, so `(.*?)\$...` on one 50 MB line scanned the line from every
  // byte).
  Regex(std::string_view pattern, std::string line_prefix);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // First match at or after `start` (Python re.search).
  std::optional<RegexMatch> search(std::string_view s, size_t start = 0) const;
  // A match that starts exactly at `start` (Python re.match(s, pos)): one attempt, so its cost
  // is what that attempt scans, not the rest of the subject.
  std::optional<RegexMatch> match_at(std::string_view s, size_t start) const;
  // All non-overlapping matches (Python re.finditer).
  std::vector<RegexMatch> find_all(std::string_view s) const;
  // find_all(s).back() without keeping the others.
  std::optional<RegexMatch> find_last(std::string_view s) const;
  // Python re.sub with a template that uses \1..\9 for groups (nothing else is special).
  std::string sub(std::string_view s, std::string_view repl) const;

 private:
  struct Subject;
  std::optional<RegexMatch> search(Subject& s, size_t start, bool anchored = false) const;
  // The next match at or after `start` into s's match data; false when there is none.
  bool locate(Subject& s, size_t start, bool anchored) const;
  RegexMatch build(const Subject& s) const;  // the match `locate` found
  // Python's finditer order and empty-match rule; on_match returns false to stop.
  void scan(Subject& s, const std::function<bool(const Subject&)>& on_match) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string pattern_;
  std::optional<std::string> line_prefix_;  // set: one attempt per line (see the constructor)
};

}  // namespace dllmq::eval
