// GNU OpenMP's default wait policy spins idle workers between parallel regions. On the shared or
// virtualised 2-core machines this project runs on, spinning made two threads 10-20x slower than
// one on the embedded model (100 synth problems, dual cache: 48.7 s with 2 threads spinning,
// 2.9 s passive, 2.4 s with 1 thread) and starved the server's decoder threads (50x). Passive
// waiting costs about 8% on a d 1024 model's dual-cache decode, so it is the default;
// OMP_WAIT_POLICY=active (or any value the user sets) is left alone. libgomp reads the variable
// when it loads, so the process re-executes itself once with it set.
#include "cli/openmp_policy.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace dllmq::cli {

void ensure_passive_openmp() {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t i = 0; i < all.size();) {
    const size_t j = all.find('\0', i);
    args.push_back(all.substr(i, j - i));
    i = j == std::string::npos ? all.size() : j + 1;
  }
  if (args.empty()) return;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  setenv("OMP_WAIT_POLICY", "passive", 1);
  execv("/proc/self/exe", argv.data());
  // Not re-executed (no /proc?): run as we are.
}

}  // namespace dllmq::cli
