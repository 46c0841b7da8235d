// Diffusion decoding: the block driver with its transfer schedule, unmask policy and cache
// policy (ARCHITECTURE.md "the four decode parts"), plus Dream's own whole-canvas sampler.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/kv_spec.h"
#include "cache/kv_store.h"
#include "decode/teacher.h"
#include "model/model.h"

namespace dllmq {

enum class CacheMode { kNone, kPrefix, kDual };
// Ranking of masked positions: LLaDA's low_confidence/random, Dream's maskgit_plus (= max prob),
// topk_margin, entropy, origin.
enum class RankAlg { kLowConfidence, kRandom, kMaskgitPlus, kTopkMargin, kEntropy, kOrigin };

CacheMode parse_cache_mode(const std::string& s);  // throws naming --cache
RankAlg parse_rank_alg(const std::string& s);      // throws naming --alg
const char* cache_mode_name(CacheMode m);
const char* rank_alg_name(RankAlg a);

struct GenerateOptions {
  int gen_length = 256;
  int block_length = 32;
  int steps = 256;                  // total over all blocks, as in the reference functions
  std::optional<double> threshold;  // Fast-dLLM confidence threshold tau
  std::optional<double> factor;     // Fast-dLLM factor f
  CacheMode cache = CacheMode::kNone;
  std::optional<RankAlg> alg;  // default: low_confidence (LLaDA), entropy (Dream)
  double temperature = 0.0;
  double top_p = 1.0;  // Dream sampling filters
  int top_k = 0;
  double alg_temp = 0.0;   // Dream: softmax temperature over confidences when choosing
  double eps = 1e-3;       // Dream timestep schedule end
  double cfg_scale = 0.0;  // LLaDA classifier-free guidance
  bool logits_eos_inf = false;
  bool confidence_eos_eot_inf = false;
  bool early_stop = false;  // stop when every remaining block would be EOS (off: parity)
  uint64_t seed = 0;
  KvSpec kv;                // KV store (default fp32: the compute precision, exact)
  int eot_id = -1;          // end-of-turn id when config.json has none (from the tokenizer)
  std::string trace_cache;  // JSONL path: per step and layer, error of reused K/V vs recompute
  // Calibration hooks (TRACE): reveal reference tokens, see every forward's per-layer tensors,
  // probe each forward after it ran. Null / empty for ordinary decoding.
  std::optional<TeacherForcing> teacher;
  LayerObserver* observer = nullptr;
  class StepProbe* probe = nullptr;
  // Runs the decoder's forwards instead of Model::forward (batched decoding, decode/batch.h).
  ForwardRunner* runner = nullptr;
};

// Sees every forward the decoder runs, after it ran, with its arguments and raw logits rows
// (args.logits); calibration re-runs variants of it (e.g. one layer's cache quantized).
class StepProbe {
 public:
  virtual ~StepProbe() = default;
  virtual void after_forward(Model& m, const ForwardArgs& args, const float* logits) = 0;
};

// What the per-step callback sees (ARCHITECTURE.md: tests, --show-steps, tracing hang on it).
struct StepInfo {
  std::span<const int32_t> canvas;    // [prompt | generated], MASK where not yet revealed
  std::span<const int32_t> revealed;  // canvas positions revealed at this step
  int block = 0;                      // block index (0 for whole-canvas samplers)
  int step = 0;                       // step index over the whole run
  int prompt_length = 0;
  const KvStore* store = nullptr;  // null for --cache none
};
using StepCallback = std::function<void(const StepInfo&)>;

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids, length gen_length
  int nfe = 0;                  // model forwards actually run (refresh forwards included)
  int steps = 0;                // reveal steps
  double time_s = 0.0;
  size_t kv_bytes = 0;    // peak bytes held by the KV store (K + V, everything counted)
  size_t kv_bytes_k = 0;  // K and V parts of kv_bytes
  size_t kv_bytes_v = 0;
  size_t kv_bytes_fp16 = 0;          // the rows held at that peak, at fp16
  std::string kv_store;              // store name with parameters
  int kv_bits_k = 0, kv_bits_v = 0;  // nominal bits per code (0 uncached)
  std::string kv_method;  // fp32 | fp16 | bf16 | kivi | kvquant | dllm-kvq ("none" uncached)
  // Effective bits per cached K / V element (8 * bytes / elements), 0 when nothing was cached.
  double kv_bits_effective_k() const {
    return kv_bytes_fp16 ? 8.0 * double(kv_bytes_k) / (double(kv_bytes_fp16) / 4.0) : 0.0;
  }
  double kv_bits_effective_v() const {
    return kv_bytes_fp16 ? 8.0 * double(kv_bytes_v) / (double(kv_bytes_fp16) / 4.0) : 0.0;
  }
  double flops = 0.0;  // model FLOPs of the forwards run
};

// The rules generate() enforces before decoding (lengths, blocks and steps, schedule, ranking,
// prompt ids), each error naming the flag and what is accepted. The server checks requests with
// it before accepting them.
void check_generate_options(const GenerateOptions& opt, const ModelConfig& cfg,
                            std::span<const int32_t> prompt);

GenerateResult generate(Model& model, std::span<const int32_t> prompt, const GenerateOptions& opt,
                        const StepCallback& on_step = nullptr);

}  // namespace dllmq
