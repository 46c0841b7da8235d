#include "eval/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>

#include "tokenizer/utf8.h"
#include "util/error.h"

namespace dllmq::eval {

struct Regex::Impl {
  pcre2_code* code = nullptr;
  // PCRE2's default match limit (10^7 backtracking steps per start) ends one legitimate linear
  // attempt over a long line (a lazy (.*?) across 50 MB) with PCRE2_ERROR_MATCHLIMIT, where
  // Python's re, the reference, has no limit. The patterns are fixed and the callers bound the
  // attempts (one per line where it matters), so the limit is lifted.
  pcre2_match_context* mctx = nullptr;
  uint32_t n_groups = 0;
  // PCRE2 found the pattern can only start a match at the subject's start or after "\n" (it
  // begins with `.*`): a fragment start after invalid UTF-8 is neither.
  bool startline = false;
  ~Impl() {
    pcre2_code_free(code);
    pcre2_match_context_free(mctx);
  }
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
  impl_->mctx = pcre2_match_context_create(nullptr);
  pcre2_set_match_limit(impl_->mctx, UINT32_MAX);
  if (!impl_->code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof buf);
    fail("regex '{}': {} at offset {}", pattern_, reinterpret_cast<char*>(buf), off);
  }
  pcre2_pattern_info(impl_->code, PCRE2_INFO_CAPTURECOUNT, &impl_->n_groups);
  uint32_t first = 0;
  pcre2_pattern_info(impl_->code, PCRE2_INFO_FIRSTCODETYPE, &first);
  impl_->startline = first == 2;
}

