#include "eval/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>

#include "tokenizer/utf8.h"
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
  // Not PCRE2_MATCH_INVALID_UTF: with it PCRE2 ignores PCRE2_NO_UTF_CHECK and validates the
  // subject from the start offset to its end (or first invalid byte) on every call, so that
  // find_all over a valid text of n bytes cost O(n^2) (1 MB of response: 4 minutes). The subject
  // is validated once instead (Subject below) and matched with PCRE2_NO_UTF_CHECK.
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP, &err, &off, cc);
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

// The subject cut into its valid UTF-8 fragments, once per subject: PCRE2_MATCH_INVALID_UTF's
// semantics (pcre2unicode(3), "Matching in invalid UTF strings") made explicit. An invalid
// sequence is a barrier no match crosses; after it matching resumes at the next byte that is
// not a continuation byte; each fragment is matched as a subject of its own, its inner ends
// being no line ends (NOTBOL/NOTEOL) while \b sees them as the subject's ends. (Unlike PCRE2's
// own mode, \A and \G would match at an inner fragment's start; no pattern here uses them.)
struct Regex::Subject {
  std::string_view s;
  std::vector<std::pair<size_t, size_t>> fragments;  // [begin, end), in order, covering s's end

  explicit Subject(std::string_view text) : s(text) {
    size_t pos = 0;
    for (;;) {
      size_t i = pos, len = 0;
      while (i < s.size() && (len = utf8_valid_len(s, i)) > 0) i += len;
      fragments.emplace_back(pos, i);
      if (i == s.size()) break;
      pos = i + 1;  // past the invalid byte and the continuation bytes after it
      while (pos < s.size() && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80) ++pos;
    }
  }
};

std::optional<RegexMatch> Regex::search(std::string_view s, size_t start) const {
  return search(Subject(s), start);
}

std::optional<RegexMatch> Regex::search(const Subject& sub, size_t start) const {
  const std::string_view s = sub.s;
  if (start > s.size()) return std::nullopt;
  // The first fragment that ends at or after `start` (a start inside an invalid sequence moves
  // to the next fragment, as in PCRE2).
  auto f = std::lower_bound(sub.fragments.begin(), sub.fragments.end(), start,
                            [](const auto& fr, size_t at) { return fr.second < at; });
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  int rc = PCRE2_ERROR_NOMATCH;
  size_t base = 0;
  for (; f != sub.fragments.end(); ++f) {
    const auto [b, e] = *f;
    size_t from = std::max(start, b);
    // A start inside a character (never one find_all makes) moves to the next character: with
    // PCRE2_NO_UTF_CHECK an offset there would be undefined behaviour.
    while (from < e && (static_cast<unsigned char>(s[from]) & 0xC0) == 0x80) ++from;
    const uint32_t opts = PCRE2_NO_UTF_CHECK | (b > 0 ? PCRE2_NOTBOL : 0u) |
                          (e < s.size() ? PCRE2_NOTEOL : 0u);
    rc = pcre2_match(impl_->code, reinterpret_cast<PCRE2_SPTR>(s.data() + b), e - b, from - b,
                     opts, md, nullptr);
    base = b;
    if (rc != PCRE2_ERROR_NOMATCH) break;
  }
  if (rc < 0) {
    pcre2_match_data_free(md);
    if (rc == PCRE2_ERROR_NOMATCH) return std::nullopt;
    fail("regex '{}': match error {}", pattern_, rc);
  }
  uint32_t n_groups = 0;
  pcre2_pattern_info(impl_->code, PCRE2_INFO_CAPTURECOUNT, &n_groups);
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
  RegexMatch m;
  m.begin = base + ov[0];
  m.end = base + ov[1];
  for (uint32_t g = 0; g <= n_groups; ++g) {
    if (static_cast<int>(g) < rc && ov[2 * g] != PCRE2_UNSET)
      m.groups.emplace_back(std::string(s.substr(base + ov[2 * g], ov[2 * g + 1] - ov[2 * g])));
    else
      m.groups.emplace_back(std::nullopt);
  }
  pcre2_match_data_free(md);
  return m;
}

std::vector<RegexMatch> Regex::find_all(std::string_view s) const {
  std::vector<RegexMatch> out;
  const Subject sub(s);  // validated once: every search below is linear in what it scans
  size_t pos = 0;
  while (pos <= s.size()) {
    auto m = search(sub, pos);
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
