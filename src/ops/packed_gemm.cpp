#include "ops/packed_gemm.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "util/best_time.h"
#include "util/error.h"
#include "util/half.h"

namespace dllmq {

namespace {

kern::WType wtype(DType dt) {
  switch (dt) {
    case DType::kF32:
      return kern::WType::kF32;
    case DType::kBF16:
      return kern::WType::kBF16;
    case DType::kF16:
    case DType::kI32:
      break;
  }
  return kern::WType::kF16;
}

// Column of slot `s` (of 2 * lanes) in a panel's k row.
int slot_column(DType dt, int lanes, int s) {
  if (dt != DType::kBF16) return s;
  return (s & 1) ? lanes + s / 2 : s / 2;
}

// `src` is read through memcpy: a safetensors file aligns a tensor's data only to its offset in
// the file, so a mapped f32 (or 16-bit) tensor may start at any byte (UBSan: misaligned load).
template <typename E>
void pack_panels(const void* src, DType dt, int n, int k, int lanes, E* dst, bool parallel) {
  const int nr = 2 * lanes;
  const int panels = (n + nr - 1) / nr;
  const auto* bytes = static_cast<const unsigned char*>(src);
#pragma omp parallel for schedule(static) if (parallel && panels > 1)
  for (int p = 0; p < panels; ++p) {
    E* d = dst + size_t(p) * nr * k;
    const unsigned char* col[64];
    for (int s = 0; s < nr; ++s) {
      const int c = p * nr + slot_column(dt, lanes, s);
      col[s] = c < n ? bytes + size_t(c) * k * sizeof(E) : nullptr;
    }
    for (int kk = 0; kk < k; ++kk)
      for (int s = 0; s < nr; ++s) {
        E v = E(0);
        if (col[s]) std::memcpy(&v, col[s] + size_t(kk) * sizeof(E), sizeof(E));
        d[size_t(kk) * nr + s] = v;
      }
  }
}

}  // namespace

void PackedWeight::Free::operator()(void* p) const {
  std::free(p);
}

int isa_lanes(Isa isa) {
  return isa == Isa::kAvx512 ? 16 : 8;
}

std::shared_ptr<const PackedWeight> pack_weight(const void* w, DType dt, int n, int k, Isa isa,
                                                bool parallel) {
  auto pw = std::make_shared<PackedWeight>();
  pw->dtype = dt;
  pw->n = n;
  pw->k = k;
  pw->isa = isa;
  pw->lanes = isa_lanes(isa);
  const size_t bytes = (pw->bytes() + 63) / 64 * 64;
  void* buf = std::aligned_alloc(64, bytes > 0 ? bytes : 64);
  if (buf == nullptr) throw std::bad_alloc();
  pw->buf.reset(static_cast<uint8_t*>(buf));
  if (dt == DType::kF32)
    pack_panels(w, dt, n, k, pw->lanes, static_cast<float*>(buf), parallel);
  else
    pack_panels(w, dt, n, k, pw->lanes, static_cast<uint16_t*>(buf), parallel);
  return pw;
}

std::shared_ptr<const PackedWeight> pack_quant_weight(const QuantMatrix& m, Isa isa,
                                                      bool parallel) {
  auto pw = std::make_shared<PackedWeight>();
  pw->bits = m.bits;
  pw->n = m.n;
  pw->k = m.k;
  pw->isa = isa;
  pw->lanes = isa_lanes(isa);
  pw->n_groups = m.n_groups;
  const int lanes = pw->lanes, nr = 2 * lanes, panels = pw->panels(), k = m.k, G = m.n_groups;
  std::vector<int32_t> order = reduction_order(m);
  pw->gstart.assign(G + 1, 0);
  for (int kk = 0; kk < k; ++kk) pw->gstart[m.g_idx[kk] + 1]++;
  for (int g = 0; g < G; ++g) pw->gstart[g + 1] += pw->gstart[g];
  bool identity = true;
  for (int kk = 0; kk < k; ++kk) identity = identity && order[kk] == kk;
  // Signed codes when every zero point is 2^(bits - 1) (the symmetric scheme; a GPTQ checkpoint
  // whose zeros say so): q - z is stored, and the kernels skip the subtraction.
  const int32_t mid = 1 << (m.bits - 1);
  pw->signed_codes = std::all_of(m.zero.begin(), m.zero.end(), [&](int32_t z) { return z == mid; });
  const size_t row_bytes = size_t(nr) * m.bits / 8;  // one k of a panel
  const size_t bytes = size_t(panels) * row_bytes * k;
  void* buf = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
  if (buf == nullptr) throw std::bad_alloc();
  pw->buf.reset(static_cast<uint8_t*>(buf));
  auto* dst = static_cast<uint8_t*>(buf);
  pw->scale.assign(size_t(panels) * G * nr, 0.0f);
  if (!pw->signed_codes) pw->zero.assign(size_t(panels) * G * nr, 0);
#pragma omp parallel for schedule(static) if (parallel && panels > 1)
  for (int p = 0; p < panels; ++p) {
    uint8_t* d = dst + size_t(p) * row_bytes * k;
    for (int s = 0; s < nr; ++s) {
      const int c = p * nr + s;
      if (c >= m.n) continue;  // padding: codes 0, scale 0, zero 0 -> weight 0
      for (int g = 0; g < G; ++g) {
        pw->scale[(size_t(p) * G + g) * nr + s] = m.scale[size_t(g) * m.n + c];
        if (!pw->signed_codes) pw->zero[(size_t(p) * G + g) * nr + s] = m.zero[size_t(g) * m.n + c];
      }
    }
    for (int kp = 0; kp < k; ++kp) {
      const int kk = order[kp];
      uint8_t* row = d + size_t(kp) * row_bytes;
      std::memset(row, 0, row_bytes);
      for (int s = 0; s < nr; ++s) {
        const int c = p * nr + s;
        // signed codes: q - 2^(bits - 1) in two's complement (a nibble for 4 bits)
        const uint8_t q = c >= m.n           ? 0
                          : pw->signed_codes ? uint8_t((m.q[size_t(c) * k + kk] - mid) & 255)
                                             : m.q[size_t(c) * k + kk];
        if (m.bits == 8)
          row[s] = q;
        else if (s < lanes)
          row[s] |= q & 15;
        else
          row[s - lanes] |= uint8_t(q << 4);
      }
    }
  }
  if (!identity) pw->order = std::move(order);
  return pw;
}

void dequant_packed(const PackedWeight& w, int r0, int rows, int c0, int cols, float* dst,
                    ptrdiff_t ldd) {
  const int nr = 2 * w.lanes, G = w.n_groups;
  // Packed position and group of each wanted column.
  std::vector<int32_t> pos(cols), grp(cols);
  std::vector<int32_t> inv;
  if (!w.order.empty()) {
    inv.resize(w.k);
    for (int kp = 0; kp < w.k; ++kp) inv[w.order[kp]] = kp;
  }
  for (int j = 0; j < cols; ++j) {
    pos[j] = inv.empty() ? c0 + j : inv[c0 + j];
    grp[j] =
        int32_t(std::upper_bound(w.gstart.begin(), w.gstart.end(), pos[j]) - w.gstart.begin()) - 1;
  }
  for (int r = 0; r < rows; ++r) {
    const int c = r0 + r, p = c / nr, s = c % nr;
    for (int j = 0; j < cols; ++j) {
      int32_t z;
      const int v = packed_code(w, c, pos[j], grp[j], &z);
      dst[r * ldd + j] = float(v) * w.scale[(size_t(p) * G + grp[j]) * nr + s];
    }
  }
}

void gather_reduction_order(const PackedWeight& w, const float* x, int m, ptrdiff_t ldx,
                            float* dst) {
  for (int i = 0; i < m; ++i)
    for (int kp = 0; kp < w.k; ++kp) dst[size_t(i) * w.k + kp] = x[i * ldx + w.order[kp]];
}

void quant_gemm_ref(const float* x, int m, int ldx, const QuantMatrix& q, float* y, int ldy) {
  const std::vector<int32_t> order = reduction_order(q);
  for (int c = 0; c < q.n; ++c)
    for (int i = 0; i < m; ++i) {
      float acc = 0.0f;
      size_t kp = 0;
      for (int g = 0; g < q.n_groups; ++g) {
        float a = 0.0f;  // the group's chain over its input columns, in the reduction order
        for (; kp < order.size() && q.g_idx[size_t(order[kp])] == g; ++kp) {
          const int kk = order[kp];
          const int d = int32_t(q.q[size_t(c) * q.k + kk]) - q.zero[size_t(g) * q.n + c];
          a = std::fmaf(x[size_t(i) * ldx + kk], float(d), a);
        }
        acc = std::fmaf(a, q.scale[size_t(g) * q.n + c], acc);
      }
      y[size_t(i) * ldy + c] = acc;
    }
}

// DLLMQ_PANEL_PREFETCH=0 turns the kernels' next-group prefetch off, to measure what it does.
static bool next_group_prefetch() {
  static const bool on = [] {
    const char* e = std::getenv("DLLMQ_PANEL_PREFETCH");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

void packed_gemm(const PackedWeight& w, std::span<const kern::Block> blocks, int p0, int p1,
                 bool round_w, bool scalar, int k_block, int panel_group) {
  kern::GemmArgs a{blocks.data(),
                   int(blocks.size()),
                   w.data(),
                   w.bits == 0      ? wtype(w.dtype)
                   : w.signed_codes ? (w.bits == 8 ? kern::WType::kS8 : kern::WType::kS4)
                                    : (w.bits == 8 ? kern::WType::kQ8 : kern::WType::kQ4),
                   w.n,
                   w.k,
                   w.lanes,
                   p0,
                   p1,
                   round_w && w.bits == 0 && w.dtype != DType::kBF16,
                   {}};
  if (w.bits != 0)
    a.q = {w.scale.data(), w.signed_codes ? nullptr : w.zero.data(), w.gstart.data(), w.n_groups};
  a.prefetch_next_group = next_group_prefetch();
  a.kc = k_block;
  a.group = panel_group;
  if (w.lanes == 16) {
    if (!scalar && w.isa == Isa::kAvx512) return kern::gemm_avx512(a);
    return kern::gemm_scalar16(a);
  }
  if (!scalar && w.isa == Isa::kAvx2) return kern::gemm_avx2(a);
  kern::gemm_scalar8(a);
}

bool bf16dot_available(const PackedWeight& w) {
  return w.bits == 0 && !w.amx && w.dtype == DType::kBF16 && w.isa == Isa::kAvx512 &&
         isa_available(Isa::kAvx512) && cpu_has_avx512_bf16();
}

void packed_gemm_bf16dot(const PackedWeight& w, std::span<const kern::Block> blocks, int p0,
                         int p1) {
  if (!bf16dot_available(w))
    fail("packed_gemm_bf16dot: needs bf16 weights packed for AVX-512 on a CPU with AVX512-BF16");
  const kern::GemmArgs a{blocks.data(),
                         int(blocks.size()),
                         w.data(),
                         kern::WType::kBF16,
                         w.n,
                         w.k,
                         w.lanes,
                         p0,
                         p1,
                         false,
                         {}};
  kern::gemm_bf16dot_avx512(a);
}

namespace {
// vdpbf16ps reads a denormal input as zero and flushes a denormal result to zero.
float flush_denormal(float v) {
  return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v;
}
}  // namespace

void gemm_bf16dot_ref(const float* x, int m, int ldx, const uint16_t* w, int n, int k, float* y,
                      int ldy) {
  std::vector<float> xr(size_t(m) * k), wr(k);
  for (int i = 0; i < m; ++i)
    for (int kk = 0; kk < k; ++kk)
      xr[size_t(i) * k + kk] =
          flush_denormal(bf16_to_f32(f32_to_bf16(flush_denormal(x[size_t(i) * ldx + kk]))));
  for (int c = 0; c < n; ++c) {
    for (int kk = 0; kk < k; ++kk) wr[kk] = flush_denormal(bf16_to_f32(w[size_t(c) * k + kk]));
    for (int i = 0; i < m; ++i) {
      const float* xi = xr.data() + size_t(i) * k;
      float acc = 0.0f;
      for (int kk = 0; kk < k; kk += 2) {
        const float x1 = kk + 1 < k ? xi[kk + 1] : 0.0f, w1 = kk + 1 < k ? wr[kk + 1] : 0.0f;
        acc = flush_denormal(std::fmaf(x1, w1, acc));
        acc = flush_denormal(std::fmaf(xi[kk], wr[kk], acc));
      }
      y[size_t(i) * ldy + c] = acc;
    }
  }
}

void gemm_fma_ref(const float* x, int m, int ldx, const void* w, DType dt, int n, int k,
                  bool round_w, float* y, int ldy) {
  const size_t esz = dtype_size(dt);
  std::vector<float> row(k);
  for (int c = 0; c < n; ++c) {
    to_f32(dt, static_cast<const uint8_t*>(w) + size_t(c) * k * esz, row.data(), k);
    if (round_w && dt != DType::kBF16)
      for (float& v : row) v = bf16_to_f32(f32_to_bf16(v));
    for (int i = 0; i < m; ++i) {
      float acc = 0.0f;
      for (int kk = 0; kk < k; ++kk) acc = std::fmaf(x[size_t(i) * ldx + kk], row[kk], acc);
      y[size_t(i) * ldy + c] = acc;
    }
  }
}

double measure_fma_peak_gflops(Isa isa, double min_s) {
  if (isa == Isa::kScalar || !isa_available(isa)) return 0.0;
  constexpr long kIters = 1 << 20;
  volatile float sink = 0.0f;
  const bool wide = isa == Isa::kAvx512;
  const double s = best_time(
      [&] {
        sink = wide ? kern::fma_burn_avx512(kIters, sink) : kern::fma_burn_avx2(kIters, sink);
      },
      min_s);
  const long flops = wide ? kern::kBurnFlopsAvx512 : kern::kBurnFlopsAvx2;
  return double(kIters) * flops / s * 1e-9;
}

double measure_bf16dot_peak_gflops(double min_s) {
  if (!isa_available(Isa::kAvx512) || !cpu_has_avx512_bf16()) return 0.0;
  constexpr long kIters = 1 << 20;
  volatile float sink = 0.0f;
  const double s = best_time([&] { sink = kern::dp_burn_avx512bf16(kIters, sink); }, min_s);
  return double(kIters) * kern::kBurnFlopsBf16Dot / s * 1e-9;
}

namespace kern {

long l2_cache_bytes() {
  static const long bytes = [] {
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l2 > 0 ? l2 : 1L << 20;
  }();
  return bytes;
}

int k_block_budget_floats() {
  static const int floats =
      int(std::clamp(l2_cache_bytes() / 8 * 3 / long(sizeof(float)), 16384L, 1L << 20));
  return floats;
}

}  // namespace kern

}  // namespace dllmq
