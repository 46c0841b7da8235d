// Cache-reuse error tracing: at every cached step, also run the full recompute and write, per
// layer, the relative L2 error of the reused K and V rows (as held in the store) and of the
// attention output of the step's query rows. This is the error that exists before any
// quantization (METHODS.md §0). One JSON object per (forward, layer) line; `step` counts the
// reveal steps completed before that forward, `nfe` numbers the forward. The file appears at
// close() (written to a temporary, fsynced and renamed: util/atomic_file.h).
#pragma once

#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cache/kv_store.h"
#include "model/model.h"
#include "util/atomic_file.h"

namespace dllmq {

class CacheTracer {
 public:
  CacheTracer(const std::string& path, const ModelConfig& cfg);
  ~CacheTracer();
  CacheTracer(const CacheTracer&) = delete;
  CacheTracer& operator=(const CacheTracer&) = delete;

  // Observer for the cached forward: records its attention outputs per layer.
  LayerObserver* cached_observer() { return &cached_; }

  // Runs the full recompute over `canvas` and writes the errors of this step.
  void finish_step(Model& m, std::span<const int32_t> canvas, const KvStore& store,
                   const std::vector<PosRange>& cached, int q0, int q1, int block, int step,
                   int nfe);
  // Publishes the trace at its path (throws naming it); without it the trace is discarded.
  void close();

 private:
  struct CachedAttn final : LayerObserver {
    std::vector<std::vector<float>> attn;  // per layer [nq, n_heads*hd]
    void on_layer(int layer, int pos0, int n, const float*, const float*, const float* a) override;
    int qd = 0;
  };
  std::string path_;
  std::unique_ptr<AtomicFile> file_;
  std::FILE* out_ = nullptr;
  CachedAttn cached_;
};

}  // namespace dllmq
