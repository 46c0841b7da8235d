#include "cli/cli_util.h"

#include <charconv>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace dllmq::cli {

std::vector<int32_t> parse_id_list(const std::string& s, const char* flag) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i <= s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    std::string tok = s.substr(i, j - i);
    while (!tok.empty() && tok.front() == ' ') tok.erase(tok.begin());
    while (!tok.empty() && tok.back() == ' ') tok.pop_back();
    int32_t v = 0;
    auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
    if (tok.empty() || ec != std::errc() || p != tok.data() + tok.size() || v < 0)
      fail("{}: expected a comma-separated list of non-negative token ids, got '{}'", flag, tok);
    ids.push_back(v);
    i = j + 1;
  }
  return ids;
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

}  // namespace dllmq::cli
