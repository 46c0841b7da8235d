// Measured ceilings of this machine for roofline reports (dllmq bench): the GEMM backend's
// throughput on the engine's own projection path, and the memory read bandwidth, both with all
// OpenMP threads, measured in the same process as the figures they are compared with.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "io/dtype.h"
#include "ops/linear.h"

namespace dllmq {

// GFLOP/s of linear() on x [m, k] and random weights [n, k] of `wdtype`, best of repeats lasting
// at least `min_s` seconds in all.
double measure_linear_gflops(int m, int n, int k, DType wdtype, ComputeDType dt,
                             double min_s = 0.3);

// Bytes a decode step reads: a weight's packed panels or tiles, or its stored tensor.
struct ByteRange {
  const void* data = nullptr;
  size_t bytes = 0;
};

// GB/s of a parallel streaming read of `ranges` (every thread its share of each, with the vector
// width the kernels load weights with), best of repeats lasting at least `min_s` seconds in all.
// Over a model's own weights (weight_ranges) it is how fast this machine reads what a step
// streams, from whichever level of the memory holds it, with no extra memory.
double measure_read_gbps(std::span<const ByteRange> ranges, double min_s = 0.3);

// The same over a buffer of `bytes` of its own (64 MiB: beyond most L2s, not beyond every L3).
double measure_read_gbps(size_t bytes = size_t(64) << 20, double min_s = 0.3);

// The bytes each of `l`'s products reads: its int8-activation codes (--w8a8), its packed weight,
// or else its stored tensor (nothing for integer codes decoded on the fly).
void append_weight_range(const Linear& l, std::vector<ByteRange>& out);

}  // namespace dllmq
