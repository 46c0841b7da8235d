// dllmq: inference engine for diffusion language models (LLaDA, Dream) with small KV caches.
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "util/error.h"

int main(int argc, char** argv) {
  CLI::App app{"dllmq: diffusion LM inference with quantized KV caches"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "dllmq 0.1.0");
  dllmq::cli::register_inspect(app);
  dllmq::cli::register_logits(app);
  dllmq::cli::register_generate(app);
  dllmq::cli::register_bench(app);
  dllmq::cli::register_eval(app);
  dllmq::cli::register_grid(app);
  dllmq::cli::register_tokenize(app);
  dllmq::cli::register_calibrate(app);
  dllmq::cli::register_calib_report(app);
  dllmq::cli::register_make_pairs(app);
  dllmq::cli::register_serve(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const dllmq::Error& e) {
    std::fprintf(stderr, "dllmq: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dllmq: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
