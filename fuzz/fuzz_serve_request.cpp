// HTTP request bodies of `dllmq serve` (src/serve/request.cpp): POST /v1/completions and
// /v1/chat/completions, parsed against the embedded models' config, tokenizer and chat template
// as the server does before it queues a request. Input: one selector byte (bit 0: chat endpoint,
// bit 1: the Dream model, bit 2: server default --cache dual --threshold 0.9), then the body.
// A body is either accepted as a request the decoder can run, or refused with a 400 ApiError
// that names a field (or the body); anything else escapes and is a finding.
#include <array>
#include <cstdlib>

#include "settings/text_codec.h"
#include "decode/generate.h"
#include "fuzz_util.h"
#include "io/model_config.h"
#include "serve/api_error.h"
#include "serve/request.h"

namespace {

struct Served {
  std::string dir;
  dllmq::ModelConfig cfg;
  std::unique_ptr<dllmq::settings::TextCodec> codec;
};

const Served& served(bool dream) {
  static const std::array<Served, 2> s = [] {
    std::array<Served, 2> out;
    const char* dirs[2] = {"models/dllmq-synth-tiny", "models/dllmq-synth-dream-tiny"};
    for (int i = 0; i < 2; ++i) {
      out[i].dir = fuzz::repo_file(dirs[i]);
      out[i].cfg = dllmq::load_model_config(out[i].dir);
      out[i].codec = std::make_unique<dllmq::settings::TextCodec>(out[i].dir, out[i].cfg);
    }
    return out;
  }();
  return s[dream ? 1 : 0];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t sel = data[0];
  const Served& m = served(sel & 2);
  const auto endpoint =
      (sel & 1) ? dllmq::serve::Endpoint::kChat : dllmq::serve::Endpoint::kCompletions;
  dllmq::serve::RequestDefaults defaults;
  defaults.model_dir = m.dir;
  defaults.max_positions = 256;  // a small --max-canvas: long prompts must be refused
  if (sel & 4) {
    defaults.flags.cache = "dual";
    defaults.flags.threshold = 0.9;
  }
  const std::string body(fuzz::as_text(data + 1, size - 1));
  try {
    const auto r = dllmq::serve::parse_request(body, endpoint, defaults, *m.codec, m.cfg);
    // Accepted: every prompt decodes as is (the checks generate() would make pass), fits the
    // canvas, and streaming has one prompt.
    if (r.prompts.empty() || (r.stream && r.prompts.size() != 1)) std::abort();
    if (r.options.steps < 1 || r.options.steps > r.options.gen_length) std::abort();
    for (const auto& p : r.prompts) {
      if (int(p.size()) + r.options.gen_length > defaults.max_positions) std::abort();
      for (const int32_t id : p)
        if (id < 0 || id >= m.cfg.vocab_size) std::abort();
      dllmq::check_generate_options(r.options, m.cfg, p);  // throws: a finding (escapes)
    }
    for (const auto& s : r.stop)
      if (s.empty()) std::abort();
  } catch (const dllmq::serve::ApiError& e) {
    if (e.status() != 400 || std::string(e.what()).empty()) std::abort();
  }
  return 0;
}
