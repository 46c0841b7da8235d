#include "io/generation_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "io/model_config.h"
#include "util/error.h"
#include "util/json_limits.h"

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
  const nlohmann::json j = parse_json_bounded(text, path);
  if (!j.is_object()) fail("{}: expected a JSON object", path);
  auto positive = [&](const char* key) -> std::optional<int> {
    if (!j.contains(key) || j[key].is_null()) return std::nullopt;
    const auto& v = j[key];
    // is_number_unsigned first: a uint64 above INT64_MAX would read back negative.
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > (1u << 24)) ||
        v.get<int64_t>() <= 0 || v.get<int64_t>() > (1 << 24))
      fail("{}: field '{}' must be a positive integer in [1, {}], got {}", path, key, 1 << 24,
           json_brief(v));
    return v.get<int>();
  };
  d.gen_length = positive("max_new_tokens");
  d.block_length = positive("block_length");
  d.steps = positive("steps");
  if (j.contains("mask_token_id") && !j["mask_token_id"].is_null()) {
    const auto& v = j["mask_token_id"];
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > INT32_MAX) ||
        v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
      fail("{}: field 'mask_token_id' must be a non-negative integer, got {}", path, json_brief(v));
    d.mask_token_id = v.get<int64_t>();
  }
  return d;
}

void check_generation_ids(const GenerationDefaults& d, const ModelConfig& cfg,
                          const std::string& dir) {
  if (!d.mask_token_id) return;
  const std::filesystem::path base(dir);
  const std::string gen = (base / "generation_config.json").string();
  const std::string conf = (base / "config.json").string();
  if (*d.mask_token_id >= cfg.vocab_size)
    fail("{}: mask_token_id {} is outside the vocabulary [0, {}) of {}", gen, *d.mask_token_id,
         cfg.vocab_size, conf);
  if (*d.mask_token_id != cfg.mask_id)
    fail(
        "{}: mask_token_id {} contradicts {} (mask_token_id {}); the reference sampler reads "
        "the first, dllmq the second: make them agree",
        gen, *d.mask_token_id, conf, cfg.mask_id);
}

}  // namespace dllmq
