#include "cli/grid_quantize.h"

#include <filesystem>

#include <fmt/core.h>

#include "cli/model_names.h"
#include "model/quantize_checkpoint.h"
#include "util/error.h"
#include "wquant/weight_quant.h"

namespace dllmq::cli {

namespace fs = std::filesystem;

void run_grid_quantizations(const nlohmann::json& cfg, bool dry_run) {
  if (!cfg.contains("quantize")) return;
  for (const auto& e : cfg["quantize"]) {
    const std::string out = e["out"], model = e["model"];
    const WeightQuantScheme s = grid_quantize_scheme(e);
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
