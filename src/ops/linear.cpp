#include "ops/linear.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/gemm.h"
#include "util/error.h"
#include "util/half.h"

namespace dllmq {

namespace {

// Output rows of W per work item: ~1 MiB of f32 so a widened panel stays in L2 while the GEMM
// runs, and at least two items per thread on the d >= 1024 projections so a thread delayed by
// a shared core does not hold the others at the join. Never fewer than 128 rows: with
// LLaDA-8B's 4096/12288 inputs the 1 MiB rule gave 64/16-row panels, whose 32-token GEMMs ran
// at a third of the library's rate (one 8B-shaped layer on 32 tokens, fp32: 87 -> 200 GFLOP/s
// with 128 rows; docs/performance.md).
int panel_rows(int in) {
  int r = (262144 / std::max(in, 1)) / 16 * 16;
  return std::clamp(r, 128, 1024);
}

// Panels of `l`: the work items a product splits into across threads.
int panel_count(const Linear& l) {
  return (l.out + panel_rows(l.in) - 1) / panel_rows(l.in);
}

// Per-thread scratch, grown once to the largest panel and kept (no allocation per call), with
// the panel it holds (tiles: a thread reuses it for every tile of that panel it takes).
struct LinearScratch {
  std::vector<float> panel;
  int held = -1;  // first weight row of the panel widened into `panel` in this region, or -1
  void reserve(size_t n) {
    if (panel.size() < n) panel.resize(n);
  }
};

// Activations of one call, rounded once (bf16 compute) and shared by every panel.
struct InputScratch {
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
};

void widen_panel(const Linear& l, size_t r0, size_t rows, bool round_bf16, float* dst) {
  const size_t esz = dtype_size(l.w->dtype);
  const auto* src = static_cast<const uint8_t*>(l.w->data) + r0 * l.in * esz;
  const size_t n = rows * l.in;
  if (l.w->dtype == DType::kF32 && round_bf16)
    round_to_bf16(reinterpret_cast<const float*>(src), dst, n);
  else
    to_f32(l.w->dtype, src, dst, n);
}

}  // namespace

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

// Whether linear() runs a product of `n` rows on several threads (one panel each): small
// products stay on one thread, where a parallel region costs more than it saves.
bool parallel_rows(int n, const Linear& l) {
  return panel_count(l) > 1 && double(n) * l.out * l.in > 4e6;
}

// How linear_blocks spreads its work: one thread; one panel per thread, every block in it (the
// threading a lone product gets); or (panel, block) pairs over the threads (stacked tiles).
enum class Spread { kSerial, kPanels, kPairs };

// The product for `blocks`, panel by panel (each 16-bit panel widened once for all of them on a
// thread), spread as `spread` says.
void linear_blocks(std::span<const LinearRows> blocks, const Linear& l, int ldy, ComputeDType dt,
                   Spread spread) {
  int n = 0;  // rows of all blocks
  for (const LinearRows& b : blocks) n += std::max(b.n, 0);
  if (n <= 0) return;
  const int out = l.out, in = l.in;
  const bool bf16 = dt == ComputeDType::kBF16;
  const bool native = bf16 && l.w->dtype == DType::kBF16 && gemm_info().bf16_native;
  const bool widen = !native && (l.w->dtype != DType::kF32 || bf16);
  const int pr = panel_rows(in);
  const int n_panels = panel_count(l);

  // Inputs as the GEMM reads them: the caller's rows, or (bf16 compute) rounded copies of all
  // blocks side by side, made once and shared by every panel.
  thread_local InputScratch xs;
  thread_local std::vector<const void*> xin_tls;
  xin_tls.resize(blocks.size());
  // The panel threads read the calling thread's copy (a thread_local named inside the parallel
  // region would be each thread's own, empty one).
  const void** xin = xin_tls.data();
  const size_t nx = size_t(n) * in;
  if (native && xs.bf16.size() < nx) xs.bf16.resize(nx);
  if (bf16 && !native && xs.f32.size() < nx) xs.f32.resize(nx);
  size_t off = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const LinearRows& b = blocks[i];
    const size_t nb = size_t(std::max(b.n, 0)) * in;
    xin[i] = b.x;
    if (native) {
      for (size_t j = 0; j < nb; ++j) xs.bf16[off + j] = f32_to_bf16(b.x[j]);
      xin[i] = xs.bf16.data() + off;
    } else if (bf16) {
      round_to_bf16(b.x, xs.f32.data() + off, nb);
      xin[i] = xs.f32.data() + off;
    }
    off += nb;
  }

