// dllmq: inference engine for diffusion language models (LLaDA, Dream) with small KV caches.
#include <cstdio>
#include <exception>
#include <new>

#include "cli/commands.h"
#include "cli/settings_names.h"
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
  dllmq::cli::register_quantize(app);
  dllmq::settings::apply_flag_ranges(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; a flag error is a user error like any other: status 1.
    return app.exit(e) == 0 ? 0 : 1;
  } catch (const dllmq::Error& e) {
    std::fprintf(stderr, "dllmq: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    // Sizes are checked before large allocations (with the bytes needed in the message); an
    // allocation that still fails is a bug in that checking, reported as such.
    std::fprintf(stderr,
                 "dllmq: internal error: out of memory (an allocation no size check "
                 "foresaw failed)\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dllmq: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
