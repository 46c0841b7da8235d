// Calibration pairs: JSONL, one object per line, either
//   {"prompt": TEXT, "answer": TEXT}            (needs the model's tokenizer; --chat templates
//                                                 the prompt; "question" may stand for
//                                                 "prompt", so GSM8K records are pairs)  or
//   {"prompt_ids": [ids...], "answer_ids": [ids...]}.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dllmq {

struct CalibPair {
  std::vector<int32_t> prompt;
  std::vector<int32_t> answer;
  std::string where;  // "FILE:LINE" (or the converted record's source): for later errors
};

// A text pair before tokenization (converted from benchmark records, src/eval/calib_pairs.h).
struct TextPair {
  std::string prompt, answer;
  std::string source;  // "FILE:LINE" of the record
};

// The pairs-file line of a pair: {"answer", "prompt", "source"} (what `make-pairs` writes and
// `calibrate --data` reads).
std::string pair_json_line(const TextPair& p);

struct PairTokenizer {
  std::function<std::vector<int32_t>(const std::string&)> prompt;  // may be empty: ids only
  std::function<std::vector<int32_t>(const std::string&)> answer;
};

// Reads up to `limit` pairs (0 = all). Errors name the file and line. `hash` receives an FNV-1a
// 64 hex digest of the bytes of the lines read (recorded in the artifact).
std::vector<CalibPair> read_calib_pairs(const std::string& path, const PairTokenizer& tok,
                                        int vocab_size, size_t limit, std::string* hash);

// The same for pairs converted in memory (`calibrate --task`): each is read as its pairs-file line
// (pair_json_line), so `hash` equals that of `make-pairs`' file of the same pairs.
std::vector<CalibPair> tokenize_text_pairs(const std::vector<TextPair>& pairs,
                                           const PairTokenizer& tok, int vocab_size,
                                           std::string* hash);

}  // namespace dllmq