  // Work items: a panel with every block (kSerial, kPanels), or a panel with one block (kPairs,
  // panel-major, so a thread's consecutive items share its widened panel).
  const int nb = static_cast<int>(blocks.size());
  const bool pairs = spread == Spread::kPairs;
  const int items = pairs ? n_panels * nb : n_panels;
#pragma omp parallel if (spread != Spread::kSerial && items > 1)
  {
    thread_local LinearScratch s;
    if (widen) s.reserve(size_t(pr) * in);
    s.held = -1;  // the weights may have been other ones in the previous region
    auto item = [&](int it) {
      const int p = pairs ? it / nb : it;
      const int i0 = pairs ? it % nb : 0, i1 = pairs ? i0 + 1 : nb;
      const int r0 = p * pr, rows = std::min(pr, out - r0);
      if (native) {
        const auto* w = static_cast<const uint16_t*>(l.w->data) + size_t(r0) * in;
        for (int i = i0; i < i1; ++i)
          if (blocks[i].n > 0)
            gemm_bf16_nt(blocks[i].n, rows, in, static_cast<const uint16_t*>(xin[i]), in, w, in,
                         blocks[i].y + r0, ldy);
        return;
      }
      const float* w = static_cast<const float*>(l.w->data) + size_t(r0) * in;
      if (widen) {
        if (s.held != r0) widen_panel(l, r0, rows, bf16, s.panel.data());
        s.held = r0;
        w = s.panel.data();
      }
      for (int i = i0; i < i1; ++i)
        if (blocks[i].n > 0)
          sgemm_nt(blocks[i].n, rows, in, static_cast<const float*>(xin[i]), in, w, in,
                   blocks[i].y + r0, ldy);
    };
    if (pairs) {
      // Contiguous runs of items per thread, of equal rows (an item goes to the thread whose
      // share holds its middle row): a thread widens each of its panels once, and a stacked
      // layout's per-thread tiles (model/stacked_gemm.h) land one share per thread.
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t total = int64_t(n_panels) * n;
      int64_t start = 0;
      for (int it = 0; it < items; ++it) {
        const int r = std::max(blocks[it % nb].n, 0);
        if (std::min<int64_t>(nt - 1, (2 * start + r) * nt / (2 * total)) == t) item(it);
        start += r;
      }
    } else {
#pragma omp for schedule(dynamic, 1)
      for (int it = 0; it < items; ++it) item(it);
    }
  }
  if (l.b != nullptr) {
    thread_local std::vector<float> bias;
    if (bias.size() < size_t(out)) bias.resize(out);
    to_f32(l.b->dtype, l.b->data, bias.data(), out);
    for (const LinearRows& b : blocks)
      for (int i = 0; i < b.n; ++i) {
        float* yi = b.y + size_t(i) * ldy;
        for (int o = 0; o < out; ++o) yi[o] += bias[o];
      }
  }
}

}  // namespace

bool pairs_blocks(const Linear& l) {
  return panel_count(l) < omp_get_max_threads();
}

void linear(const float* x, int n, const Linear& l, float* y, int ldy, ComputeDType dt) {
  const LinearRows one{x, n, y};
  linear_grouped({&one, 1}, l, ldy, dt);
}

void linear_grouped(std::span<const LinearRows> blocks, const Linear& l, int ldy, ComputeDType dt) {
  if (ldy == 0) ldy = l.out;
  // A block's product is one GEMM call per weight panel, of the block's own shape, and the
  // library runs every call on the calling thread (ops/gemm.h): so its bits are those of
  // linear() on it alone whichever thread runs it. Blocks large enough to split by panels do
  // so, as alone; the others (and stacked tiles) go to the threads as (panel, block) pairs where
  // there are fewer panels than threads (the small models, whose products are one panel and
  // would otherwise run on one thread); with enough panels they split by panel like any product,
  // each panel widened once.
  thread_local std::vector<LinearRows> parallel, pairs;
  parallel.clear();
  pairs.clear();
  const bool pair_blocks = pairs_blocks(l);
  for (const LinearRows& b : blocks)
    ((b.tile || !parallel_rows(b.n, l)) && pair_blocks ? pairs : parallel).push_back(b);
  if (!parallel.empty()) {
    // A lone small product stays on the calling thread: a parallel region costs more than it saves.
    const bool one = parallel.size() == 1 && !parallel_rows(parallel[0].n, l);
    linear_blocks(parallel, l, ldy, dt, one ? Spread::kSerial : Spread::kPanels);
  }
  if (!pairs.empty()) linear_blocks(pairs, l, ldy, dt, Spread::kPairs);
}

void linear_ref(const float* x, int n, const Linear& l, float* y, ComputeDType dt) {
  const bool bf16 = dt == ComputeDType::kBF16;
  std::vector<float> wrow(l.in), b(l.out, 0.0f), xr(x, x + size_t(n) * l.in);
  if (bf16) round_to_bf16(xr.data(), xr.data(), xr.size());
  if (l.b) to_f32(l.b->dtype, l.b->data, b.data(), l.out);
  for (int o = 0; o < l.out; ++o) {
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
