// The packed-weight GEMM for AVX-512 (F, BW, VL, DQ) + FMA + F16C (compiled with those flags only
// in this file; called only where cpu_isa.h says the CPU has them). 16 floats per vector, 32-column
// panels, 12-row tiles: 24 accumulators, the two widened weight vectors and the broadcasts in the
// 32 registers, so each weight load and widening feeds 24 FMAs. Against 8-row tiles (16
// accumulators), alternated: no cache 9% faster on the d 1,024 model (4-17% a pair of runs), the
// dual-cache step the same (docs/performance.md).
// GCC 12 flags the deliberately undefined registers inside avx512fintrin.h's own intrinsics as
// maybe-uninitialized (GCC bug 105593) once they inline here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "ops/packed_kernel.h"
#include "ops/packed_kernel_impl.h"
#include "ops/simd_avx512.h"

namespace dllmq::kern {

void gemm_avx512(const GemmArgs& a) {
  run_gemm<Avx512>(a);
}

float fma_burn_avx512(long iters, float seed) {
  return fma_burn<Avx512, 24>(iters, seed);
}

float read_sum_avx512(const float* p, size_t n) {
  return read_sum<Avx512>(p, n);
}

}  // namespace dllmq::kern
