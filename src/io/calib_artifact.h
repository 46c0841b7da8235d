// Calibration artifact: one self-describing safetensors file (f32 tensors + string metadata)
// holding what a calibrated KV store needs (ARCHITECTURE.md "Files and formats"):
//   metadata: format "dllmq-calib", version, method (kvquant | dllm-kvq), kv_bits_k, kv_bits_v,
//             trajectory (ar | trace | random), fisher ("none" = unweighted codebooks),
//             outlier_percent, sink, model_fingerprint, n_layers, n_kv_heads, head_dim,
//             n_pairs, n_tokens, data_hash, created_by
//   tensors:  kvquant: layers.{l}.k_lower, layers.{l}.k_upper  [n_kv_heads, head_dim] pre-RoPE
//             K per-channel outlier thresholds; layers.{l}.k_codebook [2^bits_k],
//             layers.{l}.v_codebook [2^bits_v] (ascending, normalised to about [-1, 1]);
//             dllm-kvq: layers.{l}.k_fp16_channels [n] (kv_head * head_dim + channel, as f32),
//             layers.{l}.k_channel_scores [n_kv_heads, head_dim]; metadata kv_group, budget,
//             per-layer KL / changed decisions / channel counts.
// Loading checks every field; a mismatch with the model or the requested bits is an error
// naming the file.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dllmq {

struct CalibLayer {
  std::vector<float> k_lower, k_upper;        // [n_kv_heads * head_dim]
  std::vector<float> k_codebook, v_codebook;  // [2^bits]
  std::vector<int> k_fp16_channels;           // flattened kv_head * head_dim + channel
  std::vector<float> k_channel_scores;        // dllm-kvq: attention-level score per channel
};

struct CalibArtifact {
  std::string method = "kvquant";
  std::string trajectory = "ar";
  std::string fisher = "none";
  int bits_k = 0, bits_v = 0;
  double outlier_percent = 1.0;  // percentiles outlier_percent/2 and 100 - outlier_percent/2
  int sink = 1;                  // leading canvas positions kept at fp16
  std::string model_fingerprint;
  int n_layers = 0, n_kv_heads = 0, head_dim = 0;
  int64_t n_pairs = 0, n_tokens = 0;
  std::string data_hash;
  std::map<std::string, std::string> extra;  // further metadata, written as given
  std::vector<CalibLayer> layers;
};

void save_calib_artifact(const CalibArtifact& a, const std::string& path);
CalibArtifact load_calib_artifact(const std::string& path);
// The checks of load_calib_artifact on a file already parsed (fuzzing, tests).
class SafetensorsFile;
CalibArtifact parse_calib_artifact(const SafetensorsFile& f);

// Throws naming `path` when the artifact was made for another model or geometry.
void check_calib_matches(const CalibArtifact& a, const std::string& path,
                         const std::string& model_fingerprint, int n_layers, int n_kv_heads,
                         int head_dim);

}  // namespace dllmq
