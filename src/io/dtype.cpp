#include "io/dtype.h"

#include <cstdint>
#include <cstring>

#include "util/error.h"
#include "util/half.h"

namespace dllmq {

void to_f32(DType t, const void* src, float* dst, size_t n) {
  switch (t) {
    case DType::kF32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::kBF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      // Shift into the high half; the compiler vectorises this loop.
      auto* d = reinterpret_cast<uint32_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = static_cast<uint32_t>(s[i]) << 16;
      return;
    }
    case DType::kF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    case DType::kI32:
      break;
  }
  fail(
      "an I32 tensor was read as floating-point weights (a quantized tensor where a float one is "
      "expected)");
}

}  // namespace dllmq
