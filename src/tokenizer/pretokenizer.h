// Pre-tokenizers: cut normalized text into pieces that BPE encodes independently. Mirrors the HF
// `tokenizers` Split / ByteLevel / Digits / Sequence semantics, working on byte ranges of a buffer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/regex.h"

namespace dllmq {

struct Piece {
  uint32_t off = 0, len = 0;  // byte range in the work buffer
};

// How a Split keeps the matched delimiters (HF SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` (ranges of `buf`) by their sub-pieces; may append new text to `buf`.
  virtual void apply(std::string& buf, std::vector<Piece>& pieces) const = 0;
  // True for ByteLevel: the step that maps bytes to the byte-level alphabet.
  virtual bool is_byte_level() const { return false; }
};

// The GPT-2 pattern ByteLevel(use_regex=true) splits with.
extern const char* const kGpt2Pattern;
// Qwen2 / Dream pattern (reference §2.4).
extern const char* const kQwen2Pattern;

std::unique_ptr<PreTokenizer> make_split(const std::string& pattern, bool literal, SplitBehavior b,
                                         bool invert, const std::string& where);
std::unique_ptr<PreTokenizer> make_byte_level(bool add_prefix_space, bool use_regex);
std::unique_ptr<PreTokenizer> make_digits(bool individual_digits);
std::unique_ptr<PreTokenizer> make_sequence(std::vector<std::unique_ptr<PreTokenizer>> steps);

// Builds from a tokenizer.json "pre_tokenizer" object; `where` is "file: pre_tokenizer..." for
// errors. Unsupported types fail with a message naming the type.
std::unique_ptr<PreTokenizer> pre_tokenizer_from_json(const nlohmann::json& j,
                                                      const std::string& where,
                                                      bool& has_byte_level);

}  // namespace dllmq
