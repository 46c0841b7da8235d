// How OpenMP workers wait in this process (why they wait so: the .cpp; who sets it: the
// startup library, src/startup/openmp_wait_env.cpp).
#pragma once

#include <string>

namespace dllmq::cli {

// How OpenMP workers wait in this process, as libgomp read it at start: "passive, spin 10000"
// (OMP_WAIT_POLICY, GOMP_SPINCOUNT; "default" for a variable left unset), and ", user's" where the
// user set them.
std::string openmp_wait_description();

}  // namespace dllmq::cli
