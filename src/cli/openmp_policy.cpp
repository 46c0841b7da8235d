// GNU OpenMP's default wait policy spins idle workers for ~300,000 pause loops (milliseconds)
// after each parallel region. On the shared or virtualised 2-core machines this project runs on,
// that made two threads 10-20x slower than one on the embedded model (100 synth problems, dual
// cache: 48.7 s with 2 threads spinning, 2.9 s passive, 2.4 s with 1 thread; measured while
// oneDNN still opened a nested team, with fresh threads, for every small product) and starved the
// server's decoder threads. A purely passive worker sleeps at once, and waking it costs a
// futex and a vCPU wake-up, ~70 us on the 2-vCPU Xeon, for each of the ~35 regions of a
// batched forward of the embedded model. So workers spin briefly (GOMP_SPINCOUNT=10000, ~0.1 ms
// by libgomp's estimate) before sleeping: the gaps inside a forward are shorter, the gaps
// between forwards and commands longer. Measured on the Xeon (docs/server.md): batched decoding
// in process 10-18% faster, the batched server 5-25%, one request at a time unchanged (+12% CPU
// for the same wall time); with two CPU hogs beside it, batched 11% faster than passive, where
// the default spin count made it 2.7x slower. OMP_WAIT_POLICY or GOMP_SPINCOUNT set by the user
// are left alone. libgomp reads them when it loads, before main(): a startup library sets them
// (src/startup/openmp_wait_env.cpp, which says how it comes first).
#include "cli/openmp_policy.h"

#include <cstdlib>
#include <string>

#include "startup/openmp_wait_env.h"

namespace dllmq::cli {

std::string openmp_wait_description() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  return std::string(policy ? policy : "default") + ", spin " + (spin ? spin : "default") +
         (dllmq_openmp_wait_defaults_set() ? "" : ", user's");
}

}  // namespace dllmq::cli
