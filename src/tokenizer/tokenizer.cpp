#include "tokenizer/tokenizer.h"

#include <algorithm>

#include <utf8proc.h>

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_spec.h"
#include "tokenizer/utf8.h"

namespace dllmq {

// Added tokens indexed by first byte, longest first, for one (allow_special, pass) combination.
struct AddedMatcher {
  std::vector<const AddedToken*> by_byte[256];
  bool empty = true;
};

namespace {

bool is_word_char(char32_t c) {
  // Rust's char::is_alphanumeric() || '_' (HF single_word).
  if (c == '_') return true;
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
         (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}

// Last code point ending at byte `end` of valid UTF-8 s.
char32_t prev_char(std::string_view s, size_t end, size_t& begin) {
  begin = end - 1;
  while (begin > 0 && (static_cast<unsigned char>(s[begin]) & 0xC0) == 0x80) --begin;
  size_t i = begin;
  return utf8_next(s, i);
}

struct Segment {
  size_t b, e;
  int32_t id;  // -1: text to encode
};

// Splits `text` around added tokens (leftmost, then longest, as HF's Aho-Corasick matcher).
void split_added(std::string_view text, const AddedMatcher& m, std::vector<Segment>& out) {
  if (m.empty) {
    if (!text.empty()) out.push_back({0, text.size(), -1});
    return;
  }
  const auto& by_byte = m.by_byte;
  size_t start_offset = 0;
  for (size_t i = 0; i < text.size();) {
    const auto& cands = by_byte[static_cast<unsigned char>(text[i])];
    const AddedToken* hit = nullptr;
    for (const AddedToken* t : cands)
      if (text.compare(i, t->content.size(), t->content) == 0) {
        hit = t;
        break;
      }
    if (!hit) {
      ++i;
      continue;
    }
    size_t start = i, stop = i + hit->content.size();
    const size_t match_end = stop;
    if (hit->single_word) {
      size_t pb = 0;
      const bool start_ok = start == 0 || !is_word_char(prev_char(text, start, pb));
      size_t j = stop;
      const bool stop_ok = stop == text.size() || !is_word_char(utf8_next(text, j));
      if (!start_ok || !stop_ok) {
        ++i;
        continue;
      }
    }
    if (hit->lstrip) {
      size_t s = start;
      while (s > start_offset) {
        size_t pb = 0;
        if (!is_unicode_whitespace(prev_char(text, s, pb))) break;
        s = pb;
      }
      start = s;
    }
    if (hit->rstrip) {
      while (stop < text.size()) {
        size_t j = stop;
        if (!is_unicode_whitespace(utf8_next(text, j))) break;
        stop = j;
      }
    }
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, hit->id});
    start_offset = stop;
    i = std::max(match_end, stop);
  }
  if (start_offset < text.size()) out.push_back({start_offset, text.size(), -1});
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<TokenizerSpec> spec) : s_(std::move(spec)) {
  s_->bpe->finalize();
  for (size_t i = 0; i < s_->added.size(); ++i) {
    const int32_t id = s_->added[i].id;
    if (static_cast<size_t>(id) >= s_->added_slot.size()) s_->added_slot.resize(id + 1, -1);
    if (s_->added_slot[id] < 0) s_->added_slot[id] = static_cast<int32_t>(i);
  }
  for (int allow = 0; allow < 2; ++allow)
    for (int pass = 0; pass < 2; ++pass) {
      auto m = std::make_shared<AddedMatcher>();
      for (const AddedToken& t : s_->added) {
        if (!allow && t.special) continue;
        // HF matches normalized=false tokens on the raw text first, the others after normalizing.
        if (t.normalized != (pass == 1) || t.content.empty()) continue;
        m->by_byte[static_cast<unsigned char>(t.content[0])].push_back(&t);
        m->empty = false;
      }
      for (auto& v : m->by_byte)
        std::stable_sort(v.begin(), v.end(), [](const AddedToken* a, const AddedToken* b) {
          return a->content.size() > b->content.size();
        });
      s_->matchers[allow][pass] = std::move(m);
    }
}

const AddedToken* TokenizerSpec::find_added(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= added_slot.size() || added_slot[id] < 0) return nullptr;
  return &added[added_slot[id]];
}
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view input, bool allow_special) const {
  std::string repaired;
  std::string_view text = input;
  if (!utf8_is_valid(text)) {
    repaired = utf8_lossy(text);
    text = repaired;
  }
  const AddedMatcher& raw_toks = *s_->matchers[allow_special][0];
  const AddedMatcher& norm_toks = *s_->matchers[allow_special][1];
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<Segment> segs, inner;
  split_added(text, raw_toks, segs);
  std::string buf;
  std::vector<Piece> pieces;
  auto encode_text = [&](std::string_view seg) {
    buf.assign(seg);
    pieces.assign(1, Piece{0, static_cast<uint32_t>(buf.size())});
    if (s_->pre) s_->pre->apply(buf, pieces);
    for (const Piece& p : pieces)
      s_->bpe->encode_piece(std::string_view(buf.data() + p.off, p.len), ids);
  };
  for (const Segment& sg : segs) {
    if (sg.id >= 0) {
      ids.push_back(sg.id);
      continue;
    }
    std::string_view seg = text.substr(sg.b, sg.e - sg.b);
    if (norm_toks.empty && s_->normalizers.empty()) {
      encode_text(seg);
      continue;
    }
    std::string norm(seg);
    for (Normalizer n : s_->normalizers) norm = normalize(n, norm);
    inner.clear();
    split_added(norm, norm_toks, inner);
    for (const Segment& in : inner) {
      if (in.id >= 0)
        ids.push_back(in.id);
      else
        encode_text(std::string_view(norm).substr(in.b, in.e - in.b));
    }
  }
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out, run;
  auto flush = [&] {
    if (run.empty()) return;
    out += utf8_lossy(run);
    run.clear();
  };
  for (int32_t id : ids) {
    if (const AddedToken* added = s_->find_added(id)) {
      if (skip_special && added->special) continue;
      if (s_->decode_mode == DecodeMode::kChunked) {
        flush();
        out += added->content;
      } else {
        run += added->content;
      }
      continue;
    }
    if (const std::string* b = s_->bpe->bytes_of(id)) run += *b;
  }
  flush();
  return out;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  for (const AddedToken& t : s_->added)
    if (t.content == token) return t.id;
  if (auto it = s_->odd_ids.find(std::string(token)); it != s_->odd_ids.end()) return it->second;
  if (auto bytes = byte_level_decode(token)) return s_->bpe->find(*bytes);
  return std::nullopt;
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (const AddedToken* t = s_->find_added(id)) return t->content;
  if (auto it = s_->odd_tokens.find(id); it != s_->odd_tokens.end()) return it->second;
  if (const std::string* b = s_->bpe->bytes_of(id)) return byte_level_encode(*b);
  return std::nullopt;
}

std::optional<std::string> Tokenizer::token_bytes(int32_t id) const {
  if (const AddedToken* t = s_->find_added(id)) return t->content;
  if (const std::string* b = s_->bpe->bytes_of(id)) return *b;
  return std::nullopt;
}

bool Tokenizer::is_special(int32_t id) const {
  const AddedToken* t = s_->find_added(id);
  return t && t->special;
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const {
  return s_->added;
}

size_t Tokenizer::vocab_size() const {
  int32_t m = s_->bpe->max_id();
  for (const AddedToken& t : s_->added) m = std::max(m, t.id);
  return static_cast<size_t>(m + 1);
}

void Tokenizer::set_cache_enabled(bool on) {
  s_->bpe->set_cache_enabled(on);
}

const std::string& Tokenizer::source() const {
  return s_->source;
}

}  // namespace dllmq
