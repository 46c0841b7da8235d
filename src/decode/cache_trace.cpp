#include "decode/cache_trace.h"

#include <cerrno>
#include <cmath>
#include <cstring>

#include <fmt/core.h>

#include "util/error.h"

namespace dllmq {

namespace {

struct ErrAcc {
  double diff = 0.0, ref = 0.0;
  void add(float got, float want) {
    diff += double(got - want) * double(got - want);
    ref += double(want) * want;
  }
  double rel() const { return ref > 0 ? std::sqrt(diff / ref) : 0.0; }
};

// Compares the store and the cached attention against the recompute, layer by layer.
class RecomputeObserver final : public LayerObserver {
 public:
  RecomputeObserver(const KvStore& store, const std::vector<PosRange>& cached,
                    const std::vector<std::vector<float>>& attn, int q0, int q1,
                    const ModelConfig& cfg, std::FILE* out, int block, int step, int nfe)
      : store_(store),
        cached_(cached),
        attn_(attn),
        q0_(q0),
        q1_(q1),
        cfg_(cfg),
        out_(out),
        block_(block),
        step_(step),
        nfe_(nfe) {}

  void on_layer(int layer, int pos0, int n, const float* k_rot, const float* v,
                const float* a) override {
    const int hd = cfg_.head_dim, kvd = cfg_.kv_dim(), qd = cfg_.n_heads * hd;
    ErrAcc ek, ev, ea;
    size_t rows = 0;
    std::vector<float> ks, vs;
    for (const PosRange& r : cached_) {
      if (r.empty()) continue;
      rows += r.size();
      ks.resize(size_t(r.size()) * hd);
      vs.resize(size_t(r.size()) * hd);
      for (int g = 0; g < cfg_.n_kv_heads; ++g) {
        const KvRows got = store_.read(layer, g, r.begin, r.size(), ks.data(), vs.data());
        for (int i = 0; i < r.size(); ++i)
          for (int t = 0; t < hd; ++t) {
            const size_t want = size_t(r.begin + i - pos0) * kvd + size_t(g) * hd + t;
            ek.add(got.k[size_t(i) * got.ld + t], k_rot[want]);
            ev.add(got.v[size_t(i) * got.ld + t], v[want]);
          }
      }
    }
    const auto& mine = attn_[layer];
    for (int p = q0_; p < q1_; ++p)
      for (int t = 0; t < qd; ++t)
        ea.add(mine[size_t(p - q0_) * qd + t], a[size_t(p - pos0) * qd + t]);
    fmt::print(out_,
               "{{\"nfe\": {}, \"step\": {}, \"block\": {}, \"layer\": {}, \"cached_rows\": {}, "
               "\"query_rows\": {}, "
               "\"k_rel_err\": {:.6e}, \"v_rel_err\": {:.6e}, \"attn_rel_err\": {:.6e}}}\n",
               nfe_, step_, block_, layer, rows, q1_ - q0_, ek.rel(), ev.rel(), ea.rel());
  }

 private:
  const KvStore& store_;
  const std::vector<PosRange>& cached_;
  const std::vector<std::vector<float>>& attn_;
  int q0_, q1_;
  const ModelConfig& cfg_;
  std::FILE* out_;
  int block_, step_, nfe_;
};

}  // namespace

CacheTracer::CacheTracer(const std::string& path, const ModelConfig& cfg)
    : path_(path), file_(std::make_unique<AtomicFile>(path)), out_(file_->stream()) {
  cached_.attn.resize(cfg.n_layers);
  cached_.qd = cfg.n_heads * cfg.head_dim;
}

CacheTracer::~CacheTracer() = default;  // without close() the temporary is removed

void CacheTracer::close() {
  if (!out_) return;
  out_ = nullptr;
  try {
    file_->commit();
  } catch (const Error& e) {
    fail("--trace-cache {}", e.what());
  }
}

void CacheTracer::CachedAttn::on_layer(int layer, int, int n, const float*, const float*,
                                       const float* a) {
  attn[layer].assign(a, a + size_t(n) * qd);
}

void CacheTracer::finish_step(Model& m, std::span<const int32_t> canvas, const KvStore& store,
                              const std::vector<PosRange>& cached, int q0, int q1, int block,
                              int step, int nfe) {
  RecomputeObserver obs(store, cached, cached_.attn, q0, q1, m.config(), out_, block, step, nfe);
  ForwardArgs f;
  f.ids = canvas;
  f.observer = &obs;
  m.forward(f, nullptr);  // no logits: only the per-layer tensors are compared
}

}  // namespace dllmq
