// What --kv and its companion flags ask for, validated, and the store they build.
#pragma once

#include <memory>
#include <string>

#include "cache/kv_store.h"
#include "ops/rope.h"

namespace dllmq {

inline constexpr int kKiviDefaultBits = 2;  // KIVI's own default (KIVI-2, group 32)

struct KvSpec {
  std::string method = "fp32";  // fp32 | fp16 | bf16 | kivi | kvquant | dllm-kvq
  int bits_k = 0;  // 0: the method's default (KIVI/dLLM-KVQ 2, KVQuant: the artifact's)
  int bits_v = 0;
  int group = 32;        // KIVI/dLLM-KVQ group size G
  std::string calib;     // calibration artifact (kvquant: required; dllm-kvq: channels)
  std::string channels;  // dllm-kvq: explicit fp16 K channels "layer:head:channel,..."
  // dllm-kvq: the codec of the other K channels and of V (METHODS.md §4): kivi (uniform groups,
  // post-RoPE K) or kvquant (the NUQ codebooks and thresholds of the KVQuant artifact in
  // base_calib, pre-RoPE K).
  std::string base = "kivi";
  std::string base_calib;
  bool quantized() const { return method == "kivi" || method == "kvquant" || method == "dllm-kvq"; }
};

// Checks spellings and ranges, naming the flag (--kv, --kv-bits, --kv-group, --calib,
// --kv-channels, --kv-base, --kv-base-calib); needs no model.
void validate_kv_spec(const KvSpec& s);

// Short description for the run header: "fp32", "kivi k2 v2 g32", "kvquant (calib X)".
std::string describe_kv(const KvSpec& s);

// Builds the store; loads and checks the calibration artifact against the model fingerprint.
std::unique_ptr<KvStore> make_kv_store(const KvSpec& s, KvGeometry geo, const RopeTable& rope,
                                       const std::string& model_fingerprint);

}  // namespace dllmq
