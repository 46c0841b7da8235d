#include "io/model_config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <sstream>

#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/json_limits.h"

namespace dllmq {

using nlohmann::json;

const char* arch_name(Arch a) {
  return a == Arch::kLLaDA ? "llada" : "dream";
}

namespace {

// Upper bound of integer geometry fields: keeps every product of two of them inside size_t and
// every single one inside int.
constexpr int64_t kMaxInt = 1 << 30;
// RoPE's frequencies are base^(-2i/head_dim): a base below 1 makes them grow with i (no released
// model has one) and a tiny one overflows them in float. Every released base is >= 10^4.
constexpr double kMinRopeTheta = 1.0;
// Norm epsilons are added in float: below float's smallest normal (1.2e-38) they round towards 0
// and an all-zero row normalises to 0/0. Released models use 1e-6 to 1e-5.
constexpr double kMinNormEps = 1e-30;

class Fields {
 public:
  Fields(const json& j, std::string file) : j_(j), file_(std::move(file)) {}

  // Integers in [lo, hi]; geometry fields are positive (a zero-sized layer computes nothing and
  // a zero divisor turns into NaN logits), token ids are non-negative.
  int req_int(const char* k, int64_t lo = 0, int64_t hi = kMaxInt) const {
    if (!j_.contains(k)) fail("{}: missing integer field '{}'", file_, k);
    const json& v = j_[k];
    if (!v.is_number_integer())
      fail("{}: field '{}' = {}: expected an integer in [{}, {}]", file_, k, v.dump(), lo, hi);
    // A uint64 above INT64_MAX is out of range whatever get<int64_t>() would make of it.
    const bool big = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX);
    const int64_t x = big ? INT64_MAX : v.get<int64_t>();
    if (x < lo || x > hi)
      fail("{}: field '{}' = {} out of range: expected an integer in [{}, {}]", file_, k, v.dump(),
           lo, hi);
    return static_cast<int>(x);
  }
  int opt_int(const char* k, int def, int64_t lo = 0, int64_t hi = kMaxInt) const {
    if (!j_.contains(k) || j_[k].is_null()) return def;
    return req_int(k, lo, hi);
  }
  // A finite number in [lo, hi) (RoPE base, norm epsilon): 0, negatives, infinities (1e999
  // parses as inf) and NaN make every logit NaN, and so do values that are positive in double
  // but not in the float arithmetic that uses them: an epsilon of 1e-299 is 0 as a float, a RoPE
  // base of 1e-300 makes its frequencies infinite (a fuzz finding, docs/reliability.md).
  double opt_in_range(const char* k, double def, double lo, double hi) const {
    if (!j_.contains(k) || j_[k].is_null()) return def;
    const json& v = j_[k];
    const double x = v.is_number() ? v.get<double>() : std::nan("");
    if (!(std::isfinite(x) && x >= lo && x < hi))
      fail("{}: field '{}' = {}: expected a finite number in [{:g}, {:g})", file_, k, v.dump(), lo,
           hi);
    return x;
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
  bool has(const char* k) const { return j_.contains(k) && !j_[k].is_null(); }
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
  c.d_model = f.req_int("d_model", 1);
  c.n_heads = f.req_int("n_heads", 1);
  c.n_kv_heads = f.opt_int("n_kv_heads", c.n_heads, 1);
  c.n_layers = f.req_int("n_layers", 1);
  if (f.has("mlp_hidden_size")) {
    c.mlp_hidden = f.req_int("mlp_hidden_size", 1);
  } else {
    const int ratio = f.opt_int("mlp_ratio", 4, 1);
    if (int64_t(ratio) * c.d_model > kMaxInt)
      fail("{}: mlp_ratio {} x d_model {} exceeds {}", f.file(), ratio, c.d_model, kMaxInt);
    c.mlp_hidden = ratio * c.d_model;
  }
  const int vocab = f.req_int("vocab_size", 1);
  // The embedding may be padded past the tokenizer's vocabulary, never shorter than it.
  c.vocab_size = f.opt_int("embedding_size", vocab, vocab);
  c.max_seq = f.opt_int("max_sequence_length", 4096, 1);
  c.rope_theta = f.opt_in_range("rope_theta", 10000.0, kMinRopeTheta, 1e12);
  c.rms_eps = static_cast<float>(f.opt_in_range("rms_norm_eps", 1e-5, kMinNormEps, 1.0));
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
  c.d_model = f.req_int("hidden_size", 1);
  c.n_heads = f.req_int("num_attention_heads", 1);
  c.n_kv_heads = f.opt_int("num_key_value_heads", c.n_heads, 1);
  c.n_layers = f.req_int("num_hidden_layers", 1);
  c.mlp_hidden = f.req_int("intermediate_size", 1);
  c.vocab_size = f.req_int("vocab_size", 1);
  c.max_seq = f.opt_int("max_position_embeddings", 32768, 1);
  c.rope_theta = f.opt_in_range("rope_theta", 10000.0, kMinRopeTheta, 1e12);
  c.rms_eps = static_cast<float>(f.opt_in_range("rms_norm_eps", 1e-6, kMinNormEps, 1.0));
  c.tied_embeddings = f.opt_bool("tie_word_embeddings", false);
  c.qkv_bias = true;  // Qwen2 layout always has q/k/v biases
  c.mask_id = f.opt_int("mask_token_id", 151666);
  c.eos_id = f.opt_int("eos_token_id", 151643);
  c.pad_id = f.opt_int("pad_token_id", c.eos_id);
  c.bos_id = f.opt_int("bos_token_id", -1);
  c.eot_id = f.opt_int("eot_token_id", -1);
  c.logits_shift = 1;
}

// The architecture a config names, from model_type and architectures[0]; the two must agree
// (a LLaDA model_type with a Dream class is a corrupt or hand-edited file, not a choice).
Arch detect_arch(const json& j, const std::string& path, std::string& model_type) {
  if (j.contains("model_type") && !j["model_type"].is_null() && !j["model_type"].is_string())
    fail("{}: field 'model_type' must be a string", path);
  model_type = j.contains("model_type") && j["model_type"].is_string()
                   ? j["model_type"].get<std::string>()
                   : std::string();
  std::string cls;
  if (j.contains("architectures") && !j["architectures"].is_null()) {
    const json& a = j["architectures"];
    if (!a.is_array() || a.size() != 1 || !a[0].is_string())
      fail("{}: field 'architectures' must be a list of one class name, got {}", path, a.dump());
    cls = a[0].get<std::string>();
  }
  std::optional<Arch> by_type, by_class;
  if (model_type == "llada") by_type = Arch::kLLaDA;
  if (model_type == "Dream" || model_type == "dream") by_type = Arch::kDream;
  if (cls == "LLaDAModelLM") by_class = Arch::kLLaDA;
  if (cls == "DreamModel") by_class = Arch::kDream;
  const bool type_unknown = !model_type.empty() && !by_type;
  const bool class_unknown = !cls.empty() && !by_class;
  if ((by_type && by_class && *by_type != *by_class) || (by_type && class_unknown) ||
      (by_class && type_unknown))
    fail(
        "{}: model_type '{}' and architectures ['{}'] name different architectures; dllmq "
        "supports LLaDA (model_type 'llada', LLaDAModelLM) and Dream (model_type 'Dream', "
        "DreamModel)",
        path, model_type, cls);
  if (by_type) return *by_type;
  if (by_class) return *by_class;
  fail(
      "{}: unknown architecture (model_type '{}', architectures '{}'); dllmq supports LLaDA "
      "(model_type 'llada', LLaDAModelLM) and Dream (model_type 'Dream', DreamModel)",
      path, model_type, cls);
}

// A present field the other architecture spells its geometry with: the config mixes two
// layouts, and the one we read may not be the one its weights follow.
void reject_foreign_fields(const json& j, Arch arch, const std::string& path) {
  static const char* const kLLaDAOnly[] = {"d_model",    "n_heads",         "n_layers",
                                           "n_kv_heads", "mlp_hidden_size", "max_sequence_length"};
  static const char* const kDreamOnly[] = {"hidden_size",       "num_attention_heads",
                                           "num_hidden_layers", "num_key_value_heads",
                                           "intermediate_size", "max_position_embeddings"};
  for (const char* k : arch == Arch::kLLaDA ? std::span(kDreamOnly) : std::span(kLLaDAOnly))
    if (j.contains(k) && !j[k].is_null())
      fail("{}: field '{}' belongs to {} configs, but this one is {}", path, k,
           arch == Arch::kLLaDA ? "Dream" : "LLaDA", arch_name(arch));
}

}  // namespace

ModelConfig load_model_config(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open (a model directory needs config.json)", path);
  std::ostringstream text;
  text << in.rdbuf();
  return parse_model_config(text.str(), path);
}

ModelConfig parse_model_config(const std::string& text, const std::string& path) {
  json j;
  check_json_depth(text, path);
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail("{}: malformed JSON: {}", path, e.what());
  }
  if (!j.is_object()) fail("{}: expected a JSON object", path);
  Fields f(j, path);
  ModelConfig c;
  const Arch arch = detect_arch(j, path, c.model_type);
  reject_foreign_fields(j, arch, path);
  if (arch == Arch::kLLaDA)
    parse_llada(f, c);
  else
    parse_dream(f, j, c);
  if (c.d_model % c.n_heads != 0)
    fail("{}: d_model {} is not divisible by the number of heads {}", path, c.d_model, c.n_heads);
  if (c.n_heads % c.n_kv_heads != 0)
    fail("{}: number of heads {} is not a multiple of the KV heads {}", path, c.n_heads,
         c.n_kv_heads);
  c.head_dim = c.d_model / c.n_heads;
  if (c.head_dim % 2 != 0) fail("{}: head dim {} must be even for RoPE", path, c.head_dim);
  // An explicit head_dim (Qwen2-style configs may carry one) must be the one the shapes imply.
  if (f.has("head_dim") && f.req_int("head_dim", 1) != c.head_dim)
    fail("{}: head_dim {} contradicts d_model {} / heads {} = {}", path, f.req_int("head_dim", 1),
         c.d_model, c.n_heads, c.head_dim);
  auto token = [&](const char* field, int id, bool required) {
    if ((required || id >= 0) && (id < 0 || id >= c.vocab_size))
      fail("{}: {} {} outside the vocabulary [0, {})", path, field, id, c.vocab_size);
  };
  token("mask_token_id", c.mask_id, true);
  token("eos_token_id", c.eos_id, true);
  token("pad_token_id", c.pad_id, false);
  token("bos_token_id", c.bos_id, false);
  token("eot_token_id", c.eot_id, false);
  return c;
}

}  // namespace dllmq
