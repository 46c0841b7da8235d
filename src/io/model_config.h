// config.json of a released LLaDA, LLaDA-MoE or Dream checkpoint, normalised to one struct.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dllmq {

// The decoding family: which samplers and logit convention a model uses. LLaDA-MoE decodes as
// LLaDA (its release's generate() is LLaDA's loop), so it is kLLaDA here; its block structure is
// told by `Layout`.
enum class Arch { kLLaDA, kDream };

// Tensor names and block structure of a checkpoint.
enum class Layout {
  kLLaDA,     // LLaDA (OLMo names: model.transformer.blocks.N.*), dense SwiGLU
  kDream,     // Dream (Qwen2 names), dense SwiGLU with q/k/v biases
  kLLaDAMoE,  // LLaDA-MoE (OLMoE names: model.layers.N.*), routed experts, QK norm (model/moe.h)
};

// The mixture-of-experts part of a LLaDA-MoE config (zero / empty for dense models).
struct MoeConfig {
  int n_experts = 0;         // num_experts: routed experts per MoE layer
  int top_k = 0;             // num_experts_per_tok
  int expert_hidden = 0;     // expert_intermediate_size
  int shared_hidden = 0;     // shared_expert_intermediate_size; 0: no shared expert
  int dense_hidden = 0;      // dense_intermediate_size (layers whose moe_layer_freq entry is 0)
  bool expert_bias = false;  // moe_router_enable_expert_bias: a per-expert bias added to the
                             // router probabilities before top-k (and kept in the weights)
  std::vector<uint8_t> moe_layer;  // per layer: 1 routed experts, 0 dense MLP
  bool enabled() const { return n_experts > 0; }
  bool is_moe(int layer) const { return enabled() && moe_layer[size_t(layer)] != 0; }
};

struct ModelConfig {
  Arch arch = Arch::kLLaDA;
  Layout layout = Layout::kLLaDA;
  std::string model_type;    // as written in config.json
  std::string architecture;  // architectures[0] as written ("" when absent)
  int d_model = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int n_layers = 0;
  // FFN width a token passes through: the dense MLP's, or for LLaDA-MoE the widest of a dense
  // layer's and a MoE layer's active width (top_k experts + the shared expert). FLOP counts and
  // activation estimates use it; a MoE layer's buffers are sized by model/moe.h.
  int mlp_hidden = 0;
  int vocab_size = 0;  // rows of the embedding / LM head (LLaDA: embedding_size)
  int max_seq = 0;
  double rope_theta = 10000.0;
  float rms_eps = 1e-5f;
  bool tied_embeddings = false;
  bool qkv_bias = false;
  bool out_bias = false;  // attention output projection bias (LLaDA-MoE attention_bias)
  bool qk_norm = false;   // per-head RMSNorm of q and k before RoPE (LLaDA-MoE qk_layernorm)
  MoeConfig moe;
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
// "llada", "dream" or "llada-moe".
const char* layout_name(Layout l);

}  // namespace dllmq
