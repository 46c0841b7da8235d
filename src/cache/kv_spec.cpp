#include "cache/kv_spec.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include <fmt/format.h>

#include "cache/dense_kv_store.h"
#include "cache/kivi_kv_store.h"
#include "cache/kvquant_kv_store.h"
#include "io/calib_artifact.h"
#include "quant/bitpack.h"
#include "quant/uniform.h"
#include "util/error.h"

namespace dllmq {

namespace {

constexpr int kDefaultBits = 2;  // KIVI's own default (KIVI-2, group 32)

void check_bits(const char* flag, int b) {
  if (b != 0 && !valid_quant_bits(b)) fail("{} {}: accepted values are 2, 3, 4 and 8", flag, b);
}

// "layer:head:channel,..." -> [layer][head] channel lists.
std::vector<std::vector<std::vector<int>>> parse_channels(const std::string& spec, KvGeometry geo) {
  std::vector<std::vector<std::vector<int>>> out(geo.n_layers,
                                                 std::vector<std::vector<int>>(geo.n_kv_heads));
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    // from_chars, not sscanf("%d"): an out-of-range number is an error, not undefined behaviour.
    int v[3] = {-1, -1, -1};
    const char* p = item.data();
    const char* end = p + item.size();
    bool ok = true;
    for (int k = 0; k < 3 && ok; ++k) {
      const auto r = std::from_chars(p, end, v[k]);
      ok = r.ec == std::errc() && (k < 2 ? r.ptr < end && *r.ptr == ':' : r.ptr == end);
      p = r.ptr + 1;
    }
    if (!ok) fail("--kv-channels: '{}' is not layer:head:channel", item);
    const int l = v[0], h = v[1], c = v[2];
    if (l < 0 || l >= geo.n_layers || h < 0 || h >= geo.n_kv_heads || c < 0 || c >= geo.head_dim)
      fail("--kv-channels: '{}' outside layers [0, {}), KV heads [0, {}), channels [0, {})", item,
           geo.n_layers, geo.n_kv_heads, geo.head_dim);
    out[l][h].push_back(c);
  }
  return out;
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
}

std::string describe_kv(const KvSpec& s) {
  if (!s.quantized()) return s.method;
  std::string d = s.method;
  if (s.bits_k || s.bits_v || s.method != "kvquant")
    d += fmt::format(" k{} v{}", s.bits_k ? s.bits_k : kDefaultBits,
                     s.bits_v ? s.bits_v : kDefaultBits);
  if (s.method != "kvquant") d += fmt::format(" g{}", s.group);
  if (!s.calib.empty()) d += fmt::format(" calib {}", s.calib);
  return d;
}

std::unique_ptr<KvStore> make_kv_store(const KvSpec& s, KvGeometry geo, const RopeTable& rope,
                                       const std::string& model_fingerprint) {
  validate_kv_spec(s);
  if (s.method == "fp32") return std::make_unique<DenseKvStore>(geo, DType::kF32, rope);
  if (s.method == "fp16") return std::make_unique<DenseKvStore>(geo, DType::kF16, rope);
  if (s.method == "bf16") return std::make_unique<DenseKvStore>(geo, DType::kBF16, rope);
  // Resolve the dequantization ISA here, outside any parallel region: a bad DLLMQ_QUANT_ISA is an
  // error a user must see, not an exception escaping an OpenMP worker.
  (void)quant_isa();
  CalibArtifact art;
  if (!s.calib.empty()) {
    art = load_calib_artifact(s.calib);
    check_calib_matches(art, s.calib, model_fingerprint, geo.n_layers, geo.n_kv_heads,
                        geo.head_dim);
    if (art.method != s.method)
      fail("--calib {}: a {} artifact, but --kv {} was asked for", s.calib, art.method, s.method);
  }
  if (s.method == "kvquant") {
    if ((s.bits_k && s.bits_k != art.bits_k) || (s.bits_v && s.bits_v != art.bits_v))
      fail("--kv-bits: --calib {} was calibrated for K {} / V {} bits, {} / {} asked", s.calib,
           art.bits_k, art.bits_v, s.bits_k ? s.bits_k : art.bits_k,
           s.bits_v ? s.bits_v : art.bits_v);
    return std::make_unique<KvQuantKvStore>(geo, art, rope);
  }
  KiviConfig kc;
  kc.bits_k = s.bits_k ? s.bits_k : kDefaultBits;
  kc.bits_v = s.bits_v ? s.bits_v : kDefaultBits;
  kc.group = s.group;
  if (s.method == "dllm-kvq") {
    if (!s.channels.empty()) {
      kc.fp16_channels = parse_channels(s.channels, geo);
    } else {
      if ((s.bits_k && s.bits_k != art.bits_k) || (s.bits_v && s.bits_v != art.bits_v))
        fail("--kv-bits: --calib {} was made for K {} / V {} bits", s.calib, art.bits_k,
             art.bits_v);
      kc.bits_k = art.bits_k;
      kc.bits_v = art.bits_v;
      // The channels were chosen for the artifact's KIVI group; it travels with them.
      if (auto it = art.extra.find("kv_group"); it != art.extra.end()) {
        kc.group = std::atoi(it->second.c_str());
        if (kc.group < 1 || kc.group > 4096)
          fail("--calib {}: metadata kv_group '{}' outside 1..4096", s.calib, it->second);
      }
      kc.fp16_channels.assign(geo.n_layers, std::vector<std::vector<int>>(geo.n_kv_heads));
      for (int l = 0; l < geo.n_layers; ++l)
        for (int flat : art.layers[l].k_fp16_channels)
          kc.fp16_channels[l][flat / geo.head_dim].push_back(flat % geo.head_dim);
    }
  }
  return std::make_unique<KiviKvStore>(geo, std::move(kc), rope);
}

}  // namespace dllmq
