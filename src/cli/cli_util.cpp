#include "cli/cli_util.h"

#include <charconv>

#include "model/model.h"
#include "util/error.h"

namespace dllmq::cli {

nlohmann::json model_weight_facts(const Model& m) {
  return {{"weight_bytes", m.checkpoint().total_bytes()},
          {"weight_format", weight_format(m.weights())},
          {"w8a8", m.w8a8()},
          {"proj_weight_bits", m.weights().proj_bits},
          {"proj_weight_bytes", m.weights().proj_bytes}};
}

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

}  // namespace dllmq::cli
