// dllmq serve: an OpenAI-compatible HTTP server (src/serve) with batched decoding.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <fmt/core.h>
#include <httplib.h>

#include "cli/commands.h"
#include "cli/model_names.h"
#include "cli/openmp_policy.h"
#include "cli/settings_names.h"
#include "ops/gemm.h"
#include "serve/api_key.h"
#include "serve/connection_pool.h"
#include "serve/engine.h"
#include "serve/http_api.h"
#include "util/error.h"

namespace dllmq::cli {

namespace {

struct ServeArgs {
  std::string model, host = "127.0.0.1", alias, batch_gemm = "auto";
  int port = 8080, parallel = 4, queue = 64, max_canvas = 0;
  double batch_wait = 0.25;
  size_t max_body = 1 << 20;
  bool log = false;
  std::string api_key, api_key_file;
  bool metrics_public = false;
  double drain_timeout = 30.0, request_timeout = 0.0, io_timeout = 10.0, body_timeout = 60.0;
  int max_tokens = 0, max_connections = 1024;
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
    fail(
        "{} cannot decode: --gen-length {} leaves no room for a prompt in the canvas of {} "
        "positions (--max-canvas)",
        from, opt.gen_length, max_positions);
}

void run_serve(const ServeArgs& a) {
  if (!a.gen.trace_cache.empty()) fail("--trace-cache is not available in serve");
  apply_threads(a.gen.threads);
  const std::string dir = a.model.empty() ? default_model_dir() : a.model;
  auto model = Model::load(dir, resolve_compute_dtype(a.gen));  // packed once, for its kernels
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
  if (a.max_tokens > 0 && opt.gen_length > a.max_tokens)
    fail(
        "--max-tokens {} is below the default generation length {} (generation_config.json or "
        "--gen-length): every request without max_tokens would be refused",
        a.max_tokens, opt.gen_length);
  serve::HttpOptions http;
  http.auth = {serve::resolve_api_key(a.api_key, a.api_key_file), a.metrics_public};
  http.request_timeout_s = a.request_timeout;
  http.max_tokens = a.max_tokens;
  http.log = a.log;
  http.max_body = a.max_body;
  http.body_timeout_s = a.body_timeout;
  if (http.auth.key.empty() && !serve::is_loopback_host(a.host))
    fmt::print(stderr,
               "dllmq serve: WARNING: listening on {} without an API key: anyone who can reach "
               "the port can use the model and read /metrics (set --api-key, --api-key-file or "
               "DLLMQ_API_KEY)\n",
               a.host);

  // Signals go to one thread that stops everything in order; every other thread blocks them.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  serve::Engine engine(*model, {a.parallel, a.queue, max_positions, a.batch_wait});
  serve::HttpApi api(*model, codec, engine, {a.gen, dir, max_positions}, name, http);
  httplib::Server svr;
  api.install(svr);
  // A client that stops sending its request or stops reading its answer for this long loses
  // the connection: it holds an HTTP thread (never a decoding slot: a job starts once its body
  // is in) only that long per read or write.
  const auto io = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::duration<double>(a.io_timeout));
  svr.set_read_timeout(io.count() / 1000000, io.count() % 1000000);
  svr.set_write_timeout(io.count() / 1000000, io.count() % 1000000);
  // A thread per connection waiting on its decoding: enough for every slot and queue place.
  // More start on demand, up to --max-connections, so that slow clients cannot take them all.
  const size_t http_threads = size_t(a.parallel) + size_t(a.queue) + 8;
  const size_t max_conn = std::max<size_t>(http_threads, size_t(a.max_connections));
  svr.new_task_queue = [http_threads, max_conn] {
    return new serve::ConnectionPool(http_threads, max_conn);
  };
  const int port = a.port == 0 ? svr.bind_to_any_port(a.host) : a.port;
  if (port <= 0 || (a.port != 0 && !svr.bind_to_port(a.host, a.port)))
    fail("cannot listen on {}:{} (in use, or not an address of this machine)", a.host, a.port);
  fmt::print(stderr,
             "dllmq serve: listening on http://{}:{} | model {} ({}) | parallel {}, queue {}, "
             "canvas <= {}, batch GEMM {} | defaults: {}{}\n",
             a.host, port, name, dir, a.parallel, a.queue, max_positions,
             batch_gemm_name(engine.batch_gemm()), describe(opt, cfg), describe_w8a8(*model));
  std::fflush(stderr);

