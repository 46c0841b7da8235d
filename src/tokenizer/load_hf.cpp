// Loaders for Hugging Face files: tokenizer.json and GPT-2-style vocab.json + merges.txt.
#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_spec.h"
#include "util/error.h"
#include "util/json_limits.h"

namespace dllmq {

using nlohmann::json;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("{}: cannot open file", path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

json parse_json_text(const std::string& text, const std::string& path) {
  check_json_depth(text, path);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail("{}: malformed JSON (truncated or corrupt file?): {}", path, e.what());
  }
}

json parse_json(const std::string& path) {
  return parse_json_text(read_file(path), path);
}

bool opt_bool(const json& j, const char* key, bool dflt, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return dflt;
  if (!j[key].is_boolean()) fail("{}: \"{}\" must be true or false", where, key);
  return j[key].get<bool>();
}

// Vocab strings are byte-level text; anything else is kept verbatim (reachable only via added
// tokens).
void add_vocab(TokenizerSpec& s, const json& vocab, const std::string& where) {
  if (!vocab.is_object()) fail("{}: \"vocab\" must be an object of token -> id", where);
  const int64_t max_id = std::min<int64_t>(kMaxTokenId, int64_t(vocab.size()) + kTokenIdSlack);
  for (auto& [tok, v] : vocab.items()) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > max_id)
      fail(
          "{}: vocab entry '{}': id {} is not an integer in [0, {}] (ids are dense: below the "
          "{} entries + {})",
          where, tok, v.dump(), max_id, vocab.size(), kTokenIdSlack);
    const int32_t id = static_cast<int32_t>(v.get<int64_t>());
    if (auto bytes = byte_level_decode(tok)) {
      s.bpe->add_token(id, std::move(*bytes));
    } else {
      s.bpe->add_token(id, tok);
      s.odd_tokens[id] = tok;
      s.odd_ids[tok] = id;
    }
  }
}

void add_merge(TokenizerSpec& s, const json& vocab, const std::string& a, const std::string& b,
               uint32_t rank, const std::string& where) {
  auto id_of = [&](const std::string& t) -> int32_t {
    auto it = vocab.find(t);
    if (it == vocab.end())
      fail("{}: merge '{} {}': token '{}' is not in the vocab", where, a, b, t);
    return static_cast<int32_t>(it->get<int64_t>());
  };
  const int32_t ia = id_of(a), ib = id_of(b),
                merged = id_of(a + b);  // in this order, for the message
  s.bpe->add_merge(ia, ib, merged, rank);
}

void parse_merges_json(TokenizerSpec& s, const json& vocab, const json& merges,
                       const std::string& where) {
  if (!merges.is_array()) fail("{}: \"merges\" must be an array", where);
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    const std::string w = fmt::format("{}[{}]", where, i);
    if (m.is_string()) {
      // Legacy form "a b": byte-level tokens never hold a plain space.
      const std::string line = m.get<std::string>();
      const size_t sp = line.find(' ');
      if (sp == std::string::npos || line.find(' ', sp + 1) != std::string::npos)
        fail("{}: merge '{}' must be two tokens separated by one space", w, line);
      add_merge(s, vocab, line.substr(0, sp), line.substr(sp + 1), static_cast<uint32_t>(i), w);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      add_merge(s, vocab, m[0].get<std::string>(), m[1].get<std::string>(),
                static_cast<uint32_t>(i), w);
    } else {
      fail("{}: a merge must be \"a b\" or [\"a\", \"b\"]", w);
    }
  }
}

AddedToken parse_added(const json& t, const std::string& where) {
  if (!t.is_object() || !t.contains("content") || !t["content"].is_string())
    fail("{}: an added token needs a string \"content\"", where);
  AddedToken a;
  a.content = t["content"].get<std::string>();
  if (t.contains("id")) {
    if (!t["id"].is_number_integer() || t["id"].get<int64_t>() < 0 ||
        t["id"].get<int64_t>() > kMaxTokenId)
      fail("{}: added token '{}': \"id\" {} is not an integer in [0, {}]", where, a.content,
           t["id"].dump(), kMaxTokenId);
    a.id = static_cast<int32_t>(t["id"].get<int64_t>());
  }
  a.special = opt_bool(t, "special", false, where);
  a.lstrip = opt_bool(t, "lstrip", false, where);
  a.rstrip = opt_bool(t, "rstrip", false, where);
  a.normalized = opt_bool(t, "normalized", !a.special, where);
  a.single_word = opt_bool(t, "single_word", false, where);
  return a;
}

