#include "util/half_rows.h"

#include "util/error.h"
#include "util/half.h"

namespace dllmq {

namespace {

// Whether `isa` runs the F16C kernel (every vector level has F16C); an unavailable one throws.
bool use_f16c(Isa isa) {
  if (isa != Isa::kScalar && !isa_available(isa))
    fail("half_rows: the instruction set {} is not available on this CPU", isa_name(isa));
  return isa != Isa::kScalar;
}

// The choice for this process, made once (the conversions run per KV tile).
bool dispatched_f16c() {
  static const bool f16c = use_f16c(dispatch_isa());
  return f16c;
}

void f16_to_f32_scalar(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

void f32_to_f16_scalar(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

}  // namespace

void f16_to_f32_rows_isa(Isa isa, const uint16_t* src, float* dst, size_t n) {
  use_f16c(isa) ? kern::f16_to_f32_f16c(src, dst, n) : f16_to_f32_scalar(src, dst, n);
}

void f32_to_f16_rows_isa(Isa isa, const float* src, uint16_t* dst, size_t n) {
  use_f16c(isa) ? kern::f32_to_f16_f16c(src, dst, n) : f32_to_f16_scalar(src, dst, n);
}

void f16_to_f32_rows(const uint16_t* src, float* dst, size_t n) {
  dispatched_f16c() ? kern::f16_to_f32_f16c(src, dst, n) : f16_to_f32_scalar(src, dst, n);
}

void f32_to_f16_rows(const float* src, uint16_t* dst, size_t n) {
  dispatched_f16c() ? kern::f32_to_f16_f16c(src, dst, n) : f32_to_f16_scalar(src, dst, n);
}

}  // namespace dllmq
