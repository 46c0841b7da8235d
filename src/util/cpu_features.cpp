#include "util/cpu_features.h"

#include <cpuid.h>

#include <cstdint>

namespace dllmq {

namespace {

bool bit(unsigned reg, int n) {
  return ((reg >> n) & 1u) != 0;
}

// XCR0: which register states the OS saves on a context switch (Intel SDM vol. 1, 13.3).
std::uint64_t read_xcr0() {
  unsigned lo = 0;
  unsigned hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return f;
  const bool osxsave = bit(c, 27);
  const bool avx_cpu = bit(c, 28);
  const bool fma_cpu = bit(c, 12);
  const bool f16c_cpu = bit(c, 29);
  if (!osxsave || !avx_cpu) return f;
  const std::uint64_t xcr0 = read_xcr0();
  const bool ymm_state = (xcr0 & 0x6) == 0x6;    // SSE + AVX state
  const bool zmm_state = (xcr0 & 0xe6) == 0xe6;  // + opmask, ZMM_Hi256, Hi16_ZMM
  if (!ymm_state) return f;
  f.avx = true;
  f.fma = fma_cpu;
  f.f16c = f16c_cpu;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = bit(b, 5);
  if (zmm_state) {
    f.avx512f = bit(b, 16);
    f.avx512dq = bit(b, 17);
    f.avx512bw = bit(b, 30);
    f.avx512vnni = f.avx512f && bit(c, 11);
    f.avx512vl = bit(b, 31);
    unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    f.avx512bf16 = f.avx512f && bit(a1, 5);
  }
  const bool tile_state = (xcr0 & 0x60000) == 0x60000;                  // XTILECFG + XTILEDATA
  f.amx_bf16 = tile_state && bit(d, 24) && bit(d, 22) && f.avx512bf16;  // AMX-TILE, AMX-BF16
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

}  // namespace dllmq
