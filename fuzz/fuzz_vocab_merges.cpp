// GPT-2-style vocab.json + merges.txt (src/tokenizer/load_hf.cpp load_vocab_merges), with and
// without added tokens. Input: vocab.json, "\n=====\n", merges.txt, "\n=====\n", text.
#include "fuzz_util.h"
#include "tokenizer_roundtrip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto specials = dllmq::qwen_special_tokens();
  const auto parts = fuzz::split(fuzz::as_text(data, size), "\n=====\n", 3);
  fuzz::accept_or_reject([&] {
    const bool added = !parts[2].empty() && (parts[2][0] & 1);
    const auto tok =
        dllmq::load_vocab_merges_text(parts[0], parts[1], "vocab.json", "merges.txt",
                                      added ? specials : std::vector<dllmq::AddedToken>{});
    fuzz::exercise_tokenizer(*tok, parts[2]);
  });
  return 0;
}
