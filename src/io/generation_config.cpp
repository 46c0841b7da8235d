#include "io/generation_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace dllmq {

GenerationDefaults load_generation_defaults(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "generation_config.json").string();
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};  // optional file
  std::ostringstream text;
  text << in.rdbuf();
  return parse_generation_defaults(text.str(), path);
}

GenerationDefaults parse_generation_defaults(const std::string& text, const std::string& path) {
  GenerationDefaults d;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: malformed JSON: {}", path, e.what());
  }
  if (!j.is_object()) fail("{}: expected a JSON object", path);
  auto positive = [&](const char* key) -> std::optional<int> {
    if (!j.contains(key) || j[key].is_null()) return std::nullopt;
    const auto& v = j[key];
    // is_number_unsigned first: a uint64 above INT64_MAX would read back negative.
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > (1u << 24)) ||
        v.get<int64_t>() <= 0 || v.get<int64_t>() > (1 << 24))
      fail("{}: field '{}' must be a positive integer in [1, {}], got {}", path, key, 1 << 24,
           v.dump());
    return v.get<int>();
  };
  d.gen_length = positive("max_new_tokens");
  d.block_length = positive("block_length");
  d.steps = positive("steps");
  return d;
}

}  // namespace dllmq
