// dllmq logits -m DIR --ids 3,17,250 [--json] [--w8a8]: raw logits of one full forward (no shift).
#include <cstdio>
#include <vector>

#include <fmt/core.h>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/model_names.h"
#include "model/model.h"
#include "util/error.h"

namespace dllmq::cli {

void register_logits(CLI::App& app) {
  auto* cmd = app.add_subcommand("logits", "Print the raw logits of one forward pass");
  auto model = std::make_shared<std::string>();
  auto ids_s = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  auto w8a8 = std::make_shared<bool>(false);
  cmd->add_option("-m,--model", *model,
                  "model directory or short name (" + embedded_model_names() + ")")
      ->required()
      ->transform(model_name_transform());
  cmd->add_option("--ids", *ids_s, "comma-separated token ids")->required();
  cmd->add_flag("--json", *as_json, "print {\"logits\": [[...], ...]}, one row per position");
  cmd->add_flag("--w8a8", *w8a8,
                "int8 activations on the quantized projections (as generate --w8a8), an "
                "approximation");
  cmd->callback([=] {
    auto m = Model::load(*model);
    if (*w8a8) m->use_int8_activations();
    const auto ids = parse_id_list(*ids_s, "--ids");
    const int vocab = m->config().vocab_size;
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] >= vocab)
        fail("--ids: token id {} at index {} outside the vocabulary [0, {})", ids[i], i, vocab);
    const int n = static_cast<int>(ids.size());
    std::vector<float> logits(size_t(n) * vocab);  // [n, vocab]
    ForwardArgs a;
    a.ids = ids;
    a.logits = {0, n};
    m->forward(a, logits.data());
    std::string out = *as_json ? "{\"logits\": [" : "";
    for (int i = 0; i < n; ++i) {
      out += *as_json ? (i ? ", [" : "[") : fmt::format("pos {} id {}:", i, ids[i]);
      for (int v = 0; v < vocab; ++v) {
        // 9 significant digits round-trip an f32 exactly.
        const float x = logits[size_t(i) * vocab + v];
        if (*as_json)
          out += fmt::format("{}{:.9g}", v ? ", " : "", x);
        else
          out += fmt::format(" {:.6g}", x);
      }
      out += *as_json ? "]" : "\n";
    }
    if (*as_json) out += "]}\n";
    std::fputs(out.c_str(), stdout);
  });
}

}  // namespace dllmq::cli
