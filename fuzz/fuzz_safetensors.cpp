// safetensors header and data offsets (src/io/safetensors.cpp): an accepted file must describe
// tensors that lie inside it; every byte of every accepted tensor is read so that ASan sees an
// out-of-bounds view.
#include <span>

#include "fuzz_util.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::accept_or_reject([&] {
    dllmq::SafetensorsFile f("fuzz.safetensors", std::span(data, size));
    unsigned sum = 0;
    for (const auto& [name, t] : f.tensors()) {
      const auto* p = static_cast<const uint8_t*>(t.data);
      if (t.numel() * int64_t(dllmq::dtype_size(t.dtype)) != int64_t(t.nbytes)) std::abort();
      for (size_t i = 0; i < t.nbytes; ++i) sum += p[i];
    }
    volatile unsigned sink = sum;
    (void)sink;
  });
  return 0;
}
