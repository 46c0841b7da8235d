#include "util/half_rows.h"

#include "util/error.h"
#include "util/half.h"

namespace dllmq {

namespace {

bool use_f16c(Isa isa) {
  if (isa != Isa::kScalar && !isa_available(isa))
    fail("half_rows: the instruction set {} is not available on this CPU", isa_name(isa));
  return isa != Isa::kScalar;
}

}  // namespace

void f16_to_f32_rows_isa(Isa isa, const uint16_t* src, float* dst, size_t n) {
  if (use_f16c(isa)) {
    kern::f16_to_f32_f16c(src, dst, n);
    return;
  }
  for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

void f32_to_f16_rows_isa(Isa isa, const float* src, uint16_t* dst, size_t n) {
  if (use_f16c(isa)) {
    kern::f32_to_f16_f16c(src, dst, n);
    return;
  }
  for (size_t i = 0; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

void f16_to_f32_rows(const uint16_t* src, float* dst, size_t n) {
  static const Isa isa = dispatch_isa();
  f16_to_f32_rows_isa(isa, src, dst, n);
}

void f32_to_f16_rows(const float* src, uint16_t* dst, size_t n) {
  static const Isa isa = dispatch_isa();
  f32_to_f16_rows_isa(isa, src, dst, n);
}

}  // namespace dllmq
