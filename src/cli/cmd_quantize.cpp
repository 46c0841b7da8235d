// dllmq quantize -m DIR --weights int8|int4 [--group N] [--sym|--asym] --out DIR2: the projection
// weights rounded to integer codes in the GPTQ layout (docs/weight_quant.md).
#include <fmt/core.h>

#include "cli/commands.h"
#include "cli/model_names.h"
#include "model/quantize_checkpoint.h"
#include "util/error.h"

namespace dllmq::cli {

void register_quantize(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "quantize", "Write a copy of a model with int8 or int4 projection weights (GPTQ layout)");
  auto model = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto weights = std::make_shared<std::string>();
  auto group = std::make_shared<int>(0);
  auto sym = std::make_shared<bool>(false);
  auto asym = std::make_shared<bool>(false);
  cmd->add_option("-m,--model", *model, "model directory to quantize")
      ->required()
      ->transform(model_name_transform());
  cmd->add_option("--weights", *weights, "int8 (per output channel) or int4 (per group)")
      ->required();
  cmd->add_option("--group", *group,
                  "input columns per scale: a positive multiple of 8, or -1 for one per output "
                  "channel (default: int8 -1, int4 128)");
  auto* fs = cmd->add_flag("--sym", *sym, "symmetric codes, zero point 2^(bits-1) (default)");
  cmd->add_flag("--asym", *asym, "asymmetric codes with a per-group zero point")->excludes(fs);
  cmd->add_option("--out", *out, "directory to write (created; must differ from -m)")->required();
  cmd->callback([=] {
    WeightQuantScheme s;
    if (*weights == "int8")
      s.bits = 8;
    else if (*weights == "int4")
      s.bits = 4;
    else
      fail("--weights {}: not a weight format (accepted: int8, int4)", *weights);
    s.group_size = *group != 0 ? *group : (s.bits == 8 ? -1 : 128);
    s.sym = !*asym;
    check_weight_quant_scheme(s, "--group/--weights");
    const QuantizeReport r = quantize_checkpoint(*model, *out, s);
    fmt::print(
        "{} projections quantized to {}-bit ({}, {}): {} -> {} bytes ({:.3f}x); checkpoint {} -> "
        "{} bytes ({:.3f}x); written to {}\n",
        r.n_quantized, s.bits,
        s.group_size == -1 ? "per output channel" : fmt::format("groups of {}", s.group_size),
        s.sym ? "symmetric" : "asymmetric", r.proj_bytes_before, r.proj_bytes_after,
        double(r.proj_bytes_after) / double(r.proj_bytes_before), r.total_bytes_before,
        r.total_bytes_after, double(r.total_bytes_after) / double(r.total_bytes_before), *out);
  });
}

}  // namespace dllmq::cli
