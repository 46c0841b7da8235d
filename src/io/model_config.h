// config.json of a released LLaDA or Dream checkpoint, normalised to one struct.
#pragma once

#include <string>

namespace dllmq {

enum class Arch { kLLaDA, kDream };

struct ModelConfig {
  Arch arch = Arch::kLLaDA;
  std::string model_type;  // as written in config.json
  int d_model = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int n_layers = 0;
  int mlp_hidden = 0;
  int vocab_size = 0;  // rows of the embedding / LM head (LLaDA: embedding_size)
  int max_seq = 0;
  double rope_theta = 10000.0;
  float rms_eps = 1e-5f;
  bool tied_embeddings = false;
  bool qkv_bias = false;
  int mask_id = -1;
  int eos_id = -1;
  int bos_id = -1;
  int pad_id = -1;
  int eot_id =
      -1;  // end-of-turn; -1 if the config does not say (resolved later from the tokenizer)
  // Raw logit row j predicts token j + logits_shift (Dream's AR heritage: 1; LLaDA: 0).
  int logits_shift = 0;

  int kv_dim() const { return n_kv_heads * head_dim; }
  // K+V bytes per canvas position over all layers at 16 bits.
  size_t kv_bytes_per_token_fp16() const { return size_t(2) * n_layers * kv_dim() * 2; }
};

// Reads DIR/config.json; throws naming the field on anything missing or unsupported. Numeric
// fields are range-checked (positive geometry, heads dividing d_model, finite positive RoPE base
// and norm epsilon, token ids inside the vocabulary), and model_type, architectures and the
// geometry field names must all describe the same architecture.
ModelConfig load_model_config(const std::string& dir);
// The same checks on the text of a config.json; `path` names it in errors.
ModelConfig parse_model_config(const std::string& text, const std::string& path);

const char* arch_name(Arch a);

}  // namespace dllmq
