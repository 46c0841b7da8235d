// Small helpers shared by the subcommands.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dllmq::cli {

// "3,17,250" -> {3, 17, 250}; throws naming `flag` on anything else.
std::vector<int32_t> parse_id_list(const std::string& s, const char* flag);

}  // namespace dllmq::cli
