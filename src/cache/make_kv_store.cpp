// Builds the KV store a KvSpec names (validated first), loading and checking its calibration
// artifact against the model.
#include <charconv>
#include <cstdlib>
#include <sstream>

#include "cache/dense_kv_store.h"
#include "cache/fp16_channels.h"
#include "cache/kivi_kv_store.h"
#include "cache/kv_spec.h"
#include "cache/kvquant_kv_store.h"
#include "io/calib_artifact.h"
#include "quant/bitpack.h"
#include "util/error.h"

namespace dllmq {

namespace {

// "layer:head:channel,..." -> [layer][head] channel lists.
Fp16Channels parse_channels(const std::string& spec, KvGeometry geo) {
  Fp16Channels out(geo.n_layers, std::vector<std::vector<int>>(geo.n_kv_heads));
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

// The dLLM-KVQ channels of a dllm-kvq artifact, [layer][head].
Fp16Channels artifact_channels(const CalibArtifact& art, KvGeometry geo) {
  Fp16Channels ch(geo.n_layers, std::vector<std::vector<int>>(geo.n_kv_heads));
  for (int l = 0; l < geo.n_layers; ++l)
    for (int flat : art.layers[l].k_fp16_channels)
      ch[l][flat / geo.head_dim].push_back(flat % geo.head_dim);
  return ch;
}

// The base codec the artifact's channels were scored with (artifacts made before --kv-base
// carry none: kivi).
std::string artifact_base(const CalibArtifact& art) {
  const auto it = art.extra.find("kv_base");
  return it == art.extra.end() ? "kivi" : it->second;
}

CalibArtifact load_checked(const std::string& path, const char* flag, const std::string& want,
                           KvGeometry geo, const std::string& model_fingerprint) {
  CalibArtifact art = load_calib_artifact(path);
  check_calib_matches(art, path, model_fingerprint, geo.n_layers, geo.n_kv_heads, geo.head_dim);
  if (art.method != want)
    fail("{} {}: a {} artifact, where a {} artifact is needed", flag, path, art.method, want);
  return art;
}

}  // namespace

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
    art = load_checked(s.calib, "--calib", s.method, geo, model_fingerprint);
    if (s.method == "dllm-kvq" && artifact_base(art) != s.base)
      fail("--calib {}: its channels were scored on the {} base, but --kv-base {} was asked for",
           s.calib, artifact_base(art), s.base);
  }
  if (s.method == "kvquant") {
    if ((s.bits_k && s.bits_k != art.bits_k) || (s.bits_v && s.bits_v != art.bits_v))
      fail("--kv-bits: --calib {} was calibrated for K {} / V {} bits, {} / {} asked", s.calib,
           art.bits_k, art.bits_v, s.bits_k ? s.bits_k : art.bits_k,
           s.bits_v ? s.bits_v : art.bits_v);
    return std::make_unique<KvQuantKvStore>(geo, art, rope);
  }
  if (s.method == "dllm-kvq" && s.base == "kvquant") {
    const CalibArtifact codec =
        load_checked(s.base_calib, "--kv-base-calib", "kvquant", geo, model_fingerprint);
    if ((s.bits_k && s.bits_k != codec.bits_k) || (s.bits_v && s.bits_v != codec.bits_v))
      fail("--kv-bits: --kv-base-calib {} was calibrated for K {} / V {} bits, {} / {} asked",
           s.base_calib, codec.bits_k, codec.bits_v, s.bits_k ? s.bits_k : codec.bits_k,
           s.bits_v ? s.bits_v : codec.bits_v);
    if (!s.calib.empty() && (art.bits_k != codec.bits_k || art.bits_v != codec.bits_v))
      fail("--calib {} chose its channels for K {} / V {} bits, --kv-base-calib {} codes {} / {}",
           s.calib, art.bits_k, art.bits_v, s.base_calib, codec.bits_k, codec.bits_v);
    Fp16Channels ch =
        s.channels.empty() ? artifact_channels(art, geo) : parse_channels(s.channels, geo);
    return std::make_unique<KvQuantKvStore>(geo, codec, rope, std::move(ch));
  }
  KiviConfig kc;
  kc.bits_k = s.bits_k ? s.bits_k : kKiviDefaultBits;
  kc.bits_v = s.bits_v ? s.bits_v : kKiviDefaultBits;
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
      kc.fp16_channels = artifact_channels(art, geo);
    }
  }
  return std::make_unique<KiviKvStore>(geo, std::move(kc), rope);
}

}  // namespace dllmq
