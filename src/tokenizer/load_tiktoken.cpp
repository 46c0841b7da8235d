// tiktoken rank files (`base64(token bytes) rank` per line) with the Qwen2 pattern, as Dream uses.
#include <algorithm>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include "tokenizer/tokenizer_spec.h"
#include "util/error.h"

namespace dllmq {

namespace {

// Strict base64 (standard alphabet, '=' padding); nullopt on anything else.
std::optional<std::string> base64_decode(std::string_view s) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  if (s.empty() || s.size() % 4 != 0) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < s.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s[i + k];
      if (c == '=' && i + 4 == s.size() && k >= 2) {
        v[k] = 0;
        ++pad;
        continue;
      }
      if (pad) return std::nullopt;  // data after padding
      v[k] = val(c);
      if (v[k] < 0) return std::nullopt;
    }
    const uint32_t w = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    out += static_cast<char>(w >> 16);
    if (pad < 2) out += static_cast<char>((w >> 8) & 0xFF);
    if (pad < 1) out += static_cast<char>(w & 0xFF);
  }
  return out;
}

}  // namespace

std::vector<AddedToken> qwen_special_tokens() {
  // Qwen2.5 tokenizer_config.json ids 151643..151664, then Dream's <|beginoftext|> and <|mask|>.
  static const char* const kNames[] = {
      "<|endoftext|>",      "<|im_start|>",     "<|im_end|>",      "<|object_ref_start|>",
      "<|object_ref_end|>", "<|box_start|>",    "<|box_end|>",     "<|quad_start|>",
      "<|quad_end|>",       "<|vision_start|>", "<|vision_end|>",  "<|vision_pad|>",
      "<|image_pad|>",      "<|video_pad|>",    "<tool_call>",     "</tool_call>",
      "<|fim_prefix|>",     "<|fim_middle|>",   "<|fim_suffix|>",  "<|fim_pad|>",
      "<|repo_name|>",      "<|file_sep|>",     "<|beginoftext|>", "<|mask|>"};
  std::vector<AddedToken> out;
  int32_t id = 151643;
  for (const char* n : kNames) {
    AddedToken t;
    t.content = n;
    t.id = id++;
    out.push_back(t);
  }
  return out;
}

std::unique_ptr<Tokenizer> load_tiktoken(const std::string& path,
                                         const std::vector<AddedToken>& specials) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open file", path);
  std::ostringstream text;
  text << in.rdbuf();
  return load_tiktoken_text(text.str(), path, specials);
}

std::unique_ptr<Tokenizer> load_tiktoken_text(const std::string& text, const std::string& path,
                                              const std::vector<AddedToken>& specials) {
  std::istringstream f(text);
  // Ranks are dense: below the number of lines + kTokenIdSlack (tokenizer.h).
  const int64_t max_rank = std::min<int64_t>(
      kMaxTokenId, int64_t(std::count(text.begin(), text.end(), '\n')) + 1 + kTokenIdSlack);
  auto s = std::make_unique<TokenizerSpec>();
  s->source = path;
  std::unordered_set<int32_t> ranks;
  std::string line;
  size_t n = 0;
  for (size_t lineno = 1; std::getline(f, line); ++lineno) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    if (sp == std::string::npos)
      fail("{}:{}: expected 'base64 rank', got '{}'", path, lineno, line.substr(0, 80));
    auto bytes = base64_decode(std::string_view(line).substr(0, sp));
    if (!bytes)
      fail("{}:{}: token field '{}' is not valid base64", path, lineno,
           line.substr(0, std::min<size_t>(sp, 80)));
    const std::string rank_s = line.substr(sp + 1);
    int64_t rank = -1;
    try {
      size_t used = 0;
      rank = std::stoll(rank_s, &used);
      if (used != rank_s.size()) rank = -1;
    } catch (const std::exception&) {
      rank = -1;
    }
    if (rank < 0 || rank > max_rank)
      fail(
          "{}:{}: rank field '{}' is not an integer in [0, {}] (ranks are dense: below the "
          "number of lines + {})",
          path, lineno, rank_s.substr(0, 40), max_rank, kTokenIdSlack);
    if (!ranks.insert(static_cast<int32_t>(rank)).second)
      fail("{}:{}: duplicate rank {}", path, lineno, rank);
    if (s->bpe->find(*bytes)) fail("{}:{}: duplicate token (rank {})", path, lineno, rank);
    s->bpe->add_token(static_cast<int32_t>(rank), std::move(*bytes));
    ++n;
  }
  if (n == 0) fail("{}: no ranks found (empty file?)", path);
  for (int b = 0; b < 256; ++b)
    if (!s->bpe->find(std::string(1, static_cast<char>(b))))
      fail("{}: byte 0x{:02x} has no rank; a byte-level rank file must cover all 256 bytes", path,
           b);
  s->bpe->derive_merges_from_ranks();
  s->bpe->set_ignore_merges(true);  // tiktoken emits a piece that is itself a token directly
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  steps.push_back(
      make_split(kQwen2Pattern, false, SplitBehavior::kIsolated, false, "Qwen2 pattern"));
  s->pre = make_sequence(std::move(steps));
  for (const AddedToken& t : specials) {
    if (s->bpe->bytes_of(t.id))
      fail("{}: special token '{}' id {} collides with a rank", path, t.content, t.id);
    AddedToken a = t;
    a.special = true;  // tiktoken treats every special alike
    a.normalized = false;
    s->added.push_back(a);
  }
  s->decode_mode = DecodeMode::kWhole;
  return std::make_unique<Tokenizer>(std::move(s));
}

}  // namespace dllmq
