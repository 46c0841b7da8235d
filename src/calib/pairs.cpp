#include "calib/pairs.h"

#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/json_limits.h"

namespace dllmq {

namespace {

std::vector<int32_t> ids_field(const nlohmann::json& j, const char* key, const std::string& where,
                               int vocab) {
  const auto& a = j[key];
  if (!a.is_array()) fail("{}: '{}' must be an array of token ids", where, key);
  std::vector<int32_t> out;
  for (const auto& x : a) {
    if (!x.is_number_integer()) fail("{}: '{}' holds a non-integer", where, key);
    const int64_t v = x.get<int64_t>();
    if (v < 0 || v >= vocab)
      fail("{}: '{}' holds id {} outside the vocabulary [0, {})", where, key, v, vocab);
    out.push_back(int32_t(v));
  }
  return out;
}

// One pairs-file line; `where` is FILE:LINE.
CalibPair parse_pair_line(const std::string& line, const std::string& where,
                          const PairTokenizer& tok, int vocab_size) {
  const auto j = parse_json_or_discarded(line);
  if (j.is_discarded() || !j.is_object()) fail("{}: not a JSON object", where);
  CalibPair p;
  if (j.contains("prompt_ids") || j.contains("answer_ids")) {
    if (!j.contains("prompt_ids") || !j.contains("answer_ids"))
      fail("{}: give both 'prompt_ids' and 'answer_ids'", where);
    p.prompt = ids_field(j, "prompt_ids", where, vocab_size);
    p.answer = ids_field(j, "answer_ids", where, vocab_size);
  } else {
    // GSM8K-style records ({"question", "answer"}) are pairs as they are.
    const char* pk = j.contains("prompt") ? "prompt" : "question";
    if (!j.contains(pk) || !j[pk].is_string() || !j.contains("answer") || !j["answer"].is_string())
      fail(
          "{}: expected string fields 'prompt' (or 'question') and 'answer', or "
          "'prompt_ids'/'answer_ids'",
          where);
    if (!tok.prompt) fail("{}: text pairs need the model's tokenizer", where);
    p.prompt = tok.prompt(j[pk].get<std::string>());
    p.answer = tok.answer(j["answer"].get<std::string>());
  }
  // Checked here, where the file and line are known: an empty answer used to fail much later
  // ("a pair with an empty answer has no masked-diffusion loss"), naming neither.
  if (p.answer.empty())
    fail("{}: the answer is empty{}; a calibration pair needs at least one answer token", where,
         j.contains("answer_ids") ? "" : " (it tokenizes to no tokens)");
  if (p.prompt.size() + p.answer.size() < 2)
    fail("{}: a pair needs at least two tokens in all", where);
  p.where = where;
  return p;
}

void hash_line(uint64_t& h, const std::string& line) {
  for (unsigned char c : line) h = (h ^ c) * 1099511628211ull;
}

constexpr uint64_t kFnvBasis = 1469598103934665603ull;

}  // namespace

std::vector<CalibPair> read_calib_pairs(const std::string& path, const PairTokenizer& tok,
                                        int vocab_size, size_t limit, std::string* hash) {
  std::ifstream in(path);
  if (!in) fail("--data {}: cannot open", path);
  std::vector<CalibPair> pairs;
  uint64_t h = kFnvBasis;
  std::string line;
  for (size_t no = 1; std::getline(in, line); ++no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (limit && pairs.size() >= limit) break;
    hash_line(h, line);
    pairs.push_back(parse_pair_line(line, fmt::format("{}:{}", path, no), tok, vocab_size));
  }
  if (pairs.empty()) fail("--data {}: no pairs", path);
  if (hash) *hash = fmt::format("{:016x}", h);
  return pairs;
}

std::string pair_json_line(const TextPair& p) {
  return nlohmann::json{{"prompt", p.prompt}, {"answer", p.answer}, {"source", p.source}}.dump();
}

std::vector<CalibPair> tokenize_text_pairs(const std::vector<TextPair>& pairs,
                                           const PairTokenizer& tok, int vocab_size,
                                           std::string* hash) {
  if (pairs.empty()) fail("calibrate: no pairs");
  std::vector<CalibPair> out;
  uint64_t h = kFnvBasis;
  for (const TextPair& p : pairs) {
    const std::string line = pair_json_line(p);
    hash_line(h, line);
    out.push_back(parse_pair_line(line, p.source, tok, vocab_size));
  }
  if (hash) *hash = fmt::format("{:016x}", h);
  return out;
}

}  // namespace dllmq
