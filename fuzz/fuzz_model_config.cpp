// config.json (src/io/model_config.cpp): an accepted config must have the invariants the
// forward pass relies on (positive geometry, heads dividing d_model, even head dim, finite
// RoPE base >= 1 and a norm epsilon that is not 0 as a float, special ids inside the
// vocabulary).
#include <cmath>

#include "fuzz_util.h"
#include "io/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::accept_or_reject([&] {
    const dllmq::ModelConfig c =
        dllmq::parse_model_config(std::string(fuzz::as_text(data, size)), "config.json");
    const bool ok = c.d_model > 0 && c.n_heads > 0 && c.n_kv_heads > 0 && c.n_layers > 0 &&
                    c.mlp_hidden > 0 && c.vocab_size > 0 && c.max_seq > 0 &&
                    c.head_dim * c.n_heads == c.d_model && c.n_heads % c.n_kv_heads == 0 &&
                    c.head_dim % 2 == 0 && std::isfinite(c.rope_theta) && c.rope_theta >= 1.0 &&
                    std::isfinite(c.rms_eps) && c.rms_eps >= 1e-30f && c.mask_id >= 0 &&
                    c.mask_id < c.vocab_size && c.eos_id >= 0 && c.eos_id < c.vocab_size &&
                    c.pad_id < c.vocab_size && c.bos_id < c.vocab_size && c.eot_id < c.vocab_size &&
                    c.kv_bytes_per_token_fp16() > 0;
    if (!ok) std::abort();
  });
  return 0;
}
