// Storage dtypes of checkpoint tensors and KV rows.
#pragma once

#include <cstddef>
#include <string_view>

namespace dllmq {

// kI32: integer tensors of quantized checkpoints (GPTQ qweight/qzeros/g_idx); never widened.
enum class DType { kF32, kF16, kBF16, kI32 };

inline size_t dtype_size(DType t) {
  return t == DType::kF32 || t == DType::kI32 ? 4 : 2;
}

inline std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kI32:
      return "I32";
  }
  return "?";
}

// Converts `n` elements of `src` (stored as `t`) to f32; throws for kI32 (not a float tensor).
void to_f32(DType t, const void* src, float* dst, size_t n);

}  // namespace dllmq