void parse_normalizer(TokenizerSpec& s, const json& j, const std::string& where) {
  if (j.is_null()) return;
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    fail("{}: expected null or an object with a string \"type\"", where);
  const std::string type = j["type"].get<std::string>();
  if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array())
      fail("{}: Sequence needs a \"normalizers\" array", where);
    for (size_t i = 0; i < j["normalizers"].size(); ++i)
      parse_normalizer(s, j["normalizers"][i], fmt::format("{}.normalizers[{}]", where, i));
  } else if (type == "NFC") {
    s.normalizers.push_back(Normalizer::kNFC);
  } else if (type == "NFD") {
    s.normalizers.push_back(Normalizer::kNFD);
  } else if (type == "NFKC") {
    s.normalizers.push_back(Normalizer::kNFKC);
  } else if (type == "NFKD") {
    s.normalizers.push_back(Normalizer::kNFKD);
  } else {
    fail("{}: unsupported normalizer type '{}' (supported: NFC, NFD, NFKC, NFKD, Sequence)", where,
         type);
  }
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer_json_extra(const std::string& path,
                                                     const std::vector<AddedToken>& extra);

std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& path) {
  return load_tokenizer_json_extra(path, {});
}

// `extra`: tokens (from tokenizer_config.json) added when their id is not already a token.
std::unique_ptr<Tokenizer> load_tokenizer_json_extra(const std::string& path,
                                                     const std::vector<AddedToken>& extra) {
  return load_tokenizer_json_text(read_file(path), path, extra);
}

std::unique_ptr<Tokenizer> load_tokenizer_json_text(const std::string& text,
                                                    const std::string& path,
                                                    const std::vector<AddedToken>& extra) {
  const json j = parse_json_text(text, path);
  if (!j.is_object()) fail("{}: expected a JSON object at the top level", path);
  auto s = std::make_unique<TokenizerSpec>();
  s->source = path;

  if (!j.contains("model") || !j["model"].is_object()) fail("{}: missing \"model\" object", path);
  const json& m = j["model"];
  const std::string mw = path + ": model";
  std::string type = "BPE";
  if (m.contains("type")) {
    if (!m["type"].is_string()) fail("{}.type must be a string", mw);
    type = m["type"].get<std::string>();
  }
  if (type != "BPE")
    fail(
        "{}.type: unsupported model type '{}' (only byte-level BPE is supported, not Unigram, "
        "WordPiece or "
        "WordLevel)",
        mw, type);
  if (!m.contains("vocab")) fail("{}: missing \"vocab\"", mw);
  if (!m.contains("merges")) fail("{}: missing \"merges\"", mw);
  if (m.contains("dropout") && !m["dropout"].is_null() &&
      !(m["dropout"].is_number() && m["dropout"].get<double>() == 0))
    fail("{}.dropout: BPE dropout is not supported", mw);
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (m.contains(k) && !m[k].is_null() && !(m[k].is_string() && m[k].get<std::string>().empty()))
      fail("{}.{}: not supported for byte-level BPE", mw, k);
  if (opt_bool(m, "byte_fallback", false, mw))
    fail("{}.byte_fallback: not supported (byte-level BPE only)", mw);
  add_vocab(*s, m["vocab"], mw + ".vocab");
  parse_merges_json(*s, m["vocab"], m["merges"], mw + ".merges");
  s->bpe->set_ignore_merges(opt_bool(m, "ignore_merges", false, mw));
  if (m.contains("unk_token") && m["unk_token"].is_string()) {
    auto it = m["vocab"].find(m["unk_token"].get<std::string>());
    if (it != m["vocab"].end()) s->bpe->set_unk(static_cast<int32_t>(it->get<int64_t>()));
  }

  if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
    if (!j["added_tokens"].is_array()) fail("{}: \"added_tokens\" must be an array", path);
    for (size_t i = 0; i < j["added_tokens"].size(); ++i) {
      const std::string w = fmt::format("{}: added_tokens[{}]", path, i);
      if (!j["added_tokens"][i].contains("id")) fail("{}: missing \"id\"", w);
      s->added.push_back(parse_added(j["added_tokens"][i], w));
    }
  }
  for (const AddedToken& a : extra) {
    bool known = s->bpe->bytes_of(a.id) != nullptr;
    for (const AddedToken& b : s->added) known = known || b.id == a.id;
    if (!known) s->added.push_back(a);
  }
  if (j.contains("normalizer")) parse_normalizer(*s, j["normalizer"], path + ": normalizer");

  bool has_byte_level = false;
  if (j.contains("pre_tokenizer") && !j["pre_tokenizer"].is_null())
    s->pre = pre_tokenizer_from_json(j["pre_tokenizer"], path + ": pre_tokenizer", has_byte_level);
  if (!has_byte_level)
    fail("{}: pre_tokenizer: no ByteLevel step; only byte-level BPE tokenizers are supported",
         path);

  if (j.contains("decoder") && !j["decoder"].is_null()) {
    const json& d = j["decoder"];
    if (!d.is_object() || !d.contains("type") || d["type"] != "ByteLevel")
      fail("{}: decoder: unsupported decoder {} (only ByteLevel is supported)", path,
           d.is_object() && d.contains("type") ? d["type"].dump() : d.dump());
  }
  s->decode_mode = DecodeMode::kChunked;
  return std::make_unique<Tokenizer>(std::move(s));
}

