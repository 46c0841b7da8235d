// The packed-weight GEMM for AVX2 + FMA + F16C (compiled with -mavx2 -mfma -mf16c only in this
// file; called only where cpu_isa.h says the CPU has them). 8 floats per vector, 16-column
// panels, 6-row tiles: 12 accumulators cover the 4-cycle FMA latency on two FMA pipes, with the
// two widened weight vectors and a broadcast in the 16 registers.
#include <immintrin.h>

#include "ops/packed_kernel.h"
#include "ops/packed_kernel_impl.h"
#include "ops/simd_avx2.h"

namespace dllmq::kern {

void gemm_avx2(const GemmArgs& a) {
  run_gemm<Avx2>(a);
}

float fma_burn_avx2(long iters, float seed) {
  return fma_burn<Avx2, 12>(iters, seed);
}

float read_sum_avx2(const float* p, size_t n) {
  return read_sum<Avx2>(p, n);
}

}  // namespace dllmq::kern
