// model.safetensors.index.json (src/io/safetensors.cpp parse_safetensors_index): shard names
// must stay plain file names inside the model directory.
#include "fuzz_util.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::accept_or_reject([&] {
    const auto idx = dllmq::parse_safetensors_index(std::string(fuzz::as_text(data, size)),
                                                    "model.safetensors.index.json");
    for (const auto& s : idx.shards)
      if (s.empty() || s == "." || s == ".." || s.find('/') != std::string::npos) std::abort();
  });
  return 0;
}
