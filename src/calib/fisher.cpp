#include "calib/fisher.h"

#include <algorithm>
#include <random>

#include "util/error.h"

namespace dllmq {

std::vector<LossTerm> diffusion_loss_terms(const ModelConfig& cfg, const ForwardArgs& f,
                                           std::span<const int32_t> canvas, int P,
                                           std::span<const int32_t> target) {
  const int N = int(canvas.size()), n = int(f.ids.size());
  int masked = 0;
  for (int p = P; p < N; ++p) masked += canvas[p] == cfg.mask_id;
  std::vector<LossTerm> terms;
  if (masked == 0) return terms;
  for (int p = P; p < N; ++p) {
    if (canvas[p] != cfg.mask_id) continue;
    const int row = p - cfg.logits_shift;  // the raw row predicting p
    if (row < f.pos0 || row >= f.pos0 + n) continue;
    terms.push_back({row, target[p - P], 1.0 / masked});
  }
  return terms;
}

std::vector<int32_t> masked_copy(std::span<const int32_t> prompt, std::span<const int32_t> target,
                                 int32_t mask_id, uint64_t seed) {
  if (target.empty()) fail("calibrate: a pair with an empty answer has no masked-diffusion loss");
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  const double t = 1.0 - u01(rng);  // (0, 1]
  std::vector<int32_t> ids(prompt.begin(), prompt.end());
  bool any = false;
  for (int32_t tok : target) {
    const bool m = u01(rng) < t;
    ids.push_back(m ? mask_id : tok);
    any |= m;
  }
  if (!any) ids[prompt.size() + rng() % target.size()] = mask_id;
  return ids;
}

void square_into(const float* g, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = g[i] * g[i];
}

void PositionFisher::compute(const Model& m, std::span<const int32_t> prompt,
                             std::span<const int32_t> target, uint64_t seed,
                             const KvGradSink& also) {
  const ModelConfig& cfg = m.config();
  ids_ = masked_copy(prompt, target, cfg.mask_id, seed);
  const int N = int(ids_.size()), P = int(prompt.size());
  ForwardArgs f;
  f.ids = ids_;
  terms_ = diffusion_loss_terms(cfg, f, ids_, P, target);
  if (terms_.empty())
    fail(
        "calibrate: the masked copy has no position the model can predict (Dream's shift needs "
        "a non-empty prompt)");
  loss_ = kv_loss_gradient(m, f, terms_, [&](const LayerKvGrad& g) {
    auto& k2 = k2_[g.layer];
    auto& v2 = v2_[g.layer];
    k2.resize(size_t(N) * kvd_);
    v2.resize(size_t(N) * kvd_);
    square_into(g.gk, size_t(N) * kvd_, k2.data());
    square_into(g.gv, size_t(N) * kvd_, v2.data());
    if (also) also(g);
  });
}

}  // namespace dllmq
