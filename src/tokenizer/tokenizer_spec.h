// Internal: the parts a loader assembles into a Tokenizer.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace dllmq {

// How ids become text. kChunked (HF decode, transformers slow tokenizers): added tokens are emitted
// verbatim and each run of model tokens between them is decoded lossily on its own. kWhole
// (tiktoken): all bytes are joined, then decoded lossily once.
enum class DecodeMode { kChunked, kWhole };

struct AddedMatcher;

struct TokenizerSpec {
  std::string source;
  std::vector<Normalizer> normalizers;
  std::unique_ptr<PreTokenizer> pre;  // nullptr: the whole segment is one piece
  std::unique_ptr<BpeModel> bpe = std::make_unique<BpeModel>();
  std::vector<AddedToken> added;
  DecodeMode decode_mode = DecodeMode::kChunked;
  // Vocab strings outside the byte-level alphabet (kept verbatim; their UTF-8 is their bytes).
  std::unordered_map<int32_t, std::string> odd_tokens;
  std::unordered_map<std::string, int32_t> odd_ids;

  // Filled by the Tokenizer constructor.
  std::vector<int32_t> added_slot;  // id -> index into `added`, -1 if none (dense: decode is hot)
  std::shared_ptr<const AddedMatcher> matchers[2][2];  // [allow_special][normalized pass]
  const AddedToken* find_added(int32_t id) const;
};

}  // namespace dllmq
