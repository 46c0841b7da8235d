#include "util/cpu_isa.h"

#include <cstdlib>
#include <string_view>

#include "util/cpu_features.h"
#include "util/error.h"

namespace dllmq {

bool isa_available(Isa isa) {
  const CpuFeatures& f = cpu_features();
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return f.avx2 && f.fma && f.f16c;
    case Isa::kAvx512:
      return f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.fma && f.f16c;
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
  return cpu_features().avx512bf16;
}

}  // namespace dllmq
