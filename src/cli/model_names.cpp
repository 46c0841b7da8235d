#include "cli/model_names.h"

#include <filesystem>

#include "cli/settings_names.h"
#include "util/error.h"

namespace dllmq::cli {

const std::vector<ModelName>& embedded_models() {
  static const std::vector<ModelName> k = {{"synth-llada", "models/dllmq-synth-tiny"},
                                           {"synth-dream", "models/dllmq-synth-dream-tiny"},
                                           {"synth-llada-kshot", "models/dllmq-synth-kshot"}};
  return k;
}

std::string embedded_model_names() {
  std::string names;
  for (const auto& m : embedded_models())
    names += (names.empty() ? "" : ", ") + std::string(m.name);
  return names;
}

std::string resolve_model_name(const std::string& arg) {
  std::error_code ec;
  if (arg.empty() || std::filesystem::exists(arg, ec)) return arg;
  for (const auto& m : embedded_models()) {
    if (arg != m.name) continue;
    const std::string cfg = repo_path(std::string(m.dir) + "/config.json");
    if (cfg.empty())
      fail(
          "-m {}: the embedded model {} was not found (looked above the binary and in the source "
          "tree)",
          arg, m.dir);
    return std::filesystem::path(cfg).parent_path().string();
  }
  return arg;
}

CLI::Validator model_name_transform() {
  CLI::Validator v(
      [](std::string& s) {
        try {
          s = resolve_model_name(s);
        } catch (const Error& e) {
          return std::string(e.what());
        }
        return std::string();
      },
      "DIR or " + embedded_model_names(), "model-name");
  return v;
}

}  // namespace dllmq::cli
