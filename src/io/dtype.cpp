#include "io/dtype.h"

#include <cstdint>
#include <cstring>

#include "util/error.h"
#include "util/half_rows.h"

namespace dllmq {

void to_f32(DType t, const void* src, float* dst, size_t n) {
  switch (t) {
    case DType::kF32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::kBF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      // Shift into the high half. `omp simd` says src and dst do not overlap: without it GCC 12
      // at -O2 kept this loop scalar (6% of a bf16-cache decode, reading the KV store).
      auto* d = reinterpret_cast<uint32_t*>(dst);
#pragma omp simd
      for (size_t i = 0; i < n; ++i) d[i] = static_cast<uint32_t>(s[i]) << 16;
      return;
    }
    case DType::kF16:  // F16C where the CPU has it (the fp16 KV store reads through here)
      f16_to_f32_rows(static_cast<const uint16_t*>(src), dst, n);
      return;
    case DType::kI32:
      break;
  }
  fail(
      "an I32 tensor was read as floating-point weights (a quantized tensor where a float one is "
      "expected)");
}

}  // namespace dllmq
