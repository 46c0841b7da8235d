// Chat-template rendering (src/tokenizer/chat_template.cpp) of arbitrary user and system text
// (invalid UTF-8 included), then encoding with the embedded model's tokenizer as `generate
// --chat` does. Input: user text, optionally "\n=====\n" and a system message.
#include "fuzz_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer_roundtrip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto tok =
      dllmq::load_tokenizer_json(fuzz::repo_file("models/dllmq-synth-tiny/tokenizer.json"));
  const std::string_view in = fuzz::as_text(data, size);
  const bool has_system = in.find("\n=====\n") != std::string_view::npos;
  const auto parts = fuzz::split(in, "\n=====\n", 2);
  const std::optional<std::string_view> system =
      has_system ? std::optional<std::string_view>(parts[1]) : std::nullopt;
  fuzz::accept_or_reject([&] {
    for (const auto f : {dllmq::ChatFormat::kLLaDA, dllmq::ChatFormat::kQwen}) {
      const std::string text = dllmq::render_chat(f, parts[0], system);
      // Qwen's template inserts the user turn verbatim.
      if (f == dllmq::ChatFormat::kQwen && text.find(parts[0]) == std::string::npos) std::abort();
      const auto ids = tok->encode(text, true);
      if (ids.empty()) std::abort();
      (void)tok->decode(ids, true);
    }
  });
  return 0;
}
