// Measured ceilings of this machine for roofline reports (dllmq bench): the GEMM backend's
// throughput on the engine's own projection path, and the memory read bandwidth, both with all
// OpenMP threads, measured in the same process as the figures they are compared with.
#pragma once

#include "io/dtype.h"
#include "ops/linear.h"

namespace dllmq {

// GFLOP/s of linear() on x [m, k] and random weights [n, k] of `wdtype`, best of repeats lasting
// at least `min_s` seconds in all.
double measure_linear_gflops(int m, int n, int k, DType wdtype, ComputeDType dt,
                             double min_s = 0.3);

// GB/s of a parallel streaming read of `bytes` (beyond the last-level cache; freed before the
// model is paged in, so it never sets the peak RSS of a real model), best of
// repeats lasting at least `min_s` seconds in all.
double measure_read_gbps(size_t bytes = size_t(64) << 20, double min_s = 0.3);

}  // namespace dllmq
