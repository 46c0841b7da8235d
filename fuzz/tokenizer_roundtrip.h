// What the tokenizer harnesses do with a tokenizer that loaded: encode the fuzzed text with and
// without special tokens, decode the ids (and ids taken from the input bytes, known or not),
// and look every produced id up. Ids must lie inside the vocabulary.
#pragma once

#include <cstring>

#include "tokenizer/tokenizer.h"

namespace fuzz {

inline void exercise_tokenizer(const dllmq::Tokenizer& tok, const std::string& text) {
  for (const bool special : {true, false}) {
    const auto ids = tok.encode(text, special);
    for (int32_t id : ids)
      if (id < 0 || size_t(id) >= tok.vocab_size()) std::abort();
    (void)tok.decode(ids, false);
    (void)tok.decode(ids, true);
    for (int32_t id : ids) {
      (void)tok.id_to_token(id);
      (void)tok.token_bytes(id);
      (void)tok.is_special(id);
    }
  }
  std::vector<int32_t> raw(text.size() / 4);
  if (!raw.empty()) std::memcpy(raw.data(), text.data(), raw.size() * 4);
  (void)tok.decode(raw, false);
  (void)tok.decode(raw, true);
  (void)tok.token_to_id(text);
}

}  // namespace fuzz
