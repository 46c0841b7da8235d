// The KV store flags' rules and description; the stores themselves are built in
// make_kv_store.cpp (so option checking links no store).
#include "cache/kv_spec.h"

#include <fmt/format.h>

#include "quant/uniform.h"
#include "util/error.h"

namespace dllmq {

namespace {

void check_bits(const char* flag, int b) {
  if (b != 0 && !valid_quant_bits(b)) fail("{} {}: accepted values are 2, 3, 4 and 8", flag, b);
}

}  // namespace

void validate_kv_spec(const KvSpec& s) {
  static const char* kMethods[] = {"fp32", "fp16", "bf16", "kivi", "kvquant", "dllm-kvq"};
  bool known = false;
  for (const char* m : kMethods) known |= s.method == m;
  if (!known)
    fail("--kv: unknown KV store '{}' (expected fp32, fp16, bf16, kivi, kvquant or dllm-kvq)",
         s.method);
  check_bits("--kv-bits-k", s.bits_k);
  check_bits("--kv-bits-v", s.bits_v);
  if (!s.quantized() && (s.bits_k || s.bits_v))
    fail("--kv-bits: the {} store is not quantized; use --kv kivi, kvquant or dllm-kvq", s.method);
  if (s.group < 1 || s.group > 4096) fail("--kv-group {}: accepted range is 1..4096", s.group);
  if (s.method == "kvquant" && s.calib.empty())
    fail("--kv kvquant needs --calib FILE (make one with `dllmq calibrate --method kvquant`)");
  if (s.method == "dllm-kvq" && s.calib.empty() && s.channels.empty())
    fail(
        "--kv dllm-kvq needs its fp16 K channels: --calib FILE (a dllm-kvq artifact) or "
        "--kv-channels layer:head:channel,...");
  if (s.method == "dllm-kvq" && !s.calib.empty() && !s.channels.empty())
    fail("--kv-channels and --calib both give dllm-kvq channels; give one");
  if (!s.channels.empty() && s.method != "dllm-kvq")
    fail("--kv-channels is for --kv dllm-kvq only");
  if (!s.calib.empty() && s.method != "kvquant" && s.method != "dllm-kvq")
    fail("--calib is for --kv kvquant or dllm-kvq, not {}", s.method);
  if (s.base != "kivi" && s.base != "kvquant")
    fail("--kv-base '{}': accepted values are kivi and kvquant", s.base);
  if (s.base != "kivi" && s.method != "dllm-kvq")
    fail("--kv-base {} is for --kv dllm-kvq only (its base codec)", s.base);
  if (s.base == "kvquant" && s.base_calib.empty())
    fail(
        "--kv-base kvquant needs --kv-base-calib FILE: the KVQuant artifact whose codebooks and "
        "thresholds code the other K channels and V (`dllmq calibrate --method kvquant`)");
  if (s.base != "kvquant" && !s.base_calib.empty())
    fail("--kv-base-calib is for --kv dllm-kvq --kv-base kvquant only");
}

std::string describe_kv(const KvSpec& s) {
  if (!s.quantized()) return s.method;
  std::string d = s.method;
  // KVQuant, and dLLM-KVQ channels from an artifact, take the artifact's bits (and dLLM-KVQ its
  // KIVI group) unless flags give them (cache/make_kv_store.cpp): no default to print then.
  const bool from_artifact =
      s.method == "kvquant" || (s.method == "dllm-kvq" && !s.calib.empty() && s.channels.empty());
  if (s.bits_k || s.bits_v || !from_artifact)
    d += fmt::format(" k{} v{}", s.bits_k ? s.bits_k : kKiviDefaultBits,
                     s.bits_v ? s.bits_v : kKiviDefaultBits);
  if (s.method == "dllm-kvq" && s.base == "kvquant")
    return fmt::format("dllm-kvq base kvquant (calib {}){}", s.base_calib,
                       s.calib.empty() ? "" : fmt::format(" channels {}", s.calib));
  if (!from_artifact) d += fmt::format(" g{}", s.group);
  if (!s.calib.empty()) d += fmt::format(" calib {}", s.calib);
  return d;
}

}  // namespace dllmq
