#include "ops/packed_gemm.h"

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
      break;
  }
  return kern::WType::kF16;
}

// Column of slot `s` (of 2 * lanes) in a panel's k row.
int slot_column(DType dt, int lanes, int s) {
  if (dt != DType::kBF16) return s;
  return (s & 1) ? lanes + s / 2 : s / 2;
}

template <typename E>
void pack_panels(const E* src, DType dt, int n, int k, int lanes, E* dst, bool parallel) {
  const int nr = 2 * lanes;
  const int panels = (n + nr - 1) / nr;
#pragma omp parallel for schedule(static) if (parallel && panels > 1)
  for (int p = 0; p < panels; ++p) {
    E* d = dst + size_t(p) * nr * k;
    const E* col[64];
    for (int s = 0; s < nr; ++s) {
      const int c = p * nr + slot_column(dt, lanes, s);
      col[s] = c < n ? src + size_t(c) * k : nullptr;
    }
    for (int kk = 0; kk < k; ++kk)
      for (int s = 0; s < nr; ++s) d[size_t(kk) * nr + s] = col[s] ? col[s][kk] : E(0);
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
    pack_panels(static_cast<const float*>(w), dt, n, k, pw->lanes, static_cast<float*>(buf),
                parallel);
  else
    pack_panels(static_cast<const uint16_t*>(w), dt, n, k, pw->lanes, static_cast<uint16_t*>(buf),
                parallel);
  return pw;
}

void packed_gemm(const PackedWeight& w, std::span<const kern::Block> blocks, int p0, int p1,
                 bool round_w, bool scalar) {
  const kern::GemmArgs a{blocks.data(),
                         int(blocks.size()),
                         w.data(),
                         wtype(w.dtype),
                         w.n,
                         w.k,
                         w.lanes,
                         p0,
                         p1,
                         round_w && w.dtype != DType::kBF16};
  if (w.lanes == 16) {
    if (!scalar && w.isa == Isa::kAvx512) return kern::gemm_avx512(a);
    return kern::gemm_scalar16(a);
  }
  if (!scalar && w.isa == Isa::kAvx2) return kern::gemm_avx2(a);
  kern::gemm_scalar8(a);
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

}  // namespace dllmq
