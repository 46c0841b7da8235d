#include "util/memory.h"

#include <sys/resource.h>

#include <sys/sysinfo.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace dllmq {

uint64_t usable_memory_bytes() {
  uint64_t total = UINT64_MAX;
  struct sysinfo si {};
  if (::sysinfo(&si) == 0)
    total = (uint64_t(si.totalram) + uint64_t(si.totalswap)) * uint64_t(si.mem_unit);
  for (const int res : {RLIMIT_AS, RLIMIT_DATA}) {
    struct rlimit rl {};
    if (::getrlimit(res, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
      total = std::min<uint64_t>(total, rl.rlim_cur);
  }
  return total;
}

std::string format_bytes(double bytes) {
  if (bytes >= 1024.0 * 1024 * 1024)
    return fmt::format("{:.1f} GiB", bytes / (1024.0 * 1024 * 1024));
  if (bytes >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024));
  if (bytes >= 1024.0) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{:.0f} B", bytes);
}

namespace {
// A "Key:   N kB" line of /proc/self/status, in bytes (0 if absent).
size_t status_bytes(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(key) + ":";
  while (std::getline(in, line))
    if (line.rfind(prefix, 0) == 0) {
      std::istringstream ss(line.substr(prefix.size()));
      size_t kb = 0;
      ss >> kb;
      return kb * 1024;
    }
  return 0;
}
}  // namespace

size_t peak_rss_bytes() {
  return status_bytes("VmHWM");
}

size_t resident_bytes() {
  return status_bytes("VmRSS");
}

}  // namespace dllmq
