// Validation of a grid config's "quantize" entries, apart from the step that runs them
// (grid_quantize.cpp) so that the config parser links without the model and its kernels (the
// fuzz build compiles grid_config.cpp alone).
#include <fmt/core.h>

#include "cli/grid_quantize.h"
#include "util/error.h"
#include "util/json_limits.h"

namespace dllmq::cli {

WeightQuantScheme grid_quantize_scheme(const nlohmann::json& e) {
  WeightQuantScheme s;
  s.bits = e["weights"] == "int8" ? 8 : 4;
  s.group_size = e.contains("group") ? e["group"].get<int>() : (s.bits == 8 ? -1 : 128);
  s.sym = !e.value("asym", false);
  return s;
}

void check_grid_quantize_entry(const nlohmann::json& e, const std::string& path,
                               const std::string& at) {
  if (!e.is_object())
    fail(
        "{}: {} must be an object {{\"out\", \"model\", \"weights\"[, \"group\", \"asym\"]}}, "
        "got {}",
        path, at, json_brief(e, 60));
  for (const auto& [k, v] : e.items()) {
    bool known = false;
    for (const char* q : kGridQuantizeKeys) known = known || k == q;
    if (!known)
      fail("{}: unknown key '{}' in {} (known: out, model, weights, group, asym)", path, k, at);
  }
  for (const char* k : {"out", "model", "weights"})
    if (!e.contains(k) || !e[k].is_string() || e[k].get_ref<const std::string&>().empty())
      fail("{}: {}.{} must be a non-empty string", path, at, k);
  if (e["weights"] != "int8" && e["weights"] != "int4")
    fail("{}: {}.weights: '{}' is not a weight format (accepted: int8, int4)", path, at,
         e["weights"].get<std::string>());
  if (e.contains("group") && !e["group"].is_number_integer())
    fail("{}: {}.group must be an integer (-1, or a positive multiple of 8)", path, at);
  if (e.contains("asym") && !e["asym"].is_boolean())
    fail("{}: {}.asym must be true or false", path, at);
  check_weight_quant_scheme(grid_quantize_scheme(e), fmt::format("{}: {}", path, at));
}

}  // namespace dllmq::cli
