// Internal: the dequantization kernels of bitpack.h with the instruction set chosen by the
// caller, so tests can compare every path the CPU has within one process (quant_isa()'s choice
// is made once per process).
#pragma once

#include <cstdint>

#include "util/cpu_isa.h"

namespace dllmq {

// As dequant_uniform_row / dequant_lut_row, on `isa`; an unavailable isa throws dllmq::Error.
void dequant_uniform_row_isa(Isa isa, const uint8_t* packed, int n, int bits, const float* scale,
                             const float* zero, int group, float* out);
void dequant_lut_row_isa(Isa isa, const uint8_t* packed, int n, int bits, const float* lut,
                         const float* range, const float* offset, int group, float* out);

}  // namespace dllmq
