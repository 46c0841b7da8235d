// OpenMP's wait policy for every command (see the .cpp).
#pragma once

#include <string>

namespace dllmq::cli {

// Re-executes the process once with OMP_WAIT_POLICY=passive and GOMP_SPINCOUNT=10000 (a short
// spin, then sleep) unless either variable is set.
void ensure_passive_openmp();

// How OpenMP workers wait in this process, as libgomp read it at start: "passive, spin 10000"
// (OMP_WAIT_POLICY, GOMP_SPINCOUNT; "default" for a variable left unset).
std::string openmp_wait_description();

}  // namespace dllmq::cli
