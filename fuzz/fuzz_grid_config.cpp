// GRID.json of `dllmq grid` (src/cli/grid_config.cpp): parse_grid_config + validate_grid_config
// with `dllmq eval`'s flag names. A config is accepted or refused with dllmq::Error; an accepted
// one is then read the way cmd_grid.cpp reads it (every get<> of a string, every iteration), so
// a value of the wrong type that validation let through escapes as a JSON type_error: a finding.
#include <cstdlib>

#include "cli/grid_config.h"
#include "fuzz_util.h"

namespace {

// `dllmq eval`'s long flag names (cli/cmd_eval.cpp + cli/generate_flags.cpp) at the time of
// writing; the harness checks the mechanism, not this list's freshness.
const std::vector<std::string>& eval_flags() {
  static const std::vector<std::string> f = {
      "task",        "data",        "out",           "model",
      "limit",       "chat",        "subset",        "resume",
      "json",        "workers",     "timeout",       "math-phase-timeout",
      "mem-mb",      "fake",        "fake-delay-ms", "details",
      "shots",       "gen-length",  "block-length",  "steps",
      "threshold",   "factor",      "cache",         "alg",
      "temperature", "top-p",       "top-k",         "alg-temp",
      "eps",         "cfg-scale",   "seed",          "kv",
      "kv-bits",     "kv-bits-k",   "kv-bits-v",     "kv-group",
      "calib",       "kv-channels", "dtype",         "threads"};
  return f;
}

void scalar(const nlohmann::json& v) {
  if (!(v.is_string() || v.is_number() || v.is_boolean() || v.is_null())) std::abort();
  if (v.is_string()) (void)v.get<std::string>();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(fuzz::as_text(data, size));
  nlohmann::json cfg;
  try {
    cfg = dllmq::cli::parse_grid_config(text, "grid.json");
    dllmq::cli::validate_grid_config(cfg, "grid.json", eval_flags());
  } catch (const dllmq::Error&) {
    return 0;
  }
  // Accepted: what cmd_grid.cpp reads must be there, with its type.
  if (cfg.contains("out")) (void)cfg["out"].get<std::string>();
  if (cfg.contains("model")) (void)cfg["model"].get<std::string>();
  if (cfg.contains("requires_model")) (void)cfg["requires_model"].get<bool>();
  const auto& tasks = cfg.at("tasks");
  if (!tasks.is_array() || tasks.empty()) std::abort();
  for (const auto& t : tasks) {
    if (t.at("task").get<std::string>().empty() || t.at("data").get<std::string>().empty())
      std::abort();
    for (const auto& [k, v] : t.items()) scalar(v);
  }
  if (cfg.contains("fixed"))
    for (const auto& [k, v] : cfg["fixed"].items()) scalar(v);
  if (cfg.contains("grid"))
    for (const auto& [axis, vals] : cfg["grid"].items()) {
      if (!vals.is_array() || vals.empty()) std::abort();
      for (const auto& v : vals) {
        if (!v.is_object()) {
          scalar(v);
          continue;
        }
        if (v.at("name").get<std::string>().empty()) std::abort();
        for (const auto& [k, x] : v.items()) scalar(x);
      }
    }
  if (cfg.contains("args"))
    for (const auto& a : cfg["args"]) scalar(a);
  if (cfg.contains("calibrate"))
    for (const auto& c : cfg["calibrate"]) {
      (void)c.at("out").get<std::string>();
      if (c.contains("args"))
        for (const auto& a : c["args"]) scalar(a);
    }
  return 0;
}
