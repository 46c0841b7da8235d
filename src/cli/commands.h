// Subcommands of the dllmq binary; each lives in its own cmd_*.cpp and registers itself here.
#pragma once

#include <CLI/CLI.hpp>

namespace dllmq::cli {

void register_inspect(CLI::App& app);
void register_logits(CLI::App& app);
void register_generate(CLI::App& app);
void register_bench(CLI::App& app);
void register_eval(CLI::App& app);
void register_grid(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_calibrate(CLI::App& app);
void register_calib_report(CLI::App& app);
void register_make_pairs(CLI::App& app);
void register_serve(CLI::App& app);
void register_quantize(CLI::App& app);

}  // namespace dllmq::cli
