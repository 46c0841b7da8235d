#include "model/ffn_grad.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/backward.h"
#include "ops/norm_act.h"
#include "util/error.h"
#include "util/parallel_for.h"

namespace dllmq {

void swiglu_backward(const Linear& gate, const Linear& up, const Linear& down, const float* g,
                     const float* u, int n, const float* dout, float* dh, bool accumulate) {
  const size_t cells = size_t(n) * gate.out;
  std::vector<float> da(cells), dg(cells), du(cells);
  linear_backward_input(dout, n, down, da.data(), false);
  silu_mul_backward(g, u, da.data(), cells, dg.data(), du.data());
  linear_backward_input(dg.data(), n, gate, dh, accumulate);
  linear_backward_input(du.data(), n, up, dh, true);
}

namespace {

// One routed expert's share of the backward over its rows (gathered, [n_e, d]):
//   a = silu(g) * u with g, u recomputed (silu_mul, as the forward);  da_unweighted = dout down;
//   dw = <da_unweighted, a> (= <dout, down a>, the expert's output);  da = w da_unweighted;
//   dx = gate^T dg + up^T du.
void expert_backward(const SwiGlu& ex, const float* x, const float* dy, const float* w, int n_e,
                     ComputeDType dt, float* dx, float* dw) {
  const int H = ex.hidden();
  const size_t cells = size_t(n_e) * H;
  std::vector<float> g(cells), u(cells), da(cells), dg(cells), du(cells);
  linear(x, n_e, ex.gate, g.data(), 0, dt);
  linear(x, n_e, ex.up, u.data(), 0, dt);
  std::vector<float> a(g);
  silu_mul(a.data(), u.data(), cells);
  linear_backward_input(dy, n_e, ex.down, da.data(), false);
  for (int i = 0; i < n_e; ++i) {
    const float* ai = a.data() + size_t(i) * H;
    float* dai = da.data() + size_t(i) * H;
    double dot = 0.0;
    for (int c = 0; c < H; ++c) dot += double(dai[c]) * ai[c];
    dw[i] = float(dot);
    for (int c = 0; c < H; ++c) dai[c] *= w[i];
  }
  silu_mul_backward(g.data(), u.data(), da.data(), cells, dg.data(), du.data());
  linear_backward_input(dg.data(), n_e, ex.gate, dx, false);
  linear_backward_input(du.data(), n_e, ex.up, dx, true);
}

}  // namespace

void moe_ffn_backward(const MoeFfn& f, const MoeRouting& r, const float* h, int n, int d,
                      const float* dout, float* dh, ComputeDType dt) {
  const int E = f.n_experts(), k = f.top_k;
  if (r.rows < n || r.n_experts != E || r.top_k != k)
    fail("internal: moe_ffn_backward: the routing is not this layer's forward's");

  // The shared expert (always on) first: it sets dh (an expert of weight 1 on every row).
  std::fill(dh, dh + size_t(n) * d, 0.0f);
  if (!f.shared.empty()) {
    std::vector<float> ones(size_t(n), 1.0f), unused(ones.size()), dx(size_t(n) * d);
    for (const SwiGlu& s : f.shared) {
      expert_backward(s, h, dout, ones.data(), n, dt, dx.data(), unused.data());
      add_in_place(dh, dx.data(), dx.size());
    }
  }

  // Group the (row, slot) assignments by expert, rows in order within each.
  std::vector<int> offset(size_t(E) + 1, 0), slot_pos(size_t(n) * k);
  for (size_t i = 0; i < size_t(n) * k; ++i) ++offset[size_t(r.experts[i]) + 1];
  for (int e = 0; e < E; ++e) offset[e + 1] += offset[e];
  const size_t slots = size_t(n) * k;
  std::vector<float> xg(slots * d), dyg(slots * d), wg(slots), dxg(slots * d), dwg(slots);
  {
    std::vector<int> fill(offset.begin(), offset.end() - 1);
    for (int row = 0; row < n; ++row)
      for (int j = 0; j < k; ++j) {
        const size_t s = size_t(row) * k + j;
        const int pos = fill[size_t(r.experts[s])]++;
        slot_pos[s] = pos;
        wg[size_t(pos)] = r.weights[s];
        std::memcpy(xg.data() + size_t(pos) * d, h + size_t(row) * d, sizeof(float) * d);
        std::memcpy(dyg.data() + size_t(pos) * d, dout + size_t(row) * d, sizeof(float) * d);
      }
  }
  std::vector<int> active;
  for (int e = 0; e < E; ++e)
    if (offset[e + 1] > offset[e]) active.push_back(e);
  // Experts write disjoint slot ranges: they run side by side (one alone runs its products on the
  // team, at top level: util/parallel_for.h).
  for_each_item(active.size(), active.size() > 1, [&](size_t i) {
    const int e = active[i], o = offset[e], n_e = offset[e + 1] - o;
    expert_backward(f.experts[size_t(e)], xg.data() + size_t(o) * d, dyg.data() + size_t(o) * d,
                    wg.data() + o, n_e, dt, dxg.data() + size_t(o) * d, dwg.data() + o);
  });

  // Scatter the experts' input gradients back to the rows; the router's through p.
  std::vector<float> dlogits(size_t(n) * E), p(static_cast<size_t>(E)), dp(p.size());
  for (int row = 0; row < n; ++row) {
    float* o = dh + size_t(row) * d;
    std::fill(dp.begin(), dp.end(), 0.0f);
    for (int j = 0; j < k; ++j) {
      const size_t s = size_t(row) * k + j;
      const float* x = dxg.data() + size_t(slot_pos[s]) * d;
      for (int c = 0; c < d; ++c) o[c] += x[c];
      dp[size_t(r.experts[s])] += dwg[size_t(slot_pos[s])];  // w = p (+ bias): dw/dp = 1
    }
    // p = softmax(logits) as route_row computes it; dlogits = p * (dp - <p, dp>).
    const float* l = r.logits + size_t(row) * E;
    const float mx = *std::max_element(l, l + E);
    float sum = 0.0f;
    for (int e = 0; e < E; ++e) sum += (p[size_t(e)] = std::exp(l[e] - mx));
    double dot = 0.0;
    for (int e = 0; e < E; ++e) dot += double(p[size_t(e)] /= sum) * dp[size_t(e)];
    for (int e = 0; e < E; ++e)
      dlogits[size_t(row) * E + e] = p[size_t(e)] * float(dp[size_t(e)] - dot);
  }
  linear_backward_input(dlogits.data(), n, f.router, dh, true);
}

}  // namespace dllmq
