// Where the first non-finite float (NaN, +inf or -inf) of an array is, on the vector units.
//
// Decoding checks every logit the LM head computed before ranking (decode/generate.cpp), and
// every KV store every K/V row it is given (quant/outliers.h, check_finite): a NaN or inf from
// bad weights must stop the run, not rank garbage and exit 0. A loop that returns
// at the first bad value does not vectorise, and on one thread it ran outside the forwards'
// parallel phases: at 16 rows x 32,000 logits a step it held the decode's sampling phase under
// 1.85 cores busy. The scan below folds 16 lanes of x * 0 (0 for a finite x, NaN otherwise:
// inf * 0 and NaN * 0 are NaN) and looks for the exact index only when a lane went NaN.
#pragma once

#include <cstddef>

namespace dllmq {

// The index of the first non-finite value of p[0, n), or n when every value is finite.
size_t first_non_finite(const float* p, size_t n);

}  // namespace dllmq
