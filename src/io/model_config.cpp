#include "io/model_config.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace dllmq {

using nlohmann::json;

const char* arch_name(Arch a) {
  return a == Arch::kLLaDA ? "llada" : "dream";
}

namespace {

class Fields {
 public:
  Fields(const json& j, std::string file) : j_(j), file_(std::move(file)) {}

  int req_int(const char* k) const {
    if (!j_.contains(k) || !j_[k].is_number_integer())
      fail("{}: missing integer field '{}'", file_, k);
    int64_t v = j_[k].get<int64_t>();
    if (v < 0 || v > (1 << 30)) fail("{}: field '{}' = {} out of range", file_, k, v);
    return static_cast<int>(v);
  }
  int opt_int(const char* k, int def) const {
    if (!j_.contains(k) || j_[k].is_null()) return def;
    return req_int(k);
  }
  double opt_num(const char* k, double def) const {
    if (!j_.contains(k) || j_[k].is_null()) return def;
    if (!j_[k].is_number()) fail("{}: field '{}' must be a number", file_, k);
    return j_[k].get<double>();
  }
  bool opt_bool(const char* k, bool def) const {
    if (!j_.contains(k) || j_[k].is_null()) return def;
    if (!j_[k].is_boolean()) fail("{}: field '{}' must be true or false", file_, k);
    return j_[k].get<bool>();
  }
  std::string opt_str(const char* k, const std::string& def) const {
    if (!j_.contains(k) || j_[k].is_null()) return def;
    if (!j_[k].is_string()) fail("{}: field '{}' must be a string", file_, k);
    return j_[k].get<std::string>();
  }
  // Options dllmq does not implement must hold their default, or we would compute garbage.
  void require_bool(const char* k, bool want, const char* why) const {
    if (opt_bool(k, want) != want) fail("{}: unsupported option {}={} ({})", file_, k, !want, why);
  }
  const std::string& file() const { return file_; }

