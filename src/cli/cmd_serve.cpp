// dllmq serve: an OpenAI-compatible HTTP server (src/serve) with batched decoding.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include <fmt/core.h>
#include <httplib.h>

#include "cli/commands.h"
#include "cli/generate_flags.h"
#include "cli/model_names.h"
#include "cli/openmp_policy.h"
#include "cli/text_codec.h"
#include "ops/gemm.h"
#include "serve/engine.h"
#include "serve/http_api.h"
#include "util/error.h"

namespace dllmq::cli {

namespace {

struct Args {
  std::string model, host = "127.0.0.1", alias, batch_gemm = "auto";
  int port = 8080, parallel = 4, queue = 64, max_canvas = 0;
  double batch_wait = 0.25;
  size_t max_body = 1 << 20;
  bool log = false;
  GenerateFlags gen;
};

// A request that overrides nothing decodes with the server's defaults (the flags over the
// model's generation_config.json). Defaults that cannot decode would refuse every such request
// with a 400 naming a field its client never sent: refuse to start instead, saying where the
// defaults came from. The checks are the ones every request gets (serve/request.cpp), on a
// one-token prompt.
void check_defaults_decode(const GenerateOptions& opt, const ModelConfig& cfg,
                           const std::string& dir, int max_positions) {
  const std::string from = fmt::format(
      "the server's default decoding settings (its flags over {}/generation_config.json)", dir);
  const std::vector<int32_t> prompt = {cfg.bos_id >= 0 ? cfg.bos_id : 0};
  try {
    check_generate_options(opt, cfg, prompt);
  } catch (const Error& e) {
    fail("{} cannot decode: {}", from, e.what());
  }
  if (opt.steps > opt.gen_length)
    fail("{} cannot decode: --steps {} exceeds --gen-length {} (requests are refused above it)",
         from, opt.steps, opt.gen_length);
  if (opt.gen_length + 1 > max_positions)
    fail("{} cannot decode: --gen-length {} leaves no room for a prompt in the canvas of {} "
         "positions (--max-canvas)",
         from, opt.gen_length, max_positions);
}

void run(const Args& a) {
  if (!a.gen.trace_cache.empty()) fail("--trace-cache is not available in serve");
  apply_threads(a.gen.threads);
  const std::string dir = a.model.empty() ? default_model_dir() : a.model;
  auto model = Model::load(dir);
  apply_compute_flags(a.gen, *model);
  model->set_batch_gemm(parse_batch_gemm(a.batch_gemm));
  const ModelConfig& cfg = model->config();
  TextCodec codec(*model);

  // The defaults must decode: check them, and build their KV store once (calibration files).
  const GenerateOptions opt = resolve_generate_flags(a.gen, dir);
  if (opt.cache != CacheMode::kNone)
    (void)make_kv_store(opt.kv, {cfg.n_layers, cfg.n_kv_heads, cfg.head_dim}, model->rope(),
                        model->fingerprint());
  const int max_positions = a.max_canvas > 0 ? a.max_canvas : cfg.max_seq;
  if (max_positions > cfg.max_seq)
    fail("--max-canvas {} exceeds the model's {} positions", max_positions, cfg.max_seq);
  check_defaults_decode(opt, cfg, dir, max_positions);
  const std::string name =
      a.alias.empty() ? std::filesystem::path(dir).filename().string() : a.alias;

  // Signals go to one thread that stops everything in order; every other thread blocks them.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  serve::Engine engine(*model, {a.parallel, a.queue, max_positions, a.batch_wait});
  serve::HttpApi api(*model, codec, engine, {a.gen, dir, max_positions}, name, a.log,
                     a.max_body);
  httplib::Server svr;
  api.install(svr);
  // A thread per connection waiting on its decoding: enough for every slot and queue place.
  const size_t http_threads = size_t(a.parallel) + size_t(a.queue) + 8;
  svr.new_task_queue = [http_threads] { return new httplib::ThreadPool(http_threads); };
  const int port = a.port == 0 ? svr.bind_to_any_port(a.host) : a.port;
  if (port <= 0 || (a.port != 0 && !svr.bind_to_port(a.host, a.port)))
    fail("cannot listen on {}:{} (in use, or not an address of this machine)", a.host, a.port);
  fmt::print(stderr,
             "dllmq serve: listening on http://{}:{} | model {} ({}) | parallel {}, queue {}, "
             "canvas <= {}, batch GEMM {} | defaults: {}\n",
             a.host, port, name, dir, a.parallel, a.queue, max_positions,
             batch_gemm_name(engine.batch_gemm()), describe(opt, cfg));
  std::fflush(stderr);

  std::thread listener([&] {
    unpin_this_thread();  // connection threads start from here: not the batching thread's CPU
    svr.listen_after_bind();
    engine.stop();
  });
  std::thread stopper([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    engine.stop();  // queued and running jobs end; their handlers answer
    svr.stop();
  });
  engine.run();  // the batched forwards, on this (pinned) thread
  svr.stop();
  listener.join();
  pthread_kill(stopper.native_handle(), SIGTERM);  // a no-op wait if it already stopped us
  stopper.join();
  engine.join();  // before the routes' state goes away: workers report to it
  fmt::print(stderr, "dllmq serve: stopped\n");
}

}  // namespace

void register_serve(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "serve", "OpenAI-compatible HTTP server with denoising-step streaming and batched decoding");
  auto a = std::make_shared<Args>();
  cmd->add_option("-m,--model", a->model,
                  "model directory or embedded short name synth-llada | synth-dream (default: "
                  "the embedded dllmq-synth-tiny)")
      ->transform(model_name_transform());
  cmd->add_option("--host", a->host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", a->port, "port (0: any free port, printed at start)")
      ->capture_default_str();
  cmd->add_option("--parallel", a->parallel,
                  "requests decoded at once; their forwards are batched (1 = one at a time)")
      ->capture_default_str();
  cmd->add_option("--queue", a->queue,
                  "requests waiting beyond those; more get 503 with Retry-After")
      ->capture_default_str();
  cmd->add_option("--max-canvas", a->max_canvas,
                  "prompt + generated tokens of one request at most (default: the model's "
                  "positions)");
  cmd->add_option("--max-body", a->max_body, "largest request body in bytes (larger: 413)")
      ->capture_default_str();
  cmd->add_option("--batch-gemm", a->batch_gemm,
                  "how a batched forward multiplies its canvases' rows: auto (stacked where a "
                  "check at start shows it gives every row the bits of its own GEMM, else "
                  "per-canvas) | per-canvas (exact by construction) | stacked")
      ->capture_default_str();
  cmd->add_option("--batch-wait", a->batch_wait,
                  "a batch waits for late decoders at most this fraction of the previous batch's "
                  "time (at least 1 ms); 0 = wait for every decoder in flight")
      ->capture_default_str();
  cmd->add_option("--alias", a->alias, "model name in the API (default: the directory's name)");
  cmd->add_flag("--log", a->log, "log every request on stderr");
  add_generate_flags(cmd, a->gen);
  cmd->callback([a] { run(*a); });
}

}  // namespace dllmq::cli