Regex::Regex(std::string_view pattern, std::string line_prefix) : Regex(pattern) {
  line_prefix_ = std::move(line_prefix);
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
  pcre2_match_data* md = nullptr;  // one per subject, not one per match (a malloc each)
  size_t base = 0;                 // md's offsets are relative to this fragment start
  int rc = 0;                      // of the last match

  Subject(const Subject&) = delete;
  Subject& operator=(const Subject&) = delete;
  ~Subject() { pcre2_match_data_free(md); }

  explicit Subject(std::string_view text) : s(text) {
    size_t pos = 0;
    // Continuation bytes at the start are skipped before the first fragment, as PCRE2 skips an
    // invalid sequence at the start offset.
    while (pos < s.size() && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80) ++pos;
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
  Subject sub(s);
  return search(sub, start);
}

std::optional<RegexMatch> Regex::match_at(std::string_view s, size_t start) const {
  Subject sub(s);
  return search(sub, start, /*anchored=*/true);
}

std::optional<RegexMatch> Regex::search(Subject& sub, size_t start, bool anchored) const {
  if (!locate(sub, start, anchored)) return std::nullopt;
  return build(sub);
}

RegexMatch Regex::build(const Subject& sub) const {
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(sub.md);
  RegexMatch m;
  m.begin = sub.base + ov[0];
  m.end = sub.base + ov[1];
  for (uint32_t g = 0; g <= impl_->n_groups; ++g) {
    if (static_cast<int>(g) < sub.rc && ov[2 * g] != PCRE2_UNSET)
      m.groups.emplace_back(
          std::string(sub.s.substr(sub.base + ov[2 * g], ov[2 * g + 1] - ov[2 * g])));
    else
      m.groups.emplace_back(std::nullopt);
  }
  return m;
}

bool Regex::locate(Subject& sub, size_t start, bool anchored) const {
  const std::string_view s = sub.s;
  if (start > s.size()) return false;
  if (line_prefix_ && !anchored) {
    // One anchored attempt per line: at the first PREFIX at or after `start`.
    for (size_t p = start; p <= s.size();) {
      auto frag = [&](size_t at) {
        return std::lower_bound(sub.fragments.begin(), sub.fragments.end(), at,
                                [](const auto& fr, size_t x) { return fr.second < x; });
      };
      auto f = frag(p);
      if (f == sub.fragments.end()) return false;
      p = std::max(p, f->first);  // inside an invalid sequence: the next fragment
      if (!line_prefix_->empty()) {
        p = s.find(*line_prefix_, p);
        if (p == std::string_view::npos) return false;
        f = frag(p);  // the prefix is valid text: p lies inside *f
      }
      if (locate(sub, p, /*anchored=*/true)) return true;
      // Past the end of p's line: its "\n", or the invalid sequence that ends its fragment.
      const size_t nl = s.substr(0, f->second).find('\n', p);
      p = nl != std::string_view::npos          ? nl + 1
          : std::next(f) != sub.fragments.end() ? std::next(f)->first
                                                : s.size() + 1;
    }
    return false;
  }
  // The first fragment that ends at or after `start` (a start inside an invalid sequence moves
  // to the next fragment, as in PCRE2).
  auto f = std::lower_bound(sub.fragments.begin(), sub.fragments.end(), start,
                            [](const auto& fr, size_t at) { return fr.second < at; });
  if (!sub.md) sub.md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  int rc = PCRE2_ERROR_NOMATCH;
  size_t base = 0;
  for (; f != sub.fragments.end(); ++f) {
    const auto [b, e] = *f;
    size_t from = std::max(start, b);
    // A start inside a character (never one find_all makes) moves to the next character: with
    // PCRE2_NO_UTF_CHECK an offset there would be undefined behaviour.
    while (from < e && (static_cast<unsigned char>(s[from]) & 0xC0) == 0x80) ++from;
    if (anchored && from != start) break;          // `start` is not where a character begins
    if (impl_->startline && b > 0 && from == b) {  // no line starts here: after the next "\n"
      const size_t nl = s.substr(0, e).find('\n', b);
      if (nl == std::string_view::npos) {
        if (anchored) break;
        continue;
      }
      if (anchored) break;
      from = nl + 1;
    }
    // The end of the subject is no line end either when invalid UTF-8 precedes it directly (an
    // empty last fragment), as in PCRE2's own invalid-UTF mode.
    const bool last_is_end = e == s.size() && !(b == e && b > 0);
    const uint32_t opts = PCRE2_NO_UTF_CHECK | (b > 0 ? PCRE2_NOTBOL : 0u) |
                          (last_is_end ? 0u : PCRE2_NOTEOL) | (anchored ? PCRE2_ANCHORED : 0u);
    rc = pcre2_match(impl_->code, reinterpret_cast<PCRE2_SPTR>(s.data() + b), e - b, from - b, opts,
                     sub.md, impl_->mctx);
    base = b;
    if (rc != PCRE2_ERROR_NOMATCH || anchored) break;
  }
  if (rc < 0) {
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    fail("regex '{}': match error {}", pattern_, rc);
  }
  sub.base = base;
  sub.rc = rc;
  return true;
}

void Regex::scan(Subject& sub, const std::function<bool(const Subject&)>& on_match) const {
  const std::string_view s = sub.s;
  size_t pos = 0;
  bool any = false;
  size_t last_end = 0;
  while (pos <= s.size()) {
    if (!locate(sub, pos, false)) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(sub.md);
    const size_t begin = sub.base + ov[0], end = sub.base + ov[1];
    // Python skips an empty match that abuts the previous match's end.
    if (begin == end && any && last_end == begin) {
      pos = next_char(s, begin);
      continue;
    }
    pos = end > begin ? end : next_char(s, end);
    any = true;
    last_end = end;
    if (!on_match(sub)) break;
  }
}

std::vector<RegexMatch> Regex::find_all(std::string_view s) const {
  std::vector<RegexMatch> out;
  Subject sub(s);  // validated once: every search below is linear in what it scans
  scan(sub, [&](const Subject& m) {
    out.push_back(build(m));
    return true;
  });
  return out;
}

std::optional<RegexMatch> Regex::find_last(std::string_view s) const {
  std::optional<RegexMatch> last;
  Subject sub(s);
  // Offsets only while scanning (millions of matches in a long text); groups for the last.
  std::vector<PCRE2_SIZE> ov;
  size_t base = 0;
  int rc = 0;
  scan(sub, [&](const Subject& m) {
    const PCRE2_SIZE* o = pcre2_get_ovector_pointer(m.md);
    ov.assign(o, o + 2 * (impl_->n_groups + 1));
    base = m.base, rc = m.rc;
    return true;
  });
  if (ov.empty()) return std::nullopt;
  std::copy(ov.begin(), ov.end(), pcre2_get_ovector_pointer(sub.md));
  sub.base = base, sub.rc = rc;
  return build(sub);
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
