#include "io/model_config.h"

#include <algorithm>
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

const char* layout_name(Layout l) {
  return l == Layout::kLLaDA ? "llada" : l == Layout::kDream ? "dream" : "llada-moe";
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

// What every refusal of an architecture lists.
constexpr const char* kSupported =
    "dllmq supports LLaDA (model_type 'llada', architectures ['LLaDAModelLM']), LLaDA-MoE "
    "(model_type 'llada' or 'lladamoe', architectures ['LLaDAMoEModelLM']) and Dream "
    "(model_type 'Dream', architectures ['DreamModel'])";

// The released LLaDA-MoE config.json has no mask_token_id: the mask id is in the model card's
// generate code (and llama.cpp's converter writes the same id).
constexpr int kLLaDAMoEMaskId = 156895;
constexpr int kLLaDAMoEEosId = 156892;  // <|endoftext|> of the LLaDA-MoE tokenizer

// Fields only a mixture-of-experts config carries: on a dense LLaDA config they mean the
// checkpoint is something else (LLaDA-MoE with its class name lost, or an unknown MoE variant).
constexpr const char* kMoeFields[] = {"num_experts",
                                      "num_experts_per_tok",
                                      "expert_intermediate_size",
                                      "shared_expert_intermediate_size",
                                      "dense_intermediate_size",
                                      "moe_layer_freq"};

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
  const json& at(const char* k) const { return j_[k]; }
  const std::string& file() const { return file_; }

 private:
  const json& j_;
  std::string file_;
};

