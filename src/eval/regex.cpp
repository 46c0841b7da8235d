#include "eval/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "util/error.h"

namespace dllmq::eval {

struct Regex::Impl {
  pcre2_code* code = nullptr;
  ~Impl() { pcre2_code_free(code); }
};

Regex::Regex(std::string_view pattern) : impl_(std::make_unique<Impl>()), pattern_(pattern) {
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_compile_context* cc = pcre2_compile_context_create(nullptr);
  pcre2_set_newline(cc, PCRE2_NEWLINE_LF);  // Python: only "\n" ends a line for `.` and `$`
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, cc);
  pcre2_compile_context_free(cc);
  if (!impl_->code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof buf);
    fail("regex '{}': {} at offset {}", pattern_, reinterpret_cast<char*>(buf), off);
  }
}

Regex::~Regex() = default;

namespace {
// Offset of the UTF-8 character after the one at `i` (so an empty match never splits a character).
size_t next_char(std::string_view s, size_t i) {
  ++i;
  while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
  return i;
}
}  // namespace

std::optional<RegexMatch> Regex::search(std::string_view s, size_t start) const {
  if (start > s.size()) return std::nullopt;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  const int rc = pcre2_match(impl_->code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), start,
                             0, md, nullptr);
  if (rc < 0) {
    pcre2_match_data_free(md);
    if (rc == PCRE2_ERROR_NOMATCH) return std::nullopt;
    fail("regex '{}': match error {}", pattern_, rc);
  }
  uint32_t n_groups = 0;
  pcre2_pattern_info(impl_->code, PCRE2_INFO_CAPTURECOUNT, &n_groups);
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
  RegexMatch m;
  m.begin = ov[0];
  m.end = ov[1];
  for (uint32_t g = 0; g <= n_groups; ++g) {
    if (static_cast<int>(g) < rc && ov[2 * g] != PCRE2_UNSET)
      m.groups.emplace_back(std::string(s.substr(ov[2 * g], ov[2 * g + 1] - ov[2 * g])));
    else
      m.groups.emplace_back(std::nullopt);
  }
  pcre2_match_data_free(md);
  return m;
}

std::vector<RegexMatch> Regex::find_all(std::string_view s) const {
  std::vector<RegexMatch> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    auto m = search(s, pos);
    if (!m) break;
    // Python skips an empty match that abuts the previous match's end.
    if (m->begin == m->end && !out.empty() && out.back().end == m->begin) {
      pos = next_char(s, m->begin);
      continue;
    }
    pos = m->end > m->begin ? m->end : next_char(s, m->end);
    out.push_back(std::move(*m));
  }
  return out;
}

std::string Regex::sub(std::string_view s, std::string_view repl) const {
  std::string out;
  size_t last = 0;
  for (const RegexMatch& m : find_all(s)) {
    out.append(s.substr(last, m.begin - last));
    for (size_t i = 0; i < repl.size(); ++i) {
      if (repl[i] == '\\' && i + 1 < repl.size() && repl[i + 1] >= '0' && repl[i + 1] <= '9') {
        const size_t g = repl[i + 1] - '0';
        if (g < m.groups.size() && m.groups[g]) out += *m.groups[g];
        ++i;
      } else {
        out += repl[i];
      }
    }
    last = m.end;
  }
  out.append(s.substr(last));
  return out;
}

}  // namespace dllmq::eval
