#include "ops/linear.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/amx_gemm.h"
#include "ops/gemm.h"
#include "ops/int8_act_gemm.h"
#include "ops/packed_gemm.h"
#include "ops/panel_split.h"
#include "util/error.h"
#include "util/half.h"

namespace dllmq {

namespace {

// oneDNN bf16 path only (bf16 compute on a CPU whose bf16 dot-product kernel measured faster than
// the packed kernels): output rows of W per GEMM call, ~1 MiB of f32, never fewer than 128 rows
// (32-token GEMMs on 64-row panels ran at a third of the library's rate; docs/performance.md).
int panel_rows(int in) {
  int r = (262144 / std::max(in, 1)) / 16 * 16;
  return std::clamp(r, 128, 1024);
}

int panel_count(const Linear& l) {
  return (l.out + panel_rows(l.in) - 1) / panel_rows(l.in);
}

// Activations of one call, rounded once (bf16 compute) and shared by every panel.
struct InputScratch {
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
};

bool native_bf16(const Linear& l, ComputeDType dt) {
  return dt == ComputeDType::kBF16 && l.w != nullptr && l.w->dtype == DType::kBF16 &&
         gemm_info().bf16_native;
}

}  // namespace

namespace {

// Float weights in bf16 compute on AMX tiles get the AMX layout; everything else the panels.
bool wants_amx(const Linear& l, ComputeDType dt) {
  return dt == ComputeDType::kBF16 && l.w != nullptr && l.quant == nullptr && !l.decode &&
         gemm_info().bf16_amx;
}

}  // namespace

void pack_linear(Linear& l, ComputeDType dt) {
  if (l.packed != nullptr || l.a8 != nullptr) return;
  if (l.quant == nullptr && l.decode) l.quant = std::make_shared<const QuantMatrix>(l.decode());
  if (l.quant != nullptr) {
    l.packed = pack_quant_weight(*l.quant, dispatch_isa());
    l.quant.reset();
    l.decode = nullptr;
  } else if (wants_amx(l, dt)) {
    l.packed = pack_weight_amx(l.w->data, l.w->dtype, l.out, l.in);
  } else {
    l.packed = pack_weight(l.w->data, l.w->dtype, l.out, l.in, dispatch_isa());
  }
}

bool packed_for(const Linear& l, ComputeDType dt) {
  if (l.a8 != nullptr) return true;
  if (l.packed == nullptr) return false;
  return l.packed->bits != 0 || l.packed->amx == wants_amx(l, dt);
}

int Linear::weight_bits() const {
  if (quant != nullptr) return quant->bits;
  if (decode) return quant_bits;
  if (a8 != nullptr) return a8->bits;
  if (packed != nullptr && packed->bits != 0) return packed->bits;
  return w == nullptr ? 0 : int(dtype_size(w->dtype) * 8);
}

void tensor_row_f32(const TensorView& t, int64_t row, int d, float* dst) {
  const auto* base = static_cast<const uint8_t*>(t.data) + row * d * dtype_size(t.dtype);
  to_f32(t.dtype, base, dst, d);
}

void blas_use_one_thread() {
  (void)gemm_info();
}  // selecting the backend sets it

void round_to_bf16(const float* src, float* dst, size_t n) {
  // Add half an ulp of bf16 (ties to even) and truncate: the f32 keeps only bf16's 8 mantissa
  // bits. Branch-free so it vectorises; NaN/Inf never reach it (activations are finite).
#pragma omp simd
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &src[i], 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    std::memcpy(&dst[i], &u, 4);
  }
}

