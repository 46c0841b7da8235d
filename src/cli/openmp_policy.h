// OpenMP's wait policy for every command (see the .cpp).
#pragma once

namespace dllmq::cli {

// Re-executes the process once with OMP_WAIT_POLICY=passive and GOMP_SPINCOUNT=10000 (a short
// spin, then sleep) unless either variable is set.
void ensure_passive_openmp();

}  // namespace dllmq::cli
