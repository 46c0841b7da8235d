// A shared library of one constructor: OMP_WAIT_POLICY=passive and GOMP_SPINCOUNT=10000 (a
// short spin, then sleep; why in cli/openmp_policy.cpp), unless the user set either.
//
// libgomp reads both once, in its own constructor, before any constructor of the executable
// runs. The executable's preinit array runs earlier still, but libc's initializer (after it)
// resets `environ` to the process's original array, dropping what setenv added there. A shared
// library's constructor runs after libc's, and before libgomp's when the program lists it after
// every library that needs libgomp: the dynamic loader initializes a program's needed libraries
// last-listed first, each after its own dependencies (CMakeLists.txt links it so;
// tests/python/test_openmp_wait.py checks what libgomp read). Until issue 29, dllmq set them and
// re-executed itself instead.
#include "startup/openmp_wait_env.h"

#include <cstdlib>

namespace {

bool g_set = false;

[[gnu::constructor]] void set_openmp_wait_defaults() {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "passive", 1);
  setenv("GOMP_SPINCOUNT", "10000", 1);
  g_set = true;
}

}  // namespace

extern "C" bool dllmq_openmp_wait_defaults_set() {
  return g_set;
}
