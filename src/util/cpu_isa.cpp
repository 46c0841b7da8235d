#include "util/cpu_isa.h"

#include <cstdlib>
#include <string_view>

#include "util/error.h"

namespace dllmq {

bool isa_available(Isa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("f16c");
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  }
  return false;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kScalar:
      break;
  }
  return "scalar";
}

Isa parse_isa(const char* var, const char* value) {
  const std::string_view want(value);
  Isa isa;
  if (want == "scalar") {
    isa = Isa::kScalar;
  } else if (want == "avx2") {
    isa = Isa::kAvx2;
  } else if (want == "avx512") {
    isa = Isa::kAvx512;
  } else {
    fail("{}={}: expected scalar, avx2 or avx512", var, want);
  }
  if (!isa_available(isa)) fail("{}={}: this CPU does not support it", var, want);
  return isa;
}

Isa best_isa() {
  if (isa_available(Isa::kAvx512)) return Isa::kAvx512;
  if (isa_available(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kScalar;
}

Isa dispatch_isa() {
  static const Isa isa = [] {
    const char* env = std::getenv("DLLMQ_ISA");
    return env != nullptr && *env != '\0' ? parse_isa("DLLMQ_ISA", env) : best_isa();
  }();
  return isa;
}

bool cpu_has_avx512_bf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
}

}  // namespace dllmq
