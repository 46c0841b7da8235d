#include "io/generation_config.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace dllmq {

GenerationDefaults load_generation_defaults(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "generation_config.json").string();
  GenerationDefaults d;
  std::ifstream in(path);
  if (!in) return d;  // optional file
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: malformed JSON: {}", path, e.what());
  }
  if (!j.is_object()) fail("{}: expected a JSON object", path);
  auto positive = [&](const char* key) -> std::optional<int> {
    if (!j.contains(key) || j[key].is_null()) return std::nullopt;
    const auto& v = j[key];
    if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > (1 << 24))
      fail("{}: field '{}' must be a positive integer, got {}", path, key, v.dump());
    return v.get<int>();
  };
  d.gen_length = positive("max_new_tokens");
  d.block_length = positive("block_length");
  d.steps = positive("steps");
  return d;
}

}  // namespace dllmq
