// HF tokenizer.json (src/tokenizer/load_hf.cpp) and the BPE built from it. Input: the file,
// then "\n=====\n" and text to encode with the loaded tokenizer.
#include "fuzz_util.h"
#include "tokenizer_roundtrip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = fuzz::split(fuzz::as_text(data, size), "\n=====\n", 2);
  fuzz::accept_or_reject([&] {
    const auto tok = dllmq::load_tokenizer_json_text(parts[0], "tokenizer.json");
    fuzz::exercise_tokenizer(*tok, parts[1]);
  });
  return 0;
}
