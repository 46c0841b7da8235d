#include "tokenizer/pretokenizer.h"

#include <algorithm>

#include <utf8proc.h>
#include <nlohmann/json.hpp>

#include "tokenizer/utf8.h"
#include "util/error.h"

namespace dllmq {

using nlohmann::json;

const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

struct Span {
  uint32_t b, e;
  bool is_match;
};

// Applies HF's delimiter behaviour to the spans of one piece (offsets absolute in buf).
void emit_split(const std::vector<Span>& spans, SplitBehavior behavior, std::vector<Piece>& out) {
  std::vector<Span> acc;
  bool prev_match = false;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (auto& s : spans)
        if (!s.is_match) acc.push_back(s);
      break;
    case SplitBehavior::kIsolated:
      acc = spans;
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (auto& s : spans) {
        if (s.is_match && !prev_match && !acc.empty())
          acc.back().e = s.e;
        else
          acc.push_back(s);
        prev_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (size_t k = spans.size(); k-- > 0;) {
        const Span& s = spans[k];
        if (s.is_match && !prev_match && !acc.empty())
          acc.back().b = s.b;
        else
          acc.push_back(s);
        prev_match = s.is_match;
      }
      std::reverse(acc.begin(), acc.end());
      break;
    case SplitBehavior::kContiguous:
      for (auto& s : spans) {
        if (s.is_match == prev_match && !acc.empty())
          acc.back().e = s.e;
        else
          acc.push_back(s);
        prev_match = s.is_match;
      }
      break;
  }
  for (auto& s : acc)
    if (s.e > s.b) out.push_back({s.b, s.e - s.b});
}

class SplitPre : public PreTokenizer {
 public:
  SplitPre(const std::string& pattern, bool literal, SplitBehavior b, bool invert,
           const std::string& where)
      : re_(pattern, where, literal), behavior_(b), invert_(invert) {}

  void apply(std::string& buf, std::vector<Piece>& pieces) const override {
    thread_local std::vector<Piece> out;  // scratch, reused across calls
    thread_local std::vector<Span> spans;
    out.clear();
    for (const Piece& p : pieces) {
      spans.clear();
      uint32_t prev = p.off;
      const std::string_view text(buf.data() + p.off, p.len);
      re_.find_all(text, [&](size_t b, size_t e) {
        const uint32_t ab = p.off + b, ae = p.off + e;
        if (prev != ab) spans.push_back({prev, ab, invert_});
        spans.push_back({ab, ae, !invert_});
        prev = ae;
      });
      if (prev != p.off + p.len) spans.push_back({prev, p.off + p.len, invert_});
      if (behavior_ == SplitBehavior::kIsolated) {
        for (auto& s : spans) out.push_back({s.b, s.e - s.b});  // fast path, the common case
      } else {
        emit_split(spans, behavior_, out);
      }
    }
    pieces.swap(out);
  }

 private:
  Regex re_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevelPre : public PreTokenizer {
 public:
  ByteLevelPre(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space) {
    if (use_regex)
      split_ = std::make_unique<SplitPre>(kGpt2Pattern, false, SplitBehavior::kIsolated, false,
                                          "ByteLevel pre-tokenizer");
  }

  void apply(std::string& buf, std::vector<Piece>& pieces) const override {
    if (add_prefix_space_) {
      for (Piece& p : pieces) {
        if (p.len > 0 && buf[p.off] == ' ') continue;
        // Copy the piece after a new space at the end of the buffer.
        const std::string copy = buf.substr(p.off, p.len);
        const uint32_t off = static_cast<uint32_t>(buf.size());
        buf += ' ';
        buf += copy;
        p = {off, p.len + 1};
      }
    }
    if (split_) split_->apply(buf, pieces);
  }
  bool is_byte_level() const override { return true; }

 private:
  bool add_prefix_space_;
  std::unique_ptr<SplitPre> split_;
};

class DigitsPre : public PreTokenizer {
 public:
  explicit DigitsPre(bool individual) : individual_(individual) {}
  void apply(std::string& buf, std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    std::vector<Span> spans;
    for (const Piece& p : pieces) {
      spans.clear();
      const std::string_view text(buf.data() + p.off, p.len);
      for (size_t i = 0; i < text.size();) {
        const size_t b = i;
        const char32_t c = utf8_next(text, i);
        const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
        const bool numeric = cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL ||
                             cat == UTF8PROC_CATEGORY_NO;
        spans.push_back({uint32_t(p.off + b), uint32_t(p.off + i), numeric});
      }
      // Per-character spans; Contiguous glues runs, Isolated keeps each digit alone.
      std::vector<Span> merged;
      for (auto& s : spans) {
        if (!merged.empty() && merged.back().e == s.b && !s.is_match && !merged.back().is_match)
          merged.back().e = s.e;
        else
          merged.push_back(s);
      }
      emit_split(merged, individual_ ? SplitBehavior::kIsolated : SplitBehavior::kContiguous, out);
    }
    pieces.swap(out);
  }

