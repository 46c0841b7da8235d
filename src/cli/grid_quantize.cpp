#include "cli/grid_quantize.h"

#include <filesystem>

#include <fmt/core.h>

#include "cli/model_names.h"
#include "model/quantize_checkpoint.h"
#include "util/error.h"
#include "util/json_limits.h"
#include "wquant/weight_quant.h"

namespace dllmq::cli {

namespace fs = std::filesystem;

namespace {

WeightQuantScheme scheme_of(const nlohmann::json& e) {
  WeightQuantScheme s;
  s.bits = e["weights"] == "int8" ? 8 : 4;
  s.group_size = e.contains("group") ? e["group"].get<int>() : (s.bits == 8 ? -1 : 128);
  s.sym = !e.value("asym", false);
  return s;
}

}  // namespace

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
  check_weight_quant_scheme(scheme_of(e), fmt::format("{}: {}", path, at));
}

void run_grid_quantizations(const nlohmann::json& cfg, bool dry_run) {
  if (!cfg.contains("quantize")) return;
  for (const auto& e : cfg["quantize"]) {
    const std::string out = e["out"], model = e["model"];
    const WeightQuantScheme s = scheme_of(e);
    if (fs::exists(out)) {
      fmt::print(stderr, "dllmq grid: {} exists, not requantized\n", out);
      continue;
    }
    fmt::print(stderr, "dllmq grid: quantize -m {} --weights {} --group {} --{} --out {}\n", model,
               e["weights"].get<std::string>(), s.group_size, s.sym ? "sym" : "asym", out);
    if (dry_run) continue;
    const std::string partial = out + ".partial";
    std::error_code ec;
    fs::remove_all(partial, ec);  // a copy an interrupted grid left half-written
    const QuantizeReport r = quantize_checkpoint(resolve_model_name(model), partial, s);
    fs::rename(partial, out, ec);
    if (ec) fail("grid: cannot rename {} to {}: {}", partial, out, ec.message());
    fmt::print(stderr, "dllmq grid: {}: {} projections, checkpoint {} -> {} bytes\n", out,
               r.n_quantized, r.total_bytes_before, r.total_bytes_after);
  }
}

}  // namespace dllmq::cli
