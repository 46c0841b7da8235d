#include "ops/amx_gemm.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "ops/amx_kernel.h"
#include "util/cpu_features.h"
#include "util/cpu_isa.h"
#include "util/error.h"
#include "util/half.h"

namespace dllmq {

namespace {

// Linux keeps the 8 KiB tile data state off until a process asks for it (arch_prctl
// ARCH_REQ_XCOMP_PERM with XFEATURE_XTILEDATA, kernel 5.16+); a tile instruction before that
// is killed with SIGILL. The grant covers every thread of the process, present and future.
bool request_tile_state() {
  constexpr int kArchReqXcompPerm = 0x1023;
  constexpr int kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

}  // namespace

bool amx_available() {
  static const bool ok =
      cpu_features().amx_bf16 && dispatch_isa() == Isa::kAvx512 && request_tile_state();
  return ok;
}

std::shared_ptr<const PackedWeight> pack_weight_amx(const void* w, DType dt, int n, int k,
                                                    bool parallel) {
  if (!amx_available()) fail("pack_weight_amx: this CPU or process cannot run AMX tiles");
  auto pw = std::make_shared<PackedWeight>();
  pw->dtype = DType::kBF16;
  pw->n = n;
  pw->k = k;
  pw->isa = Isa::kAvx512;
  pw->lanes = 16;
  pw->amx = true;
  pw->k_pad = (k + 31) / 32 * 32;
  const size_t bytes = std::max<size_t>(pw->bytes(), 64);
  void* buf = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (buf == nullptr) throw std::bad_alloc();
  pw->buf.reset(static_cast<uint8_t*>(buf));
  auto* dst = static_cast<uint16_t*>(buf);
  const int panels = pw->panels(), nkb = pw->k_pad / 32;
  const size_t esize = dtype_size(dt);
#pragma omp parallel if (parallel && size_t(n) * k > 65536)
  {
    std::vector<float> row(k);
#pragma omp for schedule(static)
    for (int p = 0; p < panels; ++p) {
      uint16_t* pd = dst + size_t(p) * nkb * (kern::kAmxBlockBytes / 2);
      std::memset(pd, 0, size_t(nkb) * kern::kAmxBlockBytes);
      for (int j = 0; j < 32 && p * 32 + j < n; ++j) {
        const int c = p * 32 + j, half = j / 16, col = j % 16;
        const auto* src = static_cast<const uint8_t*>(w) + size_t(c) * k * esize;
        to_f32(dt, src, row.data(), size_t(k));  // bf16 and f16 widen exactly
        for (int kk = 0; kk < k; ++kk) {
          const int kb = kk / 32, pair = (kk % 32) / 2, e = kk % 2;
          pd[size_t(kb) * 1024 + half * 512 + pair * 32 + col * 2 + e] = f32_to_bf16(row[kk]);
        }
      }
    }
  }
  return pw;
}

void packed_gemm_amx(const PackedWeight& w, std::span<const kern::Block> blocks, int p0, int p1) {
  if (!w.amx) fail("packed_gemm_amx: the weights are not packed for AMX");
  thread_local std::vector<uint16_t> xb;  // this thread's A operand (64 bytes of slack to align)
  for (const kern::Block& b : blocks) {
    if (b.m <= 0) continue;
    const size_t need = size_t((b.m + 15) / 16 * 16) * w.k_pad + 32;
    if (xb.size() < need) xb.resize(need);
    auto* xa =
        reinterpret_cast<uint16_t*>((reinterpret_cast<uintptr_t>(xb.data()) + 63) & ~uintptr_t(63));
    kern::amx_convert_rows(b.x, b.ldx, b.m, w.k, xa, w.k_pad);
    kern::amx_gemm_bf16(xa, b.m, w.k_pad, static_cast<const uint16_t*>(w.data()), w.n, p0, p1, b.y,
                        b.ldy);
  }
}

double measure_amx_peak_gflops(double min_s) {
  if (!amx_available()) return 0.0;
  constexpr long kIters = 20000;
  double best = 0.0, spent = 0.0;
  volatile float sink = 0.0f;
  while (spent < min_s) {
    const auto t0 = std::chrono::steady_clock::now();
    sink = sink + kern::amx_burn(kIters);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    spent += s;
    best = std::max(best, 4.0 * 16384.0 * kIters / s * 1e-9);
  }
  return best;
}

}  // namespace dllmq
