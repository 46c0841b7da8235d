// Decoding flags shared by generate, eval and bench (one spelling everywhere).
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "decode/generate.h"
#include "model/model.h"

namespace dllmq::settings {

struct GenerateFlags {
  // Unset: the model's generation_config.json defaults, else 256 / 32 / gen length.
  std::optional<int> gen_length;
  std::optional<int> block_length;
  std::optional<int> steps;  // default: gen_length (one token per step)
  std::optional<double> threshold;
  std::optional<double> factor;
  std::string cache = "none";
  std::string alg;
  double temperature = 0.0;
  double top_p = 1.0;
  int top_k = 0;
  double alg_temp = 0.0;
  double eps = 1e-3;
  double cfg_scale = 0.0;
  bool logits_eos_inf = false;
  bool confidence_eos_eot_inf = false;
  bool early_stop = false;
  uint64_t seed = 0;
  std::string dtype = "fp32";  // compute precision of the projections: fp32 | bf16
  bool w8a8 = false;           // int8 activations on quantized projections (an approximation)
  std::string kv;              // unset: follows the compute precision (fp32, or bf16)
  std::optional<int> kv_bits, kv_bits_k, kv_bits_v;
  int kv_group = 32;
  std::string calib;
  std::string kv_channels;
  std::string kv_base = "kivi";  // dllm-kvq base codec: kivi | kvquant
  std::string kv_base_calib;
  std::string trace_cache;
  int threads = 0;
};

void add_generate_flags(CLI::App* cmd, GenerateFlags& f);

// Validates spellings and builds the options (numeric rules are checked by generate()).
// Lengths not given as flags come from MODEL_DIR/generation_config.json: max_new_tokens, and,
// only when the generation length itself is defaulted that way, block_length and steps.
GenerateOptions resolve_generate_flags(const GenerateFlags& f, const std::string& model_dir);

// The --dtype flag, validated.
ComputeDType resolve_compute_dtype(const GenerateFlags& f);
// Sets the model's compute precision from --dtype, and --w8a8 (call after Model::load).
void apply_compute_flags(const GenerateFlags& f, Model& m);

// " | w8a8 ...": the approximation --w8a8 chose (Model::w8a8()), or "" when off.
std::string describe_w8a8(const Model& m);

// One line describing the resolved parameters (printed on stderr at start).
std::string describe(const GenerateOptions& o, const ModelConfig& cfg);

// Applies --threads (0 = leave OpenMP's default).
void apply_threads(int threads);

// A file of the repository (found above the binary, else in the source tree); "" if absent.
std::string repo_path(const std::string& rel);

// The model used when -m is not given: $DLLMQ_MODEL, else the repository's embedded model.
std::string default_model_dir();

}  // namespace dllmq::settings
