// Rows of IEEE half <-> f32 on the vector units: the dense fp16 KV store's reads and writes (and
// f16 weights read as f32). The build's portable base (x86-64-v2) has no F16C, so a _Float16
// conversion there is a libgcc call per value: reading a layer's fp16 cache that way took 8x as
// long as attention over the same rows in fp32 (bench/attention_bench, LLaDA-8B heads).
// Both directions are exact IEEE operations (widening is exact; narrowing rounds to nearest
// even, subnormals and infinities kept), so the F16C path gives the bits of the scalar one on
// every value; tests compare them exhaustively. Dispatched on util/cpu_isa.h's set (F16C is
// part of its AVX2 level).
#pragma once

#include <cstddef>
#include <cstdint>

#include "util/cpu_isa.h"

namespace dllmq {

void f16_to_f32_rows(const uint16_t* src, float* dst, size_t n);
void f32_to_f16_rows(const float* src, uint16_t* dst, size_t n);

// The same on a given instruction set (tests): kScalar is the portable twin; kAvx2 and kAvx512
// both run the F16C kernel.
void f16_to_f32_rows_isa(Isa isa, const uint16_t* src, float* dst, size_t n);
void f32_to_f16_rows_isa(Isa isa, const float* src, uint16_t* dst, size_t n);

namespace kern {
// The F16C kernels (util/half_rows_f16c.cpp, compiled with AVX2/F16C flags).
void f16_to_f32_f16c(const uint16_t* src, float* dst, size_t n);
void f32_to_f16_f16c(const float* src, uint16_t* dst, size_t n);
}  // namespace kern

}  // namespace dllmq
