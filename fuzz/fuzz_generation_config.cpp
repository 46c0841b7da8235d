// generation_config.json (src/io/generation_config.cpp): present lengths are positive.
#include "fuzz_util.h"
#include "io/generation_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::accept_or_reject([&] {
    const auto d = dllmq::parse_generation_defaults(std::string(fuzz::as_text(data, size)),
                                                    "generation_config.json");
    for (const auto& v : {d.gen_length, d.block_length, d.steps})
      if (v && (*v <= 0 || *v > (1 << 24))) std::abort();
  });
  return 0;
}
