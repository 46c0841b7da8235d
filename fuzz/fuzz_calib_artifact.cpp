// Calibration artifacts (src/io/calib_artifact.cpp): safetensors with dllmq-calib metadata. An
// accepted artifact must hold what the KV stores index with: one entry per layer, K/V
// thresholds and codebooks of the sizes the bits imply, fp16 channels inside the KV width.
#include <span>

#include "fuzz_util.h"
#include "io/calib_artifact.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::accept_or_reject([&] {
    const dllmq::SafetensorsFile f("fuzz.calib.safetensors", std::span(data, size));
    const dllmq::CalibArtifact a = dllmq::parse_calib_artifact(f);
    const size_t kvd = size_t(a.n_kv_heads) * a.head_dim;
    if (int(a.layers.size()) != a.n_layers) std::abort();
    for (const auto& L : a.layers) {
      if (a.method == "kvquant" && (L.k_lower.size() != kvd || L.k_upper.size() != kvd ||
                                    L.k_codebook.size() != size_t(1) << a.bits_k ||
                                    L.v_codebook.size() != size_t(1) << a.bits_v))
        std::abort();
      for (int c : L.k_fp16_channels)
        if (c < 0 || size_t(c) >= kvd) std::abort();
    }
  });
  return 0;
}
