// The KV codes' dequantization for AVX2 + FMA + F16C (compiled with those flags only in this file;
// called only where cpu_isa.h says the CPU has them): quant/dequant_kernel_impl.h on
// ops/simd_avx2.h.
#include "ops/simd_avx2.h"
#include "quant/dequant_kernel.h"
#include "quant/dequant_kernel_impl.h"

namespace dllmq::kern {

DequantRowFn dequant_kernel_avx2(bool lut, int bits) {
  return dequant_kernel<Avx2>(lut, bits);
}

}  // namespace dllmq::kern