namespace {

// bf16 compute on oneDNN's bf16 dot-product kernel: one GEMM call per (panel, block), a block's
// calls of its own shape whichever thread runs them. Blocks large enough split by panels; small
// ones and stacked tiles go to the threads as (panel, block) pairs where the weight has fewer
// panels than threads.
void linear_native_bf16(std::span<const LinearRows> blocks, const Linear& l, int ldy) {
  const int out = l.out, in = l.in, pr = panel_rows(in), n_panels = panel_count(l);
  thread_local InputScratch xs;
  thread_local std::vector<const uint16_t*> xin_tls;
  xin_tls.resize(blocks.size());
  const uint16_t** xin = xin_tls.data();  // the calling thread's copy, read by every thread
  size_t nx = 0;
  for (const LinearRows& b : blocks) nx += size_t(std::max(b.n, 0)) * in;
  if (xs.bf16.size() < nx) xs.bf16.resize(nx);
  size_t off = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const size_t nb = size_t(std::max(blocks[i].n, 0)) * in;
    for (size_t j = 0; j < nb; ++j) xs.bf16[off + j] = f32_to_bf16(blocks[i].x[j]);
    xin[i] = xs.bf16.data() + off;
    off += nb;
  }
  const int nb = static_cast<int>(blocks.size());
  const bool pairs = pairs_blocks(l);
  const int items = pairs ? n_panels * nb : n_panels;
  const double flops = 2.0 * double(nx) * out;
#pragma omp parallel for schedule(dynamic, 1) if (items > 1 && flops > kParallelFlops)
  for (int it = 0; it < items; ++it) {
    const int p = pairs ? it / nb : it;
    const int i0 = pairs ? it % nb : 0, i1 = pairs ? i0 + 1 : nb;
    const int r0 = p * pr, rows = std::min(pr, out - r0);
    const auto* w = static_cast<const uint16_t*>(l.w->data) + size_t(r0) * in;
    for (int i = i0; i < i1; ++i)
      if (blocks[i].n > 0)
        gemm_bf16_nt(blocks[i].n, rows, in, xin[i], in, w, in, blocks[i].y + r0, ldy);
  }
}

// The packed kernels over every block: the threads split the panels evenly, or, where the weight
// has fewer than two panels per thread, the rows of all blocks together (every thread then walks
// every panel). Either way each output is one FMA chain, so the split changes no bits.
void linear_packed(std::span<const LinearRows> blocks, const Linear& l, int ldy, ComputeDType dt) {
  const int in = l.in;
  const bool bf16 = dt == ComputeDType::kBF16;
  std::shared_ptr<const PackedWeight> owned;
  const PackedWeight* pw = l.packed.get();
  if (pw == nullptr) {
    owned = l.quant            ? pack_quant_weight(*l.quant, dispatch_isa())
            : l.decode         ? pack_quant_weight(l.decode(), dispatch_isa())
            : wants_amx(l, dt) ? pack_weight_amx(l.w->data, l.w->dtype, l.out, l.in)
                               : pack_weight(l.w->data, l.w->dtype, l.out, l.in, dispatch_isa());
    pw = owned.get();
  }
  // AMX tiles multiply bf16 only: a model switched back to fp32 repacks first.
  if (pw->amx && !bf16)
    fail(
        "linear: weights packed for AMX tiles multiplied in fp32 compute (repack them: "
        "Model::set_compute_dtype)");
  // Codes whose reduction order is not ascending k (desc_act): the activations gathered into
  // it, once per call, shared by every thread.
  thread_local std::vector<float> gathered;
  std::vector<LinearRows> reordered;
  if (!pw->order.empty()) {
    size_t total = 0;
    for (const LinearRows& b : blocks) total += size_t(std::max(b.n, 0)) * in;
    if (gathered.size() < total) gathered.resize(total);
    size_t at = 0;
    for (const LinearRows& b : blocks) {
      if (b.n <= 0) continue;
      gather_reduction_order(*pw, b.x, b.n, in, gathered.data() + at);
      reordered.push_back({gathered.data() + at, b.n, b.y, b.tile});
      at += size_t(b.n) * in;
    }
    blocks = reordered;
  }
  // bf16 weights in bf16 compute: on the AVX512-BF16 dot product where it measured faster. That
  // kernel rounds the activations itself (as vcvtne2ps2bf16 does: denormals to zero first), so
  // they go in unrounded; for the widening kernels they are rounded once, shared by every thread.
  const bool dot = bf16 && gemm_info().bf16_dot && bf16dot_available(*pw);
  const bool amx = pw->amx;  // converts the activations itself, like the dot kernel
  const bool round_x = bf16 && !dot && !amx;
  thread_local InputScratch xs;
  thread_local std::vector<kern::Block> kb_tls;
  std::vector<kern::Block>& kb = kb_tls;
  kb.clear();
  size_t nx = 0;
  for (const LinearRows& b : blocks) nx += size_t(std::max(b.n, 0)) * in;
  if (round_x && xs.f32.size() < nx) xs.f32.resize(nx);
  size_t off = 0;
  int rows = 0;
  for (const LinearRows& b : blocks) {
    if (b.n <= 0) continue;
    const float* x = b.x;
    if (round_x) {
      round_to_bf16(b.x, xs.f32.data() + off, size_t(b.n) * in);
      x = xs.f32.data() + off;
      off += size_t(b.n) * in;
    }
    kb.push_back({x, in, b.n, b.y, ldy});
    rows += b.n;
  }
  if (kb.empty()) return;
  const bool round_w = bf16;
  const int panels = pw->panels();
  const double flops = 2.0 * rows * double(l.out) * in;
  run_panel_split(kb, panels, flops, [&](std::span<const kern::Block> b, int p0, int p1) {
    if (amx)
      packed_gemm_amx(*pw, b, p0, p1);
    else if (dot)
      packed_gemm_bf16dot(*pw, b, p0, p1);
    else
      packed_gemm(*pw, b, p0, p1, round_w);
  });
}

}  // namespace

