// The packed-weight GEMM for AVX-512 (F, BW, VL, DQ) + FMA + F16C (compiled with those flags only
// in this file; called only where cpu_isa.h says the CPU has them). 16 floats per vector, 32-column
// panels, 8-row tiles: 16 accumulators cover the 4-cycle FMA latency on two FMA pipes, with the
// two widened weight vectors and a broadcast in 19 of the 32 registers.
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
