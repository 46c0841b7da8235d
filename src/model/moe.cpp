#include "model/moe.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "model/weights.h"
#include "ops/norm_act.h"
#include "util/error.h"

namespace dllmq {

namespace {

SwiGlu bind_swiglu(TensorBinder& b, const std::string& base, int hidden, int d) {
  return {b.lin(base + "gate_proj", hidden, d, false), b.lin(base + "up_proj", hidden, d, false),
          b.lin(base + "down_proj", d, hidden, false)};
}

size_t swiglu_params(const SwiGlu& m) {
  return size_t(3) * m.gate.out * m.gate.in;
}

// The experts a checkpoint holds for one layer: indices N of "<prefix>mlp.experts.N.*".
std::set<long> stored_experts(const Checkpoint& c, const std::string& prefix) {
  const std::string head = prefix + "mlp.experts.";
  std::set<long> ids;
  for (const auto& [name, t] : c.tensors()) {
    if (name.compare(0, head.size(), head) != 0) continue;
    const size_t dot = name.find('.', head.size());
    const std::string num =
        name.substr(head.size(), dot == std::string::npos ? dot : dot - head.size());
    char* end = nullptr;
    const long v = std::strtol(num.c_str(), &end, 10);
    if (!num.empty() && end && *end == '\0' && v >= 0) ids.insert(v);
  }
  return ids;
}

// torch.topk's comparator for largest = true: NaN first, then greater values.
bool topk_before(const std::pair<float, int64_t>& x, const std::pair<float, int64_t>& y) {
  return (std::isnan(x.first) && !std::isnan(y.first)) || x.first > y.first;
}

}  // namespace

std::shared_ptr<MoeFfn> bind_moe_ffn(TensorBinder& b, const ModelConfig& cfg, int layer,
                                     const std::string& prefix) {
  const MoeConfig& mc = cfg.moe;
  const int d = cfg.d_model;
  // A different number of experts than num_experts says: name the field, not just a tensor.
  const std::set<long> ids = stored_experts(b.checkpoint(), prefix);
  const long want = mc.n_experts;
  if (!ids.empty() && (long(ids.size()) != want || *ids.rbegin() != want - 1))
    fail("{}: layer {} holds {} experts (indices {}..{}) but config.json num_experts is {}",
         b.checkpoint().dir(), layer, ids.size(), *ids.begin(), *ids.rbegin(), want);
  const TensorView* router = b.checkpoint().find(prefix + "mlp.gate.weight");
  if (router != nullptr && router->shape.size() == 2 && router->shape[0] != want)
    fail(
        "{}: tensor '{}mlp.gate.weight' (the router) has {} rows but config.json num_experts is "
        "{}",
        router->file, prefix, router->shape[0], want);
  auto f = std::make_shared<MoeFfn>();
  f->router = b.lin(prefix + "mlp.gate", mc.n_experts, d, false);
  f->top_k = mc.top_k;
  for (int e = 0; e < mc.n_experts; ++e)
    f->experts.push_back(
        bind_swiglu(b, fmt::format("{}mlp.experts.{}.", prefix, e), mc.expert_hidden, d));
  if (mc.expert_bias) f->expert_bias = b.vec(prefix + "mlp.expert_bias", mc.n_experts);
  if (mc.shared_hidden > 0)
    f->shared.push_back(bind_swiglu(b, prefix + "shared_expert.", mc.shared_hidden, d));
  return f;
}

size_t moe_total_params(const MoeFfn& f) {
  size_t n = size_t(f.router.out) * f.router.in + f.expert_bias.size();
  for (const SwiGlu& e : f.experts) n += swiglu_params(e);
  for (const SwiGlu& s : f.shared) n += swiglu_params(s);
  return n;
}

size_t moe_active_params(const MoeFfn& f) {
  size_t n = size_t(f.router.out) * f.router.in + f.expert_bias.size();
  if (!f.experts.empty()) n += size_t(f.top_k) * swiglu_params(f.experts[0]);
  for (const SwiGlu& s : f.shared) n += swiglu_params(s);
  return n;
}

void route_row(const float* logits, int n_experts, const float* bias, int k, int32_t* experts,
               float* weights, std::vector<std::pair<float, int64_t>>& q) {
  // F.softmax(router_logits, dim=1, dtype=torch.float): max-subtracted exponentials over their
  // sum.
  float mx = logits[0];
  for (int e = 1; e < n_experts; ++e) mx = std::max(mx, logits[e]);
  q.resize(size_t(n_experts));
  float sum = 0.0f;
  for (int e = 0; e < n_experts; ++e) {
    const float v = std::exp(logits[e] - mx);
    q[size_t(e)] = {v, e};
    sum += v;
  }
  for (int e = 0; e < n_experts; ++e) {
    q[size_t(e)].first /= sum;
    if (bias != nullptr) q[size_t(e)].first += bias[e];
  }
  // torch.topk(largest=True, sorted=True) on CPU (ATen TopKImpl.h): the same library calls on
  // the same (value, index) array, so ties resolve as there. (CUDA's topk may resolve them
  // otherwise; the reference comparison runs on CPU.)
  if (int64_t(k) * 64 <= n_experts) {
    std::partial_sort(q.begin(), q.begin() + k, q.end(), topk_before);
  } else {
    std::nth_element(q.begin(), q.begin() + (k - 1), q.end(), topk_before);
    std::sort(q.begin(), q.begin() + (k - 1), topk_before);
  }
  for (int j = 0; j < k; ++j) {
    experts[j] = static_cast<int32_t>(q[size_t(j)].second);
    weights[j] = q[size_t(j)].first;
  }
}

const float* MoeRunner::forward(const MoeFfn& f, const float* h, int d,
                                std::span<const CanvasRows> canvases, ComputeDType dt) {
  const int E = f.n_experts(), k = f.top_k, C = static_cast<int>(canvases.size());
  const int H = f.experts[0].hidden();
  int rows = 0, assigned = 0;
  for (const CanvasRows& c : canvases) {
    rows = std::max(rows, c.row0 + c.n);
    assigned += c.n * k;
  }
  if (rows_ < rows) {
    rows_ = rows;
    logits_.resize(size_t(rows) * E);
    out_.resize(size_t(rows) * d);
    experts_.resize(size_t(rows) * k);
    weights_.resize(size_t(rows) * k);
    slot_pos_.resize(size_t(rows) * k);
  }
  last_rows_ = rows, last_experts_ = E, last_k_ = k;
  const size_t need = size_t(std::max(assigned, rows));
  const int Hmax = std::max(H, f.shared.empty() ? 0 : f.shared[0].hidden());
  if (xg_.size() < need * d) xg_.resize(need * d), yg_.resize(need * d);
  if (gate_.size() < need * Hmax) gate_.resize(need * Hmax), up_.resize(need * Hmax);

  // Router logits, one product per canvas (its lone forward's shape).
  blocks_.clear();
  for (const CanvasRows& c : canvases)
    if (c.n > 0)
      blocks_.push_back({h + size_t(c.row0) * d, c.n, logits_.data() + size_t(c.row0) * E});
  linear_grouped(blocks_, f.router, E, dt);
  const float* bias = f.expert_bias.empty() ? nullptr : f.expert_bias.data();
  for (const CanvasRows& c : canvases)
    for (int r = c.row0; r < c.row0 + c.n; ++r)
      route_row(logits_.data() + size_t(r) * E, E, bias, k, experts_.data() + size_t(r) * k,
                weights_.data() + size_t(r) * k, sort_scratch_);

  // Group the (row, slot) assignments by expert, then canvas, rows in order within each.
  count_.assign(size_t(E) * C, 0);
  for (int c = 0; c < C; ++c)
    for (int r = canvases[c].row0; r < canvases[c].row0 + canvases[c].n; ++r)
      for (int j = 0; j < k; ++j) ++count_[size_t(experts_[size_t(r) * k + j]) * C + c];
  offset_.assign(size_t(E) * C + 1, 0);
  for (size_t i = 0; i < size_t(E) * C; ++i) offset_[i + 1] = offset_[i] + count_[i];
  {
    std::vector<int>& fill = count_;  // reused as a fill cursor
    for (size_t i = 0; i < size_t(E) * C; ++i) fill[i] = offset_[i];
    for (int c = 0; c < C; ++c)
      for (int r = canvases[c].row0; r < canvases[c].row0 + canvases[c].n; ++r)
        for (int j = 0; j < k; ++j) {
          const int pos = fill[size_t(experts_[size_t(r) * k + j]) * C + c]++;
          slot_pos_[size_t(r) * k + j] = pos;
          std::memcpy(xg_.data() + size_t(pos) * d, h + size_t(r) * d, sizeof(float) * d);
        }
  }

  // Experts that got rows, the busiest first (threads take them in this order).
  std::vector<int> active;
  int max_rows = 0;
  for (int e = 0; e < E; ++e) {
    const int n_e = offset_[size_t(e + 1) * C] - offset_[size_t(e) * C];
    if (n_e > 0) active.push_back(e), max_rows = std::max(max_rows, n_e);
  }
  last_active_ = static_cast<int>(active.size());
  std::stable_sort(active.begin(), active.end(), [&](int a, int b) {
    return offset_[size_t(a + 1) * C] - offset_[size_t(a) * C] >
           offset_[size_t(b + 1) * C] - offset_[size_t(b) * C];
  });
  auto run_expert = [&](int e, std::vector<LinearRows>& bl) {
    const SwiGlu& ex = f.experts[size_t(e)];
    auto seg = [&](float* base, int width, const float* x, int xw) {
      bl.clear();
      for (int c = 0; c < C; ++c) {
        const int o = offset_[size_t(e) * C + c], n = offset_[size_t(e) * C + c + 1] - o;
        if (n > 0) bl.push_back({x + size_t(o) * xw, n, base + size_t(o) * width});
      }
      return std::span<const LinearRows>(bl);
    };
    linear_grouped(seg(gate_.data(), H, xg_.data(), d), ex.gate, H, dt);
    linear_grouped(seg(up_.data(), H, xg_.data(), d), ex.up, H, dt);
    const int o0 = offset_[size_t(e) * C], o1 = offset_[size_t(e + 1) * C];
    silu_mul(gate_.data() + size_t(o0) * H, up_.data() + size_t(o0) * H, size_t(o1 - o0) * H);
    linear_grouped(seg(yg_.data(), d, gate_.data(), H), ex.down, d, dt);
  };
  // Side by side when there are experts enough to share out, or each product is too small to
  // split (linear() would keep it on one thread anyway); else one after another, each product
  // split over the threads. linear() gives the same bits either way.
  const int nt = omp_get_max_threads();
  const bool small = double(max_rows) * H * d <= 4e6;
  const bool side_by_side =
      nt > 1 && active.size() > 1 && (active.size() >= size_t(4 * nt) || small);
  if (side_by_side) {
#pragma omp parallel
    {
      std::vector<LinearRows> bl;
#pragma omp for schedule(dynamic, 1)
      for (size_t i = 0; i < active.size(); ++i) run_expert(active[i], bl);
    }
  } else {
    for (int e : active) run_expert(e, blocks_);
  }

  // out[r] = sum over the row's experts in increasing expert index of w * y (the reference adds
  // expert by expert into zeros), then + the shared expert.
  for (const CanvasRows& c : canvases)
    for (int r = c.row0; r < c.row0 + c.n; ++r) {
      int order[64];
      int* ord = order;
      std::vector<int> big;
      if (k > 64) big.resize(k), ord = big.data();
      for (int j = 0; j < k; ++j) ord[j] = j;
      const int32_t* ex = experts_.data() + size_t(r) * k;
      std::sort(ord, ord + k, [&](int a, int b) { return ex[a] < ex[b]; });
      float* o = out_.data() + size_t(r) * d;
      std::fill(o, o + d, 0.0f);
      for (int jj = 0; jj < k; ++jj) {
        const int j = ord[jj];
        const float w = weights_[size_t(r) * k + j];
        const float* y = yg_.data() + size_t(slot_pos_[size_t(r) * k + j]) * d;
        for (int i = 0; i < d; ++i) o[i] += y[i] * w;
      }
    }
  for (const SwiGlu& s : f.shared) {
    const int Hs = s.hidden();
    auto per_canvas = [&](const float* x, int xw, float* y, int yw) {
      blocks_.clear();
      for (const CanvasRows& c : canvases)
        if (c.n > 0) blocks_.push_back({x + size_t(c.row0) * xw, c.n, y + size_t(c.row0) * yw});
      return std::span<const LinearRows>(blocks_);
    };
    linear_grouped(per_canvas(h, d, gate_.data(), Hs), s.gate, Hs, dt);
    linear_grouped(per_canvas(h, d, up_.data(), Hs), s.up, Hs, dt);
    for (const CanvasRows& c : canvases)
      silu_mul(gate_.data() + size_t(c.row0) * Hs, up_.data() + size_t(c.row0) * Hs,
               size_t(c.n) * Hs);
    linear_grouped(per_canvas(gate_.data(), Hs, yg_.data(), d), s.down, d, dt);
    for (const CanvasRows& c : canvases)
      add_in_place(out_.data() + size_t(c.row0) * d, yg_.data() + size_t(c.row0) * d,
                   size_t(c.n) * d);
  }
  return out_.data();
}

}  // namespace dllmq
