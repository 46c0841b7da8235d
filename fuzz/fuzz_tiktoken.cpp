// tiktoken rank files (src/tokenizer/load_tiktoken.cpp) with the Qwen specials. Input: the rank
// file, then "\n=====\n" and text to encode.
#include "fuzz_util.h"
#include "tokenizer_roundtrip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto specials = dllmq::qwen_special_tokens();
  const auto parts = fuzz::split(fuzz::as_text(data, size), "\n=====\n", 2);
  fuzz::accept_or_reject([&] {
    const auto tok = dllmq::load_tiktoken_text(parts[0], "fuzz.tiktoken", specials);
    fuzz::exercise_tokenizer(*tok, parts[1]);
  });
  return 0;
}