void parse_llada(const Fields& f, ModelConfig& c) {
  c.arch = Arch::kLLaDA;
  c.layout = Layout::kLLaDA;
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

// The geometry fields Dream (Qwen2) and LLaDA-MoE (OLMoE) share, with Hugging Face's names.
void parse_hf_geometry(const Fields& f, const json& j, ModelConfig& c, int default_max_seq) {
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
    fail("{}: unsupported option rope_scaling (only plain RoPE is implemented)", f.file());
  std::string act = f.opt_str("hidden_act", "silu");
  if (act != "silu") fail("{}: unsupported hidden_act '{}' (expected 'silu')", f.file(), act);
  c.d_model = f.req_int("hidden_size", 1);
  c.n_heads = f.req_int("num_attention_heads", 1);
  c.n_kv_heads = f.opt_int("num_key_value_heads", c.n_heads, 1);
  c.n_layers = f.req_int("num_hidden_layers", 1);
  c.vocab_size = f.req_int("vocab_size", 1);
  c.max_seq = f.opt_int("max_position_embeddings", default_max_seq, 1);
}

void parse_dream(const Fields& f, const json& j, ModelConfig& c) {
  c.arch = Arch::kDream;
  c.layout = Layout::kDream;
  parse_hf_geometry(f, j, c, 32768);
  f.require_bool("use_sliding_window", false, "sliding-window attention is not implemented");
  c.mlp_hidden = f.req_int("intermediate_size", 1);
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

void parse_llada_moe(const Fields& f, const json& j, ModelConfig& c) {
  // Read from the released modeling code (LLaDAMoEModelLM, derived from OLMoE): every option
  // it reads must be one dllmq computes, or the config is refused naming it.
  c.arch = Arch::kLLaDA;
  c.layout = Layout::kLLaDAMoE;
  parse_hf_geometry(f, j, c, 4096);
  if (f.has("partial_rotary_factor") &&
      f.opt_in_range("partial_rotary_factor", 1.0, -1e9, 1e9) != 1.0)
    fail(
        "{}: field 'partial_rotary_factor' = {}: only 1.0 (RoPE over the whole head) is "
        "implemented",
        f.file(), j["partial_rotary_factor"].dump());
  if (f.has("clip_qkv"))
    fail(
        "{}: unsupported option clip_qkv = {} (dllmq implements LLaDA-MoE without q/k/v "
        "clipping; expected null)",
        f.file(), j["clip_qkv"].dump());
  // The reference class defaults rope_theta to -1 (no usable default): it must be given.
  if (!f.has("rope_theta")) fail("{}: missing number field 'rope_theta'", f.file());
  c.rope_theta = f.opt_in_range("rope_theta", 0.0, kMinRopeTheta, 1e12);
  c.rms_eps = static_cast<float>(f.opt_in_range("rms_norm_eps", 1e-5, kMinNormEps, 1.0));
  c.tied_embeddings = f.opt_bool("tie_word_embeddings", false);
  c.qkv_bias = c.out_bias = f.opt_bool("attention_bias", false);
  c.qk_norm = f.opt_bool("qk_layernorm", false);

  MoeConfig& m = c.moe;
  m.n_experts = f.req_int("num_experts", 1);
  m.top_k = f.req_int("num_experts_per_tok", 1);
  if (m.top_k > m.n_experts)
    fail(
        "{}: num_experts_per_tok {} exceeds num_experts {}: a token cannot be routed to more "
        "experts than the layer has",
        f.file(), m.top_k, m.n_experts);
  // moe_layer_freq: one entry per layer, 0 = dense MLP, anything else = routed experts (the
  // reference indexes it by layer, so it must be a list covering every layer).
  if (!f.has("moe_layer_freq") || !f.at("moe_layer_freq").is_array())
    fail(
        "{}: field 'moe_layer_freq' must be a list of {} integers (0: dense layer, 1: MoE "
        "layer), got {}",
        f.file(), c.n_layers, f.has("moe_layer_freq") ? f.at("moe_layer_freq").dump() : "none");
  const json& freq = f.at("moe_layer_freq");
  if (freq.size() != size_t(c.n_layers))
    fail("{}: field 'moe_layer_freq' has {} entries but num_hidden_layers is {}", f.file(),
         freq.size(), c.n_layers);
  bool any_moe = false, any_dense = false;
  for (const json& v : freq) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      fail("{}: field 'moe_layer_freq' entry {}: expected 0 (dense) or a positive integer (MoE)",
           f.file(), v.dump());
    m.moe_layer.push_back(v.get<int64_t>() != 0);
    (v.get<int64_t>() != 0 ? any_moe : any_dense) = true;
  }
  m.expert_hidden = any_moe ? f.req_int("expert_intermediate_size", 1) : 0;
  m.dense_hidden = any_dense ? f.req_int("dense_intermediate_size", 1) : 0;
  // null (or absent, or 0) = no shared expert; the reference builds one whenever the field is
  // not None, so 0 would be a zero-width expert that adds nothing.
  m.shared_hidden = f.opt_int("shared_expert_intermediate_size", 0, 0);
  m.expert_bias = f.opt_bool("moe_router_enable_expert_bias", false);
  if (int64_t(m.top_k) * m.expert_hidden + m.shared_hidden > kMaxInt)
    fail("{}: num_experts_per_tok {} x expert_intermediate_size {} exceeds {}", f.file(), m.top_k,
         m.expert_hidden, kMaxInt);
  // Fields the released modeling code reads but does not act on: its router always takes the
  // softmax, never renormalises the top-k probabilities (LLaDAMoESparseMoeBlock sets
  // norm_topk_prob = False whatever the config says) and never scales them. dllmq follows the
  // code (docs/models.md), so these are accepted whatever they hold.
  c.mlp_hidden = std::max(m.dense_hidden, m.top_k * m.expert_hidden + m.shared_hidden);
  c.mask_id = f.opt_int("mask_token_id", kLLaDAMoEMaskId);
  c.eos_id = f.opt_int("eos_token_id", kLLaDAMoEEosId);
  c.pad_id = f.opt_int("pad_token_id", c.eos_id);
  c.bos_id = f.opt_int("bos_token_id", -1);
  c.eot_id = f.opt_int("eot_token_id", -1);
  c.logits_shift = 0;
}

// The layout a config names, from model_type and architectures[0]; the two must agree (a LLaDA
// model_type with a Dream class is a corrupt or hand-edited file, not a choice). The LLaDA-MoE
// release keeps model_type 'llada', so only its class name (and its MoE fields) tell it from
// dense LLaDA.
Layout detect_layout(const json& j, const std::string& path, std::string& model_type,
                     std::string& cls) {
  if (j.contains("model_type") && !j["model_type"].is_null() && !j["model_type"].is_string())
    fail("{}: field 'model_type' must be a string", path);
  model_type = j.contains("model_type") && j["model_type"].is_string()
                   ? j["model_type"].get<std::string>()
                   : std::string();
  if (j.contains("architectures") && !j["architectures"].is_null()) {
    const json& a = j["architectures"];
    if (!a.is_array() || a.size() != 1 || !a[0].is_string())
      fail("{}: field 'architectures' must be a list of one class name, got {}", path, a.dump());
    cls = a[0].get<std::string>();
  }
  // model_type 'llada' is shared by dense LLaDA and LLaDA-MoE; 'lladamoe' is the public
  // training code's own name for the MoE config class.
  std::optional<Layout> by_type, by_class;
  bool type_llada_family = false;
  if (model_type == "llada") type_llada_family = true;
  if (model_type == "lladamoe") by_type = Layout::kLLaDAMoE;
  if (model_type == "Dream" || model_type == "dream") by_type = Layout::kDream;
  if (cls == "LLaDAModelLM") by_class = Layout::kLLaDA;
  if (cls == "LLaDAMoEModelLM") by_class = Layout::kLLaDAMoE;
  if (cls == "DreamModel") by_class = Layout::kDream;
  const bool type_known = by_type || type_llada_family;
  const bool type_unknown = !model_type.empty() && !type_known;
  const bool class_unknown = !cls.empty() && !by_class;
  const bool agree = !by_type || !by_class || *by_type == *by_class;
  const bool llada_agree = !type_llada_family || !by_class || *by_class != Layout::kDream;
  if (!agree || !llada_agree || (type_known && class_unknown) || (by_class && type_unknown))
    fail(
        "{}: model_type '{}' and architectures ['{}'] name different architectures (or one dllmq "
        "does not implement); {}",
        path, model_type, cls, kSupported);
  Layout layout;
  if (by_class)
    layout = *by_class;
  else if (by_type)
    layout = *by_type;
  else if (type_llada_family)
    layout = Layout::kLLaDA;
  else
    fail("{}: unknown architecture (model_type '{}', architectures '{}'); {}", path, model_type,
         cls, kSupported);
  // A dense LLaDA reading of a config with expert fields would load nothing it describes (and
  // an unknown MoE variant must not run as dense): refuse, naming the fields.
  if (layout == Layout::kLLaDA) {
    std::string found;
    for (const char* k : kMoeFields)
      if (j.contains(k) && !j[k].is_null()) found += (found.empty() ? "" : ", ") + std::string(k);
    if (!found.empty())
      fail(
          "{}: model_type '{}' with architectures {} is dense LLaDA, but the config has "
          "mixture-of-experts fields ({}); a LLaDA-MoE checkpoint must name its class "
          "(architectures ['LLaDAMoEModelLM']), and dllmq does not load an MoE config as dense",
          path, model_type, cls.empty() ? std::string("absent") : "['" + cls + "']", found);
  }
  return layout;
}

// A present field the other architecture spells its geometry with: the config mixes two
// layouts, and the one we read may not be the one its weights follow.
void reject_foreign_fields(const json& j, Layout layout, const std::string& path) {
  static const char* const kLLaDAOnly[] = {"d_model",    "n_heads",         "n_layers",
                                           "n_kv_heads", "mlp_hidden_size", "max_sequence_length"};
  static const char* const kDreamOnly[] = {"hidden_size",       "num_attention_heads",
                                           "num_hidden_layers", "num_key_value_heads",
                                           "intermediate_size", "max_position_embeddings"};
  // LLaDA-MoE spells its geometry the Hugging Face way, as Dream does.
  const bool olmo_names = layout == Layout::kLLaDA;
  for (const char* k : olmo_names ? std::span(kDreamOnly) : std::span(kLLaDAOnly))
    if (j.contains(k) && !j[k].is_null())
      fail("{}: field '{}' belongs to {} configs, but this one is {}", path, k,
           olmo_names ? "Dream configs and LLaDA-MoE" : "LLaDA", layout_name(layout));
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
  const Layout layout = detect_layout(j, path, c.model_type, c.architecture);
  reject_foreign_fields(j, layout, path);
  if (layout == Layout::kLLaDA)
    parse_llada(f, c);
  else if (layout == Layout::kDream)
    parse_dream(f, j, c);
  else
    parse_llada_moe(f, j, c);
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
