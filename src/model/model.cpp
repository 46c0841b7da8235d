#include "model/model.h"

#include <time.h>

#include <algorithm>
#include <cassert>
#include <cstring>

#include <fmt/format.h>

#include "io/generation_config.h"
#include "model/moe.h"
#include "model/output_rows.h"
#include "model/projections.h"
#include "model/stacked_gemm.h"
#include "ops/attention.h"
#include "ops/gemm.h"
#include "ops/norm_act.h"
#include "util/error.h"
#include "util/mmap_file.h"
#include "util/parallel_for.h"
#include "util/team_cpu_clock.h"

namespace dllmq {

namespace {

// Charges the wall and CPU time since the previous charge to a phase. Phases follow one another
// on the calling thread; CPU time counts the OpenMP team's threads (worker spin-waits included),
// read from their own clocks so that a phase shorter than a scheduler tick gets its own time
// (util/team_cpu_clock.h).
class PhaseClock {
 public:
  PhaseClock() : wall_(clock_s(CLOCK_MONOTONIC)), cpu_(team_cpu_s()) {}
  void charge(PhaseStat& s) {
    const double w = clock_s(CLOCK_MONOTONIC), c = team_cpu_s();
    s.wall_s += w - wall_;
    s.cpu_s += std::max(0.0, c - cpu_);  // a team found anew mid-forward reads from a new sum
    wall_ = w;
    cpu_ = c;
  }

