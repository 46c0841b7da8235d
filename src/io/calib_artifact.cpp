#include "io/calib_artifact.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "util/error.h"

namespace dllmq {

namespace {

// std::string_view, not const char*: assigning a `const char*` into the map's strings trips
// GCC 12's -Wrestrict false positive (PR 105651) once inlined.
constexpr std::string_view kFormat = "dllmq-calib";
constexpr std::string_view kVersion = "1";

std::string layer_key(int l, const char* what) {
  return fmt::format("layers.{}.{}", l, what);
}

int64_t to_int(const std::string& path, const std::string& key, const std::string& v, int64_t lo,
               int64_t hi) {
  try {
    size_t pos = 0;
    const long long x = std::stoll(v, &pos);
    if (pos == v.size() && x >= lo && x <= hi) return x;
  } catch (...) {
  }
  fail("{}: metadata '{}' = '{}': expected an integer in [{}, {}]", path, key, v, lo, hi);
}

}  // namespace

void save_calib_artifact(const CalibArtifact& a, const std::string& path) {
  std::map<std::string, std::string> md = a.extra;
  md["format"] = kFormat;
  md["version"] = kVersion;
  md["method"] = a.method;
  md["trajectory"] = a.trajectory;
  md["fisher"] = a.fisher;
  md["kv_bits_k"] = std::to_string(a.bits_k);
  md["kv_bits_v"] = std::to_string(a.bits_v);
  md["outlier_percent"] = fmt::format("{}", a.outlier_percent);
  md["sink"] = std::to_string(a.sink);
  md["model_fingerprint"] = a.model_fingerprint;
  md["n_layers"] = std::to_string(a.n_layers);
  md["n_kv_heads"] = std::to_string(a.n_kv_heads);
  md["head_dim"] = std::to_string(a.head_dim);
  md["n_pairs"] = std::to_string(a.n_pairs);
  md["n_tokens"] = std::to_string(a.n_tokens);
  md["data_hash"] = a.data_hash;
  md["created_by"] = "dllmq calibrate";
  std::map<std::string, F32Tensor> t;
  const int64_t H = a.n_kv_heads, hd = a.head_dim;
  for (int l = 0; l < int(a.layers.size()); ++l) {
    const CalibLayer& L = a.layers[l];
    if (a.method == "kvquant") {
      t[layer_key(l, "k_lower")] = {{H, hd}, L.k_lower};
      t[layer_key(l, "k_upper")] = {{H, hd}, L.k_upper};
      t[layer_key(l, "k_codebook")] = {{int64_t(L.k_codebook.size())}, L.k_codebook};
      t[layer_key(l, "v_codebook")] = {{int64_t(L.v_codebook.size())}, L.v_codebook};
    } else {
      std::vector<float> ch(L.k_fp16_channels.begin(), L.k_fp16_channels.end());
      t[layer_key(l, "k_fp16_channels")] = {{int64_t(ch.size())}, ch};
      t[layer_key(l, "k_channel_scores")] = {{H, hd}, L.k_channel_scores};
    }
  }
  write_safetensors_f32(path, t, md);
}

CalibArtifact load_calib_artifact(const std::string& path) {
  std::unique_ptr<SafetensorsFile> fp;
  try {
    fp = std::make_unique<SafetensorsFile>(path);
  } catch (const Error& e) {
    fail("--calib {}: not a calibration artifact ({})", path, e.what());
  }
  return parse_calib_artifact(*fp);
}

CalibArtifact parse_calib_artifact(const SafetensorsFile& f) {
  const std::string& path = f.path();
  const auto& md = f.metadata();
  auto get = [&](const std::string& k) -> const std::string& {
    auto it = md.find(k);
    if (it == md.end())
      fail(
          "{}: not a dllmq calibration artifact: metadata field '{}' is missing (make one with "
          "`dllmq calibrate`)",
          path, k);
    return it->second;
  };
  if (get("format") != kFormat)
    fail("{}: metadata 'format' is '{}', expected '{}'", path, get("format"), kFormat);
  if (get("version") != kVersion)
    fail("{}: artifact version '{}', this dllmq reads version {}", path, get("version"), kVersion);
  CalibArtifact a;
  a.method = get("method");
  if (a.method != "kvquant" && a.method != "dllm-kvq")
    fail("{}: metadata 'method' is '{}', expected kvquant or dllm-kvq", path, a.method);
  a.trajectory = get("trajectory");
  a.fisher = get("fisher");
  a.bits_k = to_int(path, "kv_bits_k", get("kv_bits_k"), 2, 8);
  a.bits_v = to_int(path, "kv_bits_v", get("kv_bits_v"), 2, 8);
  // The stores pack 2, 3, 4 or 8 bits (quant/uniform.h); 5-7 would reach them unsupported.
  for (const int b : {a.bits_k, a.bits_v})
    if (b != 2 && b != 3 && b != 4 && b != 8)
      fail("{}: metadata kv_bits_k / kv_bits_v = {}: expected 2, 3, 4 or 8", path, b);
  try {
    a.outlier_percent = std::stod(get("outlier_percent"));
  } catch (...) {
    a.outlier_percent = -1;
  }
  if (!(a.outlier_percent >= 0.0 && a.outlier_percent < 100.0))
    fail("{}: metadata 'outlier_percent' = '{}': expected a number in [0, 100)", path,
         get("outlier_percent"));
  a.sink = to_int(path, "sink", get("sink"), 0, 1 << 20);
  a.model_fingerprint = get("model_fingerprint");
  a.n_layers = to_int(path, "n_layers", get("n_layers"), 1, 1 << 16);
  a.n_kv_heads = to_int(path, "n_kv_heads", get("n_kv_heads"), 1, 1 << 16);
  a.head_dim = to_int(path, "head_dim", get("head_dim"), 2, 1 << 16);
  a.n_pairs = to_int(path, "n_pairs", get("n_pairs"), 0, 1 << 30);
  a.n_tokens = to_int(path, "n_tokens", get("n_tokens"), 0, INT64_MAX);
  a.data_hash = get("data_hash");
  static const char* kKnown[] = {
      "format",    "version",         "method",   "trajectory",        "fisher",    "kv_bits_k",
      "kv_bits_v", "outlier_percent", "sink",     "model_fingerprint", "n_layers",  "n_kv_heads",
      "head_dim",  "n_pairs",         "n_tokens", "data_hash",         "created_by"};
  for (const auto& [k, v] : md)
    if (std::find(std::begin(kKnown), std::end(kKnown), k) == std::end(kKnown)) a.extra[k] = v;
  const size_t kvd = size_t(a.n_kv_heads) * a.head_dim;
  auto tensor = [&](int l, const char* what, size_t want) {
    const std::string key = layer_key(l, what);
    auto it = f.tensors().find(key);
    if (it == f.tensors().end()) fail("{}: tensor '{}' is missing", path, key);
    const TensorView& t = it->second;
    if (t.dtype != DType::kF32) fail("{}: tensor '{}' must be F32", path, key);
    if (want != size_t(-1) && size_t(t.numel()) != want)
      fail("{}: tensor '{}' has {} values, expected {}", path, key, t.numel(), want);
    // memcpy: safetensors offsets need not be 4-byte aligned.
    std::vector<float> v(size_t(t.numel()));
    if (!v.empty()) std::memcpy(v.data(), t.data, v.size() * sizeof(float));
    for (float x : v)
      if (!std::isfinite(x)) fail("{}: tensor '{}' holds a non-finite value", path, key);
    return v;
  };
  a.layers.resize(a.n_layers);
  for (int l = 0; l < a.n_layers; ++l) {
    CalibLayer& L = a.layers[l];
    if (a.method == "kvquant") {
      L.k_lower = tensor(l, "k_lower", kvd);
      L.k_upper = tensor(l, "k_upper", kvd);
      for (size_t i = 0; i < kvd; ++i)
        if (L.k_lower[i] > L.k_upper[i])
          fail("{}: layer {}: k_lower > k_upper at channel {}", path, l, i);
      L.k_codebook = tensor(l, "k_codebook", size_t(1) << a.bits_k);
      L.v_codebook = tensor(l, "v_codebook", size_t(1) << a.bits_v);
    } else {
      L.k_channel_scores = tensor(l, "k_channel_scores", kvd);
      for (float c : tensor(l, "k_fp16_channels", size_t(-1))) {
        if (c < 0 || c >= float(kvd) || c != std::floor(c))
          fail("{}: layer {}: fp16 channel {} outside [0, {})", path, l, c, kvd);
        L.k_fp16_channels.push_back(int(c));
      }
    }
  }
  return a;
}

void check_calib_matches(const CalibArtifact& a, const std::string& path,
                         const std::string& model_fingerprint, int n_layers, int n_kv_heads,
                         int head_dim) {
  if (a.n_layers != n_layers || a.n_kv_heads != n_kv_heads || a.head_dim != head_dim)
    fail("--calib {}: made for {} layers x {} KV heads x head dim {}, the model has {} x {} x {}",
         path, a.n_layers, a.n_kv_heads, a.head_dim, n_layers, n_kv_heads, head_dim);
  if (a.model_fingerprint != model_fingerprint)
    fail(
        "--calib {}: made for another model (fingerprint {}, this model {}); calibrate this "
        "model with `dllmq calibrate`",
        path, a.model_fingerprint, model_fingerprint);
}

}  // namespace dllmq
