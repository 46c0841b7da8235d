// Small helpers shared by the subcommands.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dllmq::cli {

// "3,17,250" -> {3, 17, 250}; throws naming `flag` on anything else.
std::vector<int32_t> parse_id_list(const std::string& s, const char* flag);

// Peak resident set size of this process in bytes (from /proc/self/status VmHWM).
size_t peak_rss_bytes();
// Resident set size now (VmRSS) in bytes.
size_t resident_bytes();

}  // namespace dllmq::cli