 private:
  bool individual_;
};

class SequencePre : public PreTokenizer {
 public:
  explicit SequencePre(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  void apply(std::string& buf, std::vector<Piece>& pieces) const override {
    for (auto& s : steps_) s->apply(buf, pieces);
  }
  bool is_byte_level() const override {
    for (auto& s : steps_)
      if (s->is_byte_level()) return true;
    return false;
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

SplitBehavior parse_behavior(const json& j, const std::string& where) {
  if (!j.is_string()) fail("{}: \"behavior\" must be a string", where);
  const std::string s = j.get<std::string>();
  if (s == "Removed") return SplitBehavior::kRemoved;
  if (s == "Isolated") return SplitBehavior::kIsolated;
  if (s == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (s == "Contiguous") return SplitBehavior::kContiguous;
  fail(
      "{}: unknown split behavior '{}' (expected Removed, Isolated, MergedWithPrevious, "
      "MergedWithNext or Contiguous)",
      where, s);
}

bool get_bool(const json& j, const char* key, bool dflt, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return dflt;
  if (!j[key].is_boolean()) fail("{}: \"{}\" must be true or false", where, key);
  return j[key].get<bool>();
}

}  // namespace

std::unique_ptr<PreTokenizer> make_split(const std::string& pattern, bool literal, SplitBehavior b,
                                         bool invert, const std::string& where) {
  return std::make_unique<SplitPre>(pattern, literal, b, invert, where);
}
std::unique_ptr<PreTokenizer> make_byte_level(bool add_prefix_space, bool use_regex) {
  return std::make_unique<ByteLevelPre>(add_prefix_space, use_regex);
}
std::unique_ptr<PreTokenizer> make_digits(bool individual_digits) {
  return std::make_unique<DigitsPre>(individual_digits);
}
std::unique_ptr<PreTokenizer> make_sequence(std::vector<std::unique_ptr<PreTokenizer>> steps) {
  return std::make_unique<SequencePre>(std::move(steps));
}

std::unique_ptr<PreTokenizer> pre_tokenizer_from_json(const json& j, const std::string& where,
                                                      bool& has_byte_level) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    fail("{}: expected an object with a string \"type\"", where);
  const std::string type = j["type"].get<std::string>();
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array())
      fail("{}: Sequence needs a \"pretokenizers\" array", where);
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (size_t i = 0; i < j["pretokenizers"].size(); ++i) {
      // Steps after ByteLevel would see byte-level characters, which this engine does not model.
      if (has_byte_level)
        fail("{}.pretokenizers[{}]: a step after ByteLevel is not supported", where, i);
      steps.push_back(pre_tokenizer_from_json(
          j["pretokenizers"][i], fmt::format("{}.pretokenizers[{}]", where, i), has_byte_level));
    }
    return make_sequence(std::move(steps));
  }
  if (type == "Split") {
    if (!j.contains("pattern") || !j["pattern"].is_object())
      fail("{}: Split needs a \"pattern\" object", where);
    const json& p = j["pattern"];
    bool literal = false;
    std::string pattern;
    if (p.contains("Regex") && p["Regex"].is_string()) {
      pattern = p["Regex"].get<std::string>();
    } else if (p.contains("String") && p["String"].is_string()) {
      pattern = p["String"].get<std::string>();
      literal = true;
    } else {
      fail("{}: Split \"pattern\" must be {{\"Regex\": ...}} or {{\"String\": ...}}", where);
    }
    if (!j.contains("behavior")) fail("{}: Split needs a \"behavior\"", where);
    return make_split(pattern, literal, parse_behavior(j["behavior"], where + ".behavior"),
                      get_bool(j, "invert", false, where), where + ".pattern");
  }
  if (type == "ByteLevel") {
    has_byte_level = true;
    return make_byte_level(get_bool(j, "add_prefix_space", true, where),
                           get_bool(j, "use_regex", true, where));
  }
  if (type == "Digits") return make_digits(get_bool(j, "individual_digits", false, where));
  fail("{}: unsupported pre-tokenizer type '{}' (supported: Sequence, Split, ByteLevel, Digits)",
       where, type);
}

}  // namespace dllmq
