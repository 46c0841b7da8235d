// How a product over panels of packed weights is shared among the OpenMP threads, for the
// widening kernels (ops/linear.cpp) and the int8-activation kernel (ops/int8_act_gemm.h) alike.
#pragma once

#include <functional>
#include <span>

#include "ops/packed_kernel.h"

namespace dllmq {

// Products smaller than this many FLOPs stay on the calling thread: a parallel region costs more
// than it saves.
inline constexpr double kParallelFlops = 4e6;

// Runs fn(blocks, p0, p1) over panels [p0, p1) of a weight of `panels` panels: on the calling
// thread alone below kParallelFlops (or with one thread); otherwise once per thread, the threads
// splitting the panels evenly or, where the weight has fewer than two panels per thread, the rows
// of all blocks laid end to end (every thread then takes every panel). Each output is computed by
// exactly one call, so the split changes no bits of kernels whose outputs do not depend on their
// neighbours.
void run_panel_split(std::span<const kern::Block> blocks, int panels, double flops,
                     const std::function<void(std::span<const kern::Block>, int, int)>& fn);

}  // namespace dllmq
