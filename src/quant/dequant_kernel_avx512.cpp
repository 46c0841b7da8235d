// The KV codes' dequantization for AVX-512 (F, BW, VL, DQ) + FMA + F16C (compiled with those flags
// only in this file; called only where cpu_isa.h says the CPU has them):
// quant/dequant_kernel_impl.h on ops/simd_avx512.h.
#include "ops/simd_avx512.h"
#include "quant/dequant_kernel.h"
#include "quant/dequant_kernel_impl.h"

namespace dllmq::kern {

DequantRowFn dequant_kernel_avx512(bool lut, int bits) {
  return dequant_kernel<Avx512>(lut, bits);
}

}  // namespace dllmq::kern