  std::thread listener([&] {
    unpin_this_thread();  // connection threads start from here: not the batching thread's CPU
    svr.listen_after_bind();
    engine.stop();
  });
  // Streams write their last chunks (the answer's end, or the reason it was cut) before the
  // server stops: httplib ends every chunked answer still open once it is stopped. Bounded: 2 s.
  auto stop_after_streams = [&] {
    const auto grace = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (api.streams_in_flight() > 0 && std::chrono::steady_clock::now() < grace)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    svr.stop();  // stops accepting; plain answers in flight are still written
  };
  // The first SIGTERM/SIGINT drains: new requests get 503, queued and running ones finish
  // (at most --drain-timeout s; what is left then is cancelled, its clients told why), then the
  // server stops and the process exits 0. A second signal stops at once.
  std::thread stopper([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    const serve::Engine::Stats s = engine.stats();
    fmt::print(stderr,
               "dllmq serve: {} received: draining ({} running, {} queued; at most {} s); a "
               "second signal stops at once\n",
               sig == SIGINT ? "SIGINT" : "SIGTERM", s.running, s.queued, a.drain_timeout);
    std::fflush(stderr);
    engine.drain();
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(a.drain_timeout));
    const timespec poll{0, 20 * 1000 * 1000};
    while (!engine.idle()) {
      if (std::chrono::steady_clock::now() >= deadline) {
        fmt::print(stderr, "dllmq serve: drain timeout: cancelling what is left\n");
        break;
      }
      if (sigtimedwait(&sigs, nullptr, &poll) > 0) {
        fmt::print(stderr, "dllmq serve: second signal: stopping now\n");
        break;
      }
    }
    std::fflush(stderr);
    engine.stop();  // what is still queued or running ends; its handlers answer with the reason
    stop_after_streams();
  });
  engine.run();  // the batched forwards, on this (pinned) thread; returns once the engine stops
  // Not a bare svr.stop() here: engine.run() returns the moment the stopper stops the engine,
  // and closing the server then would cut the streams before they are told why.
  stop_after_streams();
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
  auto a = std::make_shared<ServeArgs>();
  cmd->add_option("-m,--model", a->model,
                  "model directory or embedded short name (" + embedded_model_names() +
                      "; default: the embedded dllmq-synth-tiny)")
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
  cmd->add_flag("--log", a->log,
                "log every request on stderr as one JSON line (request id, tokens, NFE, queue "
                "wait, decode time, status)");
  cmd->add_option("--api-key", a->api_key,
                  "require 'Authorization: Bearer KEY' on every route but /health and the page "
                  "(also --api-key-file, or $DLLMQ_API_KEY)");
  cmd->add_option("--api-key-file", a->api_key_file,
                  "read the API key from this file's first line");
  cmd->add_flag("--metrics-public", a->metrics_public, "serve /metrics without the API key");
  cmd->add_option("--drain-timeout", a->drain_timeout,
                  "on SIGTERM/SIGINT, seconds to finish running and queued requests before "
                  "cancelling the rest")
      ->capture_default_str();
  cmd->add_option("--request-timeout", a->request_timeout,
                  "wall-clock seconds a request may take from arrival (0: no limit); past it, "
                  "decoding stops and the client gets a 504 'timeout' error")
      ->capture_default_str();
  cmd->add_option("--max-tokens", a->max_tokens,
                  "the largest max_tokens a request may ask for (0: up to the canvas)")
      ->capture_default_str();
  cmd->add_option("--max-connections", a->max_connections,
                  "connections served at once (each a thread; more wait to be accepted)")
      ->capture_default_str();
  cmd->add_option("--io-timeout", a->io_timeout,
                  "seconds a client may leave a read or write of its connection waiting before "
                  "it is closed (slow or stalled clients)")
      ->capture_default_str();
  cmd->add_option("--body-timeout", a->body_timeout,
                  "seconds a client may take to send a whole request body (0: no limit; past "
                  "it: 408): --io-timeout bounds each wait, this the sum of them")
      ->capture_default_str();
  add_generate_flags(cmd, a->gen);
  cmd->callback([a] { run_serve(*a); });
}

}  // namespace dllmq::cli