bool pairs_blocks(const Linear& l) {
  return l.w != nullptr && panel_count(l) < omp_get_max_threads() && gemm_info().bf16_native &&
         l.w->dtype == DType::kBF16;
}

void linear(const float* x, int n, const Linear& l, float* y, int ldy, ComputeDType dt) {
  const LinearRows one{x, n, y};
  linear_grouped({&one, 1}, l, ldy, dt);
}

void linear_grouped(std::span<const LinearRows> blocks, const Linear& l, int ldy, ComputeDType dt) {
  if (ldy == 0) ldy = l.out;
  if (l.a8 != nullptr) {
    thread_local std::vector<kern::Block> kb;
    kb.clear();
    for (const LinearRows& b : blocks)
      if (b.n > 0) kb.push_back({b.x, l.in, b.n, b.y, ldy});
    int8_act_gemm_parallel(*l.a8, kb);
  } else if (native_bf16(l, dt)) {
    linear_native_bf16(blocks, l, ldy);
  } else {
    linear_packed(blocks, l, ldy, dt);
  }
  if (l.b != nullptr) {
    thread_local std::vector<float> bias;
    if (bias.size() < size_t(l.out)) bias.resize(l.out);
    to_f32(l.b->dtype, l.b->data, bias.data(), l.out);
    for (const LinearRows& b : blocks)
      for (int i = 0; i < b.n; ++i) {
        float* yi = b.y + size_t(i) * ldy;
        for (int o = 0; o < l.out; ++o) yi[o] += bias[o];
      }
  }
}

void linear_ref(const float* x, int n, const Linear& l, float* y, ComputeDType dt) {
  const bool bf16 = dt == ComputeDType::kBF16;
  std::vector<float> wrow(l.in), b(l.out, 0.0f), xr(x, x + size_t(n) * l.in);
  if (bf16) round_to_bf16(xr.data(), xr.data(), xr.size());
  if (l.b) to_f32(l.b->dtype, l.b->data, b.data(), l.out);
  const std::shared_ptr<const QuantMatrix> q = l.quant ? l.quant
                                               : l.decode
                                                   ? std::make_shared<const QuantMatrix>(l.decode())
                                                   : nullptr;
  for (int o = 0; o < l.out; ++o) {
    if (q)
      for (int k = 0; k < l.in; ++k) wrow[k] = q->dequant(o, k);
    else
      tensor_row_f32(*l.w, o, l.in, wrow.data());
    if (bf16) round_to_bf16(wrow.data(), wrow.data(), wrow.size());
    for (int i = 0; i < n; ++i) {
      double acc = b[o];
      for (int k = 0; k < l.in; ++k) acc += double(xr[size_t(i) * l.in + k]) * wrow[k];
      y[size_t(i) * l.out + o] = static_cast<float>(acc);
    }
  }
}

}  // namespace dllmq