 private:
  const json& j_;
  std::string file_;
};

void parse_llada(const Fields& f, ModelConfig& c) {
  c.arch = Arch::kLLaDA;
  std::string block = f.opt_str("block_type", "llama");
  if (block != "llama")
    fail("{}: unsupported block_type '{}' (dllmq implements LLaDA's 'llama' block)", f.file(),
         block);
  f.require_bool("alibi", false, "ALiBi positions are not implemented");
  f.require_bool("rope", true, "LLaDA without RoPE is not implemented");
  f.require_bool("include_bias", false, "linear biases are not implemented for LLaDA");
  f.require_bool("scale_logits", false, "logit scaling is not implemented");
  f.require_bool("input_emb_norm", false, "input embedding norm is not implemented");
  f.require_bool("attention_layer_norm", false, "QK layer norm is not implemented");
  std::string norm = f.opt_str("layer_norm_type", "rms");
  if (norm != "rms") fail("{}: unsupported layer_norm_type '{}' (expected 'rms')", f.file(), norm);
  std::string act = f.opt_str("activation_type", "silu");
  if (act != "silu" && act != "swiglu")
    fail("{}: unsupported activation_type '{}' (expected 'silu')", f.file(), act);
  c.d_model = f.req_int("d_model");
  c.n_heads = f.req_int("n_heads");
  c.n_kv_heads = f.opt_int("n_kv_heads", c.n_heads);
  c.n_layers = f.req_int("n_layers");
  int ratio = f.opt_int("mlp_ratio", 4);
  c.mlp_hidden = f.opt_int("mlp_hidden_size", ratio * c.d_model);
  c.vocab_size = f.opt_int("embedding_size", f.req_int("vocab_size"));
  c.max_seq = f.opt_int("max_sequence_length", 4096);
  c.rope_theta = f.opt_num("rope_theta", 10000.0);
  c.rms_eps = static_cast<float>(f.opt_num("rms_norm_eps", 1e-5));
  c.tied_embeddings = f.opt_bool("weight_tying", false);
  c.qkv_bias = f.opt_bool("include_qkv_bias", false);
  c.mask_id = f.opt_int("mask_token_id", 126336);
  c.eos_id = f.opt_int("eos_token_id", 126081);
  c.pad_id = f.opt_int("pad_token_id", c.eos_id);
  c.bos_id = f.opt_int("bos_token_id", -1);
  c.eot_id = f.opt_int("eot_token_id", -1);
  c.logits_shift = 0;
}

void parse_dream(const Fields& f, const json& j, ModelConfig& c) {
  c.arch = Arch::kDream;
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
    fail("{}: unsupported option rope_scaling (only plain RoPE is implemented)", f.file());
  f.require_bool("use_sliding_window", false, "sliding-window attention is not implemented");
  std::string act = f.opt_str("hidden_act", "silu");
  if (act != "silu") fail("{}: unsupported hidden_act '{}' (expected 'silu')", f.file(), act);
  c.d_model = f.req_int("hidden_size");
  c.n_heads = f.req_int("num_attention_heads");
  c.n_kv_heads = f.opt_int("num_key_value_heads", c.n_heads);
  c.n_layers = f.req_int("num_hidden_layers");
  c.mlp_hidden = f.req_int("intermediate_size");
  c.vocab_size = f.req_int("vocab_size");
  c.max_seq = f.opt_int("max_position_embeddings", 32768);
  c.rope_theta = f.opt_num("rope_theta", 10000.0);
  c.rms_eps = static_cast<float>(f.opt_num("rms_norm_eps", 1e-6));
  c.tied_embeddings = f.opt_bool("tie_word_embeddings", false);
  c.qkv_bias = true;  // Qwen2 layout always has q/k/v biases
  c.mask_id = f.opt_int("mask_token_id", 151666);
  c.eos_id = f.opt_int("eos_token_id", 151643);
  c.pad_id = f.opt_int("pad_token_id", c.eos_id);
  c.bos_id = f.opt_int("bos_token_id", -1);
  c.eot_id = f.opt_int("eot_token_id", -1);
  c.logits_shift = 1;
}

}  // namespace

ModelConfig load_model_config(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  std::ifstream in(path);
  if (!in) fail("{}: cannot open (a model directory needs config.json)", path);
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    fail("{}: malformed JSON: {}", path, e.what());
  }
  if (!j.is_object()) fail("{}: expected a JSON object", path);
  Fields f(j, path);
  ModelConfig c;
  c.model_type = f.opt_str("model_type", "");
  std::string archs;
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string())
    archs = j["architectures"][0].get<std::string>();
  if (c.model_type == "llada" || archs == "LLaDAModelLM") {
    parse_llada(f, c);
  } else if (c.model_type == "Dream" || c.model_type == "dream" || archs == "DreamModel") {
    parse_dream(f, j, c);
  } else {
    fail(
        "{}: unknown architecture (model_type '{}', architectures '{}'); dllmq supports LLaDA "
        "(model_type 'llada', LLaDAModelLM) and Dream (model_type 'Dream', DreamModel)",
        path, c.model_type, archs);
  }
  if (c.n_heads == 0 || c.d_model % c.n_heads != 0)
    fail("{}: d_model {} is not divisible by the number of heads {}", path, c.d_model, c.n_heads);
  if (c.n_kv_heads == 0 || c.n_heads % c.n_kv_heads != 0)
    fail("{}: number of heads {} is not a multiple of the KV heads {}", path, c.n_heads,
         c.n_kv_heads);
  c.head_dim = c.d_model / c.n_heads;
  if (c.head_dim % 2 != 0) fail("{}: head dim {} must be even for RoPE", path, c.head_dim);
  if (c.mask_id < 0 || c.mask_id >= c.vocab_size)
    fail("{}: mask_token_id {} outside the vocabulary of {}", path, c.mask_id, c.vocab_size);
  return c;
}

}  // namespace dllmq