 private:
  double wall_, cpu_;
};

double weight_bytes(const Linear& l) {
  return double(l.out) * l.in * l.weight_bits() / 8.0;
}

}  // namespace

std::unique_ptr<Model> Model::load(const std::string& dir, ComputeDType dt) {
  (void)gemm_info();  // selects the GEMM backend (and says so on stderr if it is generic)
  pin_threads();
  std::unique_ptr<Model> m(new Model());
  m->dir_ = dir;
  m->cfg_ = load_model_config(dir);
  check_generation_ids(load_generation_defaults(dir), m->cfg_, dir);  // the files must agree
  m->ckpt_ = std::make_unique<Checkpoint>(dir);
  m->w_ = bind_weights(*m->ckpt_, m->cfg_, load_weight_quant_config(dir));
  m->dtype_ = dt;
  m->pack_weights();
  m->rope_ = RopeTable(m->cfg_.head_dim, m->cfg_.rope_theta);
  return m;
}

// Every projection and the LM head packed once for the micro-kernels of the compute dtype
// (ops/packed_gemm.h; AMX tiles, ops/amx_gemm.h, for bf16 where chosen), layer by layer, each
// weight's mapped pages dropped as soon as it is packed: resident memory stays at one copy of the
// weights (the packed one) plus, while packing, one weight matrix. Packing at load rather than
// lazily per layer keeps the first forward's timing and the server's first request free of it, and
// the ~1 s per GB it costs is paid once (read from the page cache at memory speed). Code that still
// reads a weight in its checkpoint layout (the oneDNN bf16 path, the calibration gradient) pages it
// in again from the file: same bytes.
void Model::pack_weights() {
  auto pack = [dt = dtype_](Linear& l) {
    if (l.empty()) return;  // unset: the dense MLP of a MoE layer
    pack_linear(l, dt);
    if (l.w != nullptr) release_mapped_pages(l.w->data, l.w->nbytes);
  };
  for_each_linear(w_, pack);  // the router and every expert, shared ones included (model/moe.h)
}

void Model::set_compute_dtype(ComputeDType d) {
  dtype_ = d;
  // Weights packed for the other dtype's kernels are packed again; the rest stay as they are.
  for_each_linear(w_, [d](Linear& l) {
    if (!l.empty() && l.w != nullptr && !packed_for(l, d)) l.packed.reset();
  });
  pack_weights();
}

const std::string& Model::fingerprint() const {
  if (!fingerprint_.empty()) return fingerprint_;
  // FNV-1a 64 over the geometry, every tensor's name, dtype and shape, and its first and last
  // 256 bytes: cheap (no full read of an 8B checkpoint) and different for any retrained model.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  const std::string geo =
      fmt::format("{}|{}|{}|{}|{}|{}|{}|{}", layout_name(cfg_.layout), cfg_.n_layers, cfg_.d_model,
                  cfg_.n_heads, cfg_.n_kv_heads, cfg_.head_dim, cfg_.vocab_size, cfg_.mlp_hidden);
  mix(geo.data(), geo.size());
  for (const auto& [name, t] : ckpt_->tensors()) {
    const std::string d = fmt::format("{}|{}|{}", name, dtype_name(t->dtype), t->shape_str());
    mix(d.data(), d.size());
    const size_t k = std::min<size_t>(256, t->nbytes);
    mix(t->data, k);
    mix(static_cast<const uint8_t*>(t->data) + t->nbytes - k, k);
  }
  fingerprint_ = fmt::format("{:016x}", h);
  return fingerprint_;
}

void Model::grow(int n) {
  if (n <= cap_) return;
  cap_ = n;
  const size_t d = cfg_.d_model, qd = size_t(cfg_.n_heads) * cfg_.head_dim, kvd = cfg_.kv_dim();
  x_.resize(n * d);
  h_.resize(n * d);
  q_.resize(n * qd);
  k_.resize(n * kvd);
  v_.resize(n * kvd);
  att_.resize(n * qd);
  gate_.resize(n * size_t(cfg_.mlp_hidden));
  up_.resize(n * size_t(cfg_.mlp_hidden));
}

void Model::grow_output_rows(int n) {
  if (xs_.size() >= size_t(n) * cfg_.d_model) return;
  xs_.resize(size_t(n) * cfg_.d_model);
  atts_.resize(size_t(n) * cfg_.n_heads * cfg_.head_dim);
}

void Model::forward(const ForwardArgs& a, float* logits) {
  const CanvasForward one{&a, logits};
  forward_batch({&one, 1});
}

void Model::forward_batch(std::span<const CanvasForward> canvases) {
  const int d = cfg_.d_model, hd = cfg_.head_dim, nh = cfg_.n_heads, nkv = cfg_.n_kv_heads;
  const int kvd = cfg_.kv_dim(), qd = nh * hd;
  const ComputeDType dt = dtype_;
  // Weights are read in place from the mapped checkpoint: a shard rewritten since loading would
  // give SIGBUS or other weights (util/mmap_file.h). A few fstat calls per forward.
  ckpt_->check_unchanged();
  PhaseClock clock;
  ForwardProfile& pf = profile_;
  // Canvas c owns rows [row0[c], row0[c] + n_c) of every activation buffer: in canvas order, or
  // laid out for stacked GEMMs (model/stacked_gemm.h).
  const size_t nc = canvases.size();
  rows_.resize(nc);
  for (size_t c = 0; c < nc; ++c) {
    const ForwardArgs& a = *canvases[c].args;
    assert(a.logits.begin >= a.pos0 && a.logits.end <= a.pos0 + int(a.ids.size()));
    assert(a.write.empty() ||
           (a.write.begin >= a.pos0 && a.write.end <= a.pos0 + int(a.ids.size())));
    rows_[c] = static_cast<int>(a.ids.size());
  }
  const bool stack = nc > 1 && batch_gemm() == BatchGemm::kStacked;
  StackedLayout layout;
  if (stack) {
    // Equal per-thread shares where some projection spreads its tiles over the threads; where
    // every one splits by panel, tiles as large as they come (a weight panel streams once per
    // tile: 128-row tiles were 5-10% faster than 64-row ones on a d 1024 model).
    const LayerWeights& L0 = w_.layers[0];
    bool on_threads = false;
    for (const Linear* p : {&L0.q, &L0.k, &L0.v, &L0.o, &L0.gate, &L0.up, &L0.down})
      if (p->w != nullptr) on_threads |= pairs_blocks(*p);  // a MoE layer has no dense MLP
    layout = stacked_layout(rows_, on_threads ? gemm_threads() : 1);
  } else {
    layout.row0.resize(nc);
    for (size_t c = 0; c < nc; ++c) layout.row0[c] = c ? layout.row0[c - 1] + rows_[c - 1] : 0;
    layout.n = nc ? layout.row0[nc - 1] + rows_[nc - 1] : 0;
  }
  const std::vector<int>& row0 = layout.row0;
  const int n = layout.n;
  grow(stack ? layout.capacity() : n);
  auto rows_of = [&](const ForwardArgs& a) { return static_cast<int>(a.ids.size()); };
  // The GEMM blocks of a projection over the buffers, `ldx` / `ldy` floats per row.
  auto blocks = [&](const float* x, int ldx, float* y, int ldy) {
    if (stack) {
      stacked_blocks(layout, rows_, x, ldx, y, ldy, blocks_);
    } else {
      blocks_.resize(nc);
      for (size_t c = 0; c < nc; ++c)
        blocks_[c] = {x + size_t(row0[c]) * ldx, rows_[c], y + size_t(row0[c]) * ldy};
    }
    return std::span<const LinearRows>(blocks_);
  };
  // After the last layer's attention, the output projection, residual and MLP run on the output
  // rows alone where they are fewer than the rows (model/output_rows.h), in compact buffers, a
  // GEMM block per canvas: each canvas's product has the shape of its batch-1 forward's.
  const OutputRows out = select_output_rows(canvases, row0);
  int all_rows = 0;
  for (int r : rows_) all_rows += r;
  const bool narrow_last = out.total() < all_rows;
  if (narrow_last) grow_output_rows(out.total());
  auto out_blocks = [&](const float* x, int ldx, float* y, int ldy) {
    blocks_.clear();
    for (size_t c = 0; c < nc; ++c)
      if (out.count[c] > 0)
        blocks_.push_back(
            {x + size_t(out.row0[c]) * ldx, out.count[c], y + size_t(out.row0[c]) * ldy});
    return std::span<const LinearRows>(blocks_);
  };

  // x: [n, d] token embeddings (no scaling).
  for (size_t c = 0; c < nc; ++c) {
    const ForwardArgs& a = *canvases[c].args;
    rope_.reserve(a.pos0 + rows_of(a));
    for (int i = 0; i < rows_of(a); ++i) {
      const int id = a.ids[i];
      if (id < 0 || id >= cfg_.vocab_size)
        fail("token id {} at row {} outside the vocabulary [0, {})", id, i, cfg_.vocab_size);
      tensor_row_f32(*w_.embed, id, d, x_.data() + size_t(row0[c] + i) * d);
    }
    account(a);
  }
  clock.charge(pf.other);

  for (size_t c = 0; c < nc; ++c)
    if (canvases[c].args->observer) canvases[c].args->observer->on_forward(*canvases[c].args);
  for (int l = 0; l < cfg_.n_layers; ++l) {
    const LayerWeights& L = w_.layers[l];
    const int mlp = L.gate.out;  // dense MLP width (LLaDA-MoE's dense layers have their own)
    rmsnorm(x_.data(), n, d, L.attn_norm.data(), cfg_.rms_eps, h_.data());
    clock.charge(pf.other);
    linear_grouped(blocks(h_.data(), d, q_.data(), qd), L.q, qd, dt);    // [n, nh*hd]
    linear_grouped(blocks(h_.data(), d, k_.data(), kvd), L.k, kvd, dt);  // [n, kvd] pre-RoPE
    linear_grouped(blocks(h_.data(), d, v_.data(), kvd), L.v, kvd, dt);  // [n, kvd]
    clock.charge(pf.proj);
    if (!L.q_norm.empty()) {
      // LLaDA-MoE: RMSNorm of every head's q and k (one weight shared by the heads) before RoPE
      // and before K reaches the store, as the reference does.
      rmsnorm(q_.data(), n * nh, hd, L.q_norm.data(), cfg_.rms_eps, q_.data());
      rmsnorm(k_.data(), n * nkv, hd, L.k_norm.data(), cfg_.rms_eps, k_.data());
    }
    // Per canvas: its KV store write and RoPE at its own positions. Canvases are independent,
    // each with a store of its own (per-thread scratch only), so several run side by side on
    // the threads, unless an observer watches (calibration probes see one forward at a time). A
    // store may refuse rows (non-finite K/V): the error leaves the region and is rethrown here.
    std::vector<std::exception_ptr>& errors = canvas_errors_;
    errors.assign(nc, nullptr);
    bool observed = false;
    for (size_t c = 0; c < nc; ++c) observed |= canvases[c].args->observer != nullptr;
    for_each_item(nc, nc > 1 && !observed, [&](size_t c) {
      const ForwardArgs& a = *canvases[c].args;
      const int nr = rows_of(a);
      float* q = q_.data() + size_t(row0[c]) * qd;
      float* k = k_.data() + size_t(row0[c]) * kvd;
      const float* v = v_.data() + size_t(row0[c]) * kvd;
      try {
        if (a.store != nullptr && !a.write.empty()) {
          const int r0 = a.write.begin - a.pos0;
          a.store->write(l, a.write.begin, a.write.size(), k + size_t(r0) * kvd,
                         v + size_t(r0) * kvd);
        }
        if (a.observer) a.observer->on_kv(l, a.pos0, nr, k, v);
      } catch (...) {
        errors[c] = std::current_exception();
        return;
      }
      rope_.apply(q, nr, nh, a.pos0);
      rope_.apply(k, nr, nkv, a.pos0);
      if (a.observer) a.observer->on_query(l, a.pos0, nr, q);
    });
    for (const std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(e);
    clock.charge(pf.other);

    // Attention per canvas, over its own fresh and cached rows. Several canvases run side by
    // side (each on one thread, as attention() runs a small canvas alone).
    auto attend = [&](size_t c) {
      const ForwardArgs& a = *canvases[c].args;
      attend_canvas(a, l, q_.data() + size_t(row0[c]) * qd, k_.data() + size_t(row0[c]) * kvd,
                    v_.data() + size_t(row0[c]) * kvd, att_.data() + size_t(row0[c]) * qd);
    };
    if (nc == 1) {
      attend(0);
    } else {
#pragma omp parallel for schedule(dynamic, 1)
      for (size_t c = 0; c < nc; ++c) attend(c);
    }
    clock.charge(pf.attn);
    for (size_t c = 0; c < nc; ++c) {
      const ForwardArgs& a = *canvases[c].args;
      if (a.observer)
        a.observer->on_layer(l, a.pos0, rows_of(a), k_.data() + size_t(row0[c]) * kvd,
                             v_.data() + size_t(row0[c]) * kvd, att_.data() + size_t(row0[c]) * qd);
    }
    clock.charge(pf.other);

    // The rest of the layer is row by row: every row, or in the last layer the output rows
    // (compact: xs_, atts_; then scattered back for the LM head).
    const bool narrow = narrow_last && l == cfg_.n_layers - 1;
    const int nr = narrow ? out.total() : n;
    auto rows_blocks = [&](const float* x, int ldx, float* y, int ldy) {
      return narrow ? out_blocks(x, ldx, y, ldy) : blocks(x, ldx, y, ldy);
    };
    float* xr = x_.data();
    const float* att = att_.data();
    if (narrow) {
      gather_rows(x_.data(), d, out.src, xs_.data());
      gather_rows(att_.data(), qd, out.src, atts_.data());
      xr = xs_.data();
      att = atts_.data();
      clock.charge(pf.other);
    }
    linear_grouped(rows_blocks(att, qd, h_.data(), d), L.o, d, dt);
    clock.charge(pf.proj);
    add_rmsnorm(xr, h_.data(), nr, d, L.ffn_norm.data(), cfg_.rms_eps, h_.data());
    clock.charge(pf.other);
    if (L.moe) {
      // Routed experts (model/moe.h): products per (expert, canvas), so exact per canvas.
      canvas_rows_.resize(nc);
      for (size_t c = 0; c < nc; ++c)
        canvas_rows_[c] =
            narrow ? CanvasRows{out.row0[c], out.count[c]} : CanvasRows{row0[c], rows_[c]};
      const float* y = moe_.forward(*L.moe, h_.data(), d, canvas_rows_, dt);
      clock.charge(pf.proj);
      for (const CanvasRows& c : canvas_rows_)
        add_in_place(xr + size_t(c.row0) * d, y + size_t(c.row0) * d, size_t(c.n) * d);
    } else {
      linear_grouped(rows_blocks(h_.data(), d, gate_.data(), mlp), L.gate, mlp, dt);  // [nr, mlp]
      linear_grouped(rows_blocks(h_.data(), d, up_.data(), mlp), L.up, mlp, dt);      // [nr, mlp]
      clock.charge(pf.proj);
      silu_mul(gate_.data(), up_.data(), size_t(nr) * mlp);
      clock.charge(pf.other);
      linear_grouped(rows_blocks(gate_.data(), mlp, h_.data(), d), L.down, d, dt);  // [nr, d]
      clock.charge(pf.proj);
      add_in_place(xr, h_.data(), size_t(nr) * d);
    }
    if (narrow) {
      scatter_rows(xs_.data(), d, out.src, x_.data());  // the rows the LM head reads
      clock.charge(pf.other);
    }
  }

  // Final norm and LM head on the rows that need logits, each canvas's into its own output. A
  // canvas that names its rows (logit_rows) has them gathered into one block, multiplied into
  // head_rows_ and copied to their output rows: one product over the gathered rows instead of
  // one per run of rows.
  const size_t V = cfg_.vocab_size;
  blocks_.clear();
  int nl_all = 0;
  size_t gathered = 0;
  for (size_t c = 0; c < nc; ++c) gathered += canvases[c].args->logit_rows.size();
  if (head_rows_.size() < gathered * V) head_rows_.resize(gathered * V);
  gathered = 0;
  for (size_t c = 0; c < nc; ++c) {
    const ForwardArgs& a = *canvases[c].args;
    if (a.logits.empty()) continue;
    const int r0 = row0[c] + a.logits.begin - a.pos0, nl = a.n_logit_rows();
    float* h = h_.data() + size_t(nl_all) * d;
    if (a.logit_rows.empty()) {
      rmsnorm(x_.data() + size_t(r0) * d, nl, d, w_.final_norm.data(), cfg_.rms_eps, h);
      blocks_.push_back({h, nl, canvases[c].logits});
    } else {
      for (int i = 0; i < nl; ++i) {
        const int r = a.logit_rows[i];  // checked by select_output_rows
        rmsnorm(x_.data() + size_t(r0 + r) * d, 1, d, w_.final_norm.data(), cfg_.rms_eps,
                h + size_t(i) * d);
      }
      blocks_.push_back({h, nl, head_rows_.data() + gathered * V});
      gathered += nl;
    }
    nl_all += nl;
  }
  if (blocks_.empty()) {
    clock.charge(pf.other);
    return;
  }
  linear_grouped(blocks_, w_.lm_head, cfg_.vocab_size, dt);  // [nl, vocab] per canvas
  gathered = 0;
  for (size_t c = 0; c < nc; ++c) {
    const ForwardArgs& a = *canvases[c].args;
    if (a.logits.empty()) continue;
    for (size_t i = 0; i < a.logit_rows.size(); ++i, ++gathered)
      std::memcpy(canvases[c].logits + size_t(a.logit_rows[i]) * V,
                  head_rows_.data() + gathered * V, V * sizeof(float));
  }
  for (const LinearRows& b : blocks_) {
    pf.head.flops += 2.0 * b.n * d * cfg_.vocab_size;
    pf.head.bytes += weight_bytes(w_.lm_head) + 4.0 * b.n * (d + double(cfg_.vocab_size));
    pf.logit_rows += b.n;
  }
  clock.charge(pf.head);
}

void Model::attend_canvas(const ForwardArgs& a, int layer, const float* q, const float* k,
                          const float* v, float* att) const {
  const int n = static_cast<int>(a.ids.size()), hd = cfg_.head_dim, kvd = cfg_.kv_dim();
  std::vector<StoredKvRows> stored;  // a handful of ranges; tiny
  std::vector<const KvRowSource*> sources;
  stored.reserve(a.cached.size());
  for (const PosRange& r : a.cached) stored.emplace_back(*a.store, layer, r);
  FreshKvRows fresh(k, v, n, kvd, hd);
  sources_in_canvas_order(a.cached, stored, &fresh, a.pos0, sources);
  attention(q, n, cfg_.n_heads, cfg_.n_kv_heads, hd, sources, att,  // [n, n_heads * hd]
            dtype_ == ComputeDType::kBF16);
}

// The FFN width a token passes through in layer L: the dense MLP's, or a MoE layer's top_k
// experts and shared expert (its router's d x n_experts product is counted apart).
static double ffn_width(const LayerWeights& L) {
  if (!L.moe) return L.gate.out;
  double w = double(L.moe->top_k) * L.moe->experts[0].hidden();
  for (const SwiGlu& s : L.moe->shared) w += s.hidden();
  return w;
}

// FLOPs and roofline bytes of one canvas's forward, per phase: FLOPs from the model count; bytes
// are what each phase must move at least (weights once, activations in and out, every K/V row
// read).
void Model::account(const ForwardArgs& a) {
  const int n = static_cast<int>(a.ids.size());
  const int d = cfg_.d_model, kvd = cfg_.kv_dim();
  ForwardProfile& pf = profile_;
  int n_keys = n;
  for (const PosRange& r : a.cached) n_keys += r.size();
  const int n_out = output_row_count(a);
  flops_done_ += forward_flops(n, n_keys, a.n_logit_rows(), n_out);
  const double qd = double(cfg_.n_heads) * cfg_.head_dim;
  double cached_kv_bytes = 0.0;
  if (a.store != nullptr)
    for (const PosRange& r : a.cached)
      cached_kv_bytes += double(r.size()) * kvd * (a.store->bits_k() + a.store->bits_v()) / 8.0;
  ++pf.forwards;
  for (const LayerWeights& L : w_.layers) {
    // Rows after attention: the output rows in the last layer (model/output_rows.h).
    const double nr = &L == &w_.layers.back() ? n_out : n;
    pf.proj.bytes += weight_bytes(L.q) + weight_bytes(L.k) + weight_bytes(L.v) + weight_bytes(L.o) +
                     weight_bytes(L.gate) + weight_bytes(L.up) + weight_bytes(L.down);
    if (L.moe) {
      // At most n * top_k experts are read (all of them once the rows cover every expert).
      const MoeFfn& f = *L.moe;
      const double touched = std::min<double>(f.n_experts(), nr * f.top_k);
      const SwiGlu& e0 = f.experts[0];
      pf.proj.bytes +=
          weight_bytes(f.router) +
          touched * (weight_bytes(e0.gate) + weight_bytes(e0.up) + weight_bytes(e0.down));
      for (const SwiGlu& s : f.shared)
        pf.proj.bytes += weight_bytes(s.gate) + weight_bytes(s.up) + weight_bytes(s.down);
      pf.proj.flops += 2.0 * nr * d * f.n_experts();
    }
    const double mlp = ffn_width(L);
    pf.proj.bytes += 4.0 * n * (d + qd + 2 * kvd) + 4.0 * nr * (qd + d + d + 2 * mlp + mlp + d);
    pf.proj.flops += 2.0 * n * (d * qd + 2 * d * kvd) + 2.0 * nr * (qd * d + 3 * d * mlp);
    pf.attn.flops += 4.0 * n * n_keys * qd;
    pf.attn.bytes += 4.0 * n * 2 * qd + 4.0 * n * 2 * kvd + cached_kv_bytes;
  }
}

BatchGemm parse_batch_gemm(const std::string& s) {
  if (s == "auto") return BatchGemm::kAuto;
  if (s == "per-canvas") return BatchGemm::kPerCanvas;
  if (s == "stacked") return BatchGemm::kStacked;
  fail("--batch-gemm: unknown mode '{}' (expected auto, per-canvas or stacked)", s);
}

const char* batch_gemm_name(BatchGemm m) {
  return m == BatchGemm::kAuto ? "auto" : m == BatchGemm::kPerCanvas ? "per-canvas" : "stacked";
}

BatchGemm Model::batch_gemm() {
  if (batch_gemm_ != BatchGemm::kAuto) return batch_gemm_;
  int& known = stacked_exact_[gemm_info().lib == GemmLib::kOpenBlas][dtype_ == ComputeDType::kBF16];
  if (known < 0) known = stacked_gemm_exact(w_, dtype_, gemm_threads()) ? 1 : 0;
  return known ? BatchGemm::kStacked : BatchGemm::kPerCanvas;
}

double Model::forward_flops(const ForwardArgs& a) const {
  int n_keys = static_cast<int>(a.ids.size());
  for (const PosRange& r : a.cached) n_keys += r.size();
  return forward_flops(static_cast<int>(a.ids.size()), n_keys, a.n_logit_rows(),
                       output_row_count(a));
}

double Model::forward_flops(int n, int n_keys, int n_logits, int n_out) const {
  const double d = cfg_.d_model, qd = double(cfg_.n_heads) * cfg_.head_dim, kvd = cfg_.kv_dim();
  const double attn = 2.0 * 2.0 * double(n) * n_keys * qd;
  double total = 2.0 * n_logits * d * cfg_.vocab_size;
  for (const LayerWeights& L : w_.layers) {
    const double nr = &L == &w_.layers.back() && n_out >= 0 ? n_out : n;
    total += n * 2.0 * (d * qd + 2 * d * kvd) + nr * 2.0 * (qd * d + 3 * d * ffn_width(L)) + attn;
  }
  return total;
}

}  // namespace dllmq