std::unique_ptr<Tokenizer> load_vocab_merges(const std::string& vocab_path,
                                             const std::string& merges_path,
                                             const std::vector<AddedToken>& added) {
  const std::string vocab_text = read_file(vocab_path);
  return load_vocab_merges_text(vocab_text, read_file(merges_path), vocab_path, merges_path, added);
}

std::unique_ptr<Tokenizer> load_vocab_merges_text(const std::string& vocab_text,
                                                  const std::string& merges_text,
                                                  const std::string& vocab_path,
                                                  const std::string& merges_path,
                                                  const std::vector<AddedToken>& added) {
  const json vocab = parse_json_text(vocab_text, vocab_path);
  auto s = std::make_unique<TokenizerSpec>();
  s->source = vocab_path + " + " + merges_path;
  add_vocab(*s, vocab, vocab_path);

  std::istringstream f(merges_text);
  std::string line;
  uint32_t rank = 0;
  for (size_t lineno = 1; std::getline(f, line); ++lineno) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (lineno == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t sp = line.find(' ');
    const std::string w = fmt::format("{}:{}", merges_path, lineno);
    if (sp == std::string::npos || line.find(' ', sp + 1) != std::string::npos)
      fail("{}: expected two tokens separated by one space, got '{}'", w, line);
    add_merge(*s, vocab, line.substr(0, sp), line.substr(sp + 1), rank++, w);
  }
  // The Qwen2 / Dream pipeline (what transformers' Qwen2TokenizerFast builds from these files).
  s->normalizers.push_back(Normalizer::kNFC);
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  steps.push_back(
      make_split(kQwen2Pattern, false, SplitBehavior::kIsolated, false, "Qwen2 pattern"));
  steps.push_back(make_byte_level(false, false));
  s->pre = make_sequence(std::move(steps));
  s->added = added;
  s->decode_mode = DecodeMode::kChunked;
  return std::make_unique<Tokenizer>(std::move(s));
}

// Used by load_tokenizer_for_model: tokenizer_config.json "added_tokens_decoder".
std::vector<AddedToken> read_added_tokens_decoder(const std::string& path) {
  const json j = parse_json(path);
  std::vector<AddedToken> out;
  if (!j.is_object() || !j.contains("added_tokens_decoder")) return out;
  const json& d = j["added_tokens_decoder"];
  if (!d.is_object()) fail("{}: \"added_tokens_decoder\" must be an object", path);
  for (auto& [k, v] : d.items()) {
    const std::string w = fmt::format("{}: added_tokens_decoder[\"{}\"]", path, k);
    AddedToken a = parse_added(v, w);
    try {
      size_t used = 0;
      a.id = std::stoi(k, &used);
      if (used != k.size() || a.id < 0 || a.id > kMaxTokenId) throw std::invalid_argument(k);
    } catch (const std::exception&) {
      fail("{}: key must be a token id in [0, {}]", w, kMaxTokenId);
    }
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace dllmq
