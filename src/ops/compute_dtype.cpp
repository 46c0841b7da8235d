// Names of the compute precisions (--dtype), apart from the GEMM code so that option checking
// links without it.
#include "ops/linear.h"
#include "util/error.h"

namespace dllmq {

ComputeDType parse_compute_dtype(const std::string& s) {
  if (s == "fp32" || s == "f32" || s == "float32") return ComputeDType::kF32;
  if (s == "bf16" || s == "bfloat16") return ComputeDType::kBF16;
  fail("unknown compute dtype '{}': expected fp32 or bf16", s);
}

const char* compute_dtype_name(ComputeDType d) {
  return d == ComputeDType::kBF16 ? "bf16" : "fp32";
}

}  // namespace dllmq
