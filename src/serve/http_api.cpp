#include "serve/http_api.h"
#include "util/json_limits.h"

#include <chrono>
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "decode/batch.h"
#include "serve/answer_text.h"
#include "serve/api_error.h"
#include "serve/connection.h"
#include "serve/job.h"
#include "serve/openai_format.h"
#include "serve/request_body.h"
#include "serve/request_log.h"
#include "serve/web_page.h"
#include "util/error.h"

namespace dllmq::serve {

namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// How often a waiting handler looks at its client's socket and its jobs.
constexpr auto kPoll = 20ms;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void send_json(httplib::Response& res, int status, const json& j) {
  res.status = status;
  res.set_content(json_text(j), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  send_json(res, e.status(), e.body());
}

// Tokens per streamed block: the block length, or the whole generation where the sampler has no
// blocks (Dream without a cache).
int stream_block(const GenerateOptions& o, const ModelConfig& cfg) {
  return cfg.arch == Arch::kDream && o.cache == CacheMode::kNone ? o.gen_length : o.block_length;
}

// The request the calling HTTP thread is answering: cpp-httplib runs a request's handler, its
// content provider (streams) and the logger on one thread, so the handler fills this in and the
// logger writes it out.
thread_local RequestLogLine t_log;

RequestLogLine log_line_for(const httplib::Request& req) {
  RequestLogLine l;
  l.id = new_request_id();
  l.method = req.method;
  l.path = req.path;
  return l;
}

// A finished job's costs, added to the request's log line.
void log_job(const Job& j) {
  const GenerateResult& g = j.result();
  t_log.generated_tokens += static_cast<int64_t>(g.tokens.size());
  t_log.nfe += g.nfe;
  t_log.queue_s = std::max(t_log.queue_s, j.queue_s());
  t_log.decode_s += j.run_s();
}

// The error a finished job answers with, or nullopt when it succeeded. `fd`: its client's socket.
std::optional<ApiError> job_error(const Job& j, int fd, double timeout_s) {
  if (!j.error()) return std::nullopt;
  try {
    std::rethrow_exception(j.error());
  } catch (const Cancelled&) {
    if (j.timed_out())
      return ApiError(504, "",
                      fmt::format("the request took longer than this server allows "
                                  "(--request-timeout {} s); decoding stopped",
                                  timeout_s),
                      "timeout");
    if (peer_closed(fd))  // nobody reads it; 499 keeps the request log and metrics apart
      return ApiError(499, "", "the client closed the connection; decoding stopped",
                      "client_closed");
    return ApiError(503, "", "decoding was cancelled: the server is shutting down", "server_error");
  } catch (const Error& e) {
    return ApiError(400, "", e.what());
  } catch (const std::exception& e) {
    return ApiError(500, "", fmt::format("internal error: {}", e.what()), "server_error");
  }
}

}  // namespace

HttpApi::HttpApi(const Model& m, const settings::TextCodec& codec, Engine& engine,
                 RequestDefaults defaults, std::string model_name, HttpOptions options)
    : m_(m),
      codec_(codec),
      engine_(engine),
      defaults_(std::move(defaults)),
      model_name_(std::move(model_name)),
      opt_(std::move(options)) {
  engine_.set_on_finish([this](const Job& j) { record(j); });
}

void HttpApi::record(const Job& j) {
  JobRecord r;
  if (j.error()) {
    r.outcome = JobRecord::kFailed;
    try {
      std::rethrow_exception(j.error());
    } catch (const Cancelled&) {
      r.outcome = j.answered() ? JobRecord::kAnswered : JobRecord::kCancelled;
    } catch (...) {
    }
  }
  const GenerateResult& g = j.result();
  r.prompt_tokens = static_cast<int64_t>(j.prompt().size());
  r.generated_tokens = static_cast<int64_t>(g.tokens.size());
  r.completion_tokens = AnswerText(codec_, m_.config().eos_id, {}).answer_tokens(g.tokens);
  r.nfe = g.nfe;
  r.steps = g.steps;
  r.queue_s = j.queue_s();
  r.decode_s = j.run_s();
  metrics_.job(r);
}

void HttpApi::install(httplib::Server& svr) {
  // Before any route (and before a body is read): the API key, then the drain.
  svr.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    t_log = log_line_for(req);
    t_log.latency_s = now_s();  // the arrival; the logger turns it into the latency
    res.set_header("X-Request-Id", t_log.id);
    if (auto err = check_api_key(req, opt_.auth)) {
      res.set_header("WWW-Authenticate", "Bearer");
      send_error(res, *err);
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.method == "POST" && engine_.draining()) {
      res.set_header("Retry-After", "5");
      send_error(res, ApiError(503, "",
                               "the server is shutting down and finishing the requests it has; "
                               "send this one elsewhere or retry",
                               "server_error"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Bodies are read by the routes themselves (request_body.h): one --max-body limit whatever the
  // framing and content type. The library's own limit stays set for the routes without a body
  // reader (it refuses a Content-Length above it before reading).
  svr.set_payload_max_length(opt_.max_body);
  svr.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res,
                                     const httplib::ContentReader& body) {
    completions(req, res, body, Endpoint::kCompletions);
  });
  svr.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res,
                                          const httplib::ContentReader& body) {
    completions(req, res, body, Endpoint::kChat);
  });
  svr.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const json model = {{"id", model_name_},
                        {"object", "model"},
                        {"created", make_head(Endpoint::kCompletions, "").created},
                        {"owned_by", "dllmq"},
                        {"max_positions", defaults_.max_positions}};
    send_json(res, 200, {{"object", "list"}, {"data", json::array({model})}});
  });
  svr.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const Engine::Stats s = engine_.stats();
    // 503 while draining, so that a load balancer's probe takes this instance out.
    const bool draining = engine_.draining();
    send_json(res, draining ? 503 : 200,
              {{"status", draining ? "draining" : "ok"},
               {"model", model_name_},
               {"parallel", engine_.config().parallel},
               {"batch_gemm", batch_gemm_name(engine_.batch_gemm())},
               {"running", s.running},
               {"queued", s.queued}});
  });
  svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(engine_.stats(), engine_.config()),
                    "text/plain; version=0.0.4");
  });
  svr.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(web_page_html(), "text/html; charset=utf-8");
  });
  // Bodies for the errors cpp-httplib answers itself (404, 413, ...), in OpenAI's shape.
  svr.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string msg = fmt::format("{} {}: HTTP status {}", req.method, req.path, res.status);
    if (res.status == 404) msg = fmt::format("no route {} {}", req.method, req.path);
    if (res.status == 413)
      msg = fmt::format("the request body is larger than this server accepts: --max-body {} bytes",
                        opt_.max_body);
    send_json(res, res.status, ApiError::error_body(msg, "invalid_request_error", ""));
  });
  svr.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        send_json(res, 500, ApiError::error_body("internal error: " + what, "server_error", ""));
      });
  svr.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics_.request(req.path, res.status);
    if (!opt_.log) return;
    RequestLogLine line = std::move(t_log);
    t_log = {};
    if (line.id.empty()) line = log_line_for(req);  // answered before the pre-routing handler
    line.status = res.status;
    line.latency_s = line.latency_s > 0 ? now_s() - line.latency_s : 0.0;
    if (res.status >= 400 && line.error.empty() && !res.body.empty()) {
      const json body = json::parse(res.body, nullptr, false);
      if (body.is_object() && body.contains("error") && body["error"].is_object() &&
          body["error"].contains("message") && body["error"]["message"].is_string())
        line.error = body["error"]["message"].get<std::string>();
    }
    const std::string text = format_log_line(line) + "\n";
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
  });
}

void HttpApi::completions(const httplib::Request& req, httplib::Response& res,
                          const httplib::ContentReader& reader, Endpoint e) {
  const double t0 = now_s();
  std::string body;
  if (auto err = read_request_body(req, reader, res, opt_.max_body, opt_.body_timeout_s, body)) {
    send_error(res, *err);
    return;
  }
  CompletionRequest r;
  try {
    r = parse_request(body, e, defaults_, codec_, m_.config());
    if (int(r.prompts.size()) > engine_.capacity())
      bad_field("prompt", "prompt has {} entries; this server holds at most {} at once",
                r.prompts.size(), engine_.capacity());
    if (opt_.max_tokens > 0 && r.options.gen_length > opt_.max_tokens)
      bad_field("max_tokens",
                "max_tokens {} is more than this server generates (at most {}, "
                "its --max-tokens)",
                r.options.gen_length, opt_.max_tokens);
  } catch (const ApiError& err) {
    send_error(res, err);
    return;
  }
  if (r.model.empty()) r.model = model_name_;
  const int block = stream_block(r.options, m_.config());
  std::vector<std::shared_ptr<Job>> jobs;
  const int fd = request_socket(req);
  const auto deadline =
      opt_.request_timeout_s > 0
          ? Job::Clock::now() + std::chrono::duration_cast<Job::Clock::duration>(
                                    std::chrono::duration<double>(opt_.request_timeout_s))
          : Job::Clock::time_point::max();
  for (auto& p : r.prompts) {
    auto job = std::make_shared<Job>(p, r.options, m_.config().mask_id, block, r.stream_steps);
    job->set_client_gone([fd] { return peer_closed(fd); });
    job->set_deadline(deadline);
    jobs.push_back(std::move(job));
  }
  t_log.prompts = static_cast<int>(jobs.size());
  for (const auto& j : jobs) t_log.prompt_tokens += static_cast<int64_t>(j->prompt().size());
  if (!engine_.submit(jobs)) {
    if (engine_.draining()) {  // the drain began after the check before routing
      res.set_header("Retry-After", "5");
      send_error(res,
                 ApiError(503, "", "the server is shutting down; retry elsewhere", "server_error"));
      return;
    }
    const int wait = engine_.retry_after_s(static_cast<int>(jobs.size()));
    res.set_header("Retry-After", std::to_string(wait));
    send_error(res, ApiError(503, "",
                             fmt::format("the server is busy ({} decoding, queue full); retry "
                                         "after {} s",
                                         engine_.config().parallel, wait),
                             "server_error"));
    return;
  }
  if (r.stream) {
    stream(r, jobs[0], fd, res, t0);
    return;
  }
  respond(r, jobs, fd, res);
  metrics_.latency(now_s() - t0);
}

// Waits for every job (cancelling them all if the client leaves) and sends one JSON body.
void HttpApi::respond(const CompletionRequest& r, const std::vector<std::shared_ptr<Job>>& jobs,
                      int fd, httplib::Response& res) {
  for (const auto& j : jobs)
    while (!j->wait(kPoll).finished) {
      if (peer_closed(fd))
        for (const auto& k : jobs) k->cancel();
      for (const auto& k : jobs) k->check_deadline();
    }
  for (const auto& j : jobs) log_job(*j);
  std::vector<ChoiceOut> choices;
  int64_t prompt_tokens = 0, completion_tokens = 0;
  for (const auto& j : jobs) {
    if (auto err = job_error(*j, fd, opt_.request_timeout_s)) {
      send_error(res, *err);
      return;
    }
    AnswerText answer(codec_, m_.config().eos_id, r.stop);
    answer.delta(j->result().tokens, /*final=*/true);
    choices.push_back({answer.text(), answer.stopped() ? "stop" : "length", &j->result(),
                       j->max_batch(), j->queue_s()});
    prompt_tokens += j->prompt().size();
    completion_tokens += answer.answer_tokens(j->result().tokens);
  }
  t_log.completion_tokens = completion_tokens;
  send_json(res, 200,
            response_json(make_head(r.endpoint, r.model), choices,
                          usage_json(prompt_tokens, completion_tokens)));
}

// Server-sent events: text deltas as blocks complete, denoising steps when asked, then the
// finish chunk (and usage), then [DONE]. A stop sequence ends the stream and the decoding early.
void HttpApi::stream(const CompletionRequest& r, std::shared_ptr<Job> job, int fd,
                     httplib::Response& res, double t0) {
  struct State {
    ResponseHead head;
    AnswerText answer;
    bool first = true;
    bool closed = false;
  };
  auto st = std::make_shared<State>(
      State{make_head(r.endpoint, r.model), AnswerText(codec_, m_.config().eos_id, r.stop)});
  const bool usage = r.include_usage;
  auto provider = [this, st, job, fd, usage](size_t, httplib::DataSink& sink) {
    auto write = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
    auto text_chunk = [&](const std::string& delta, const std::string& finish) {
      const bool ok = write(sse(chunk_json(st->head, delta, st->first, finish)));
      st->first = false;
      return ok;
    };
    auto close = [&](const std::string& finish, int64_t completion_tokens) {
      t_log.completion_tokens = completion_tokens;
      bool ok = text_chunk("", finish);
      if (usage)
        ok = ok && write(sse(usage_chunk_json(
                       st->head, usage_json(int64_t(job->prompt().size()), completion_tokens))));
      ok = ok && write(kSseDone);
      st->closed = true;
      sink.done();
      return ok;
    };
    const Job::Progress p = job->wait(kPoll);
    job->check_deadline();
    if (p.finished) log_job(*job);
    if (peer_closed(fd)) {
      job->cancel();
      return false;
    }
    for (const Job::Step& s : p.steps)
      if (!write(sse(step_json(s, codec_, m_.config().mask_id), "step"))) {
        job->cancel();
        return false;
      }
    if (!p.blocks.empty() && !p.finished) {
      const std::string d = st->answer.delta(p.blocks, false);
      if (!d.empty() && !text_chunk(d, "")) {
        job->cancel();
        return false;
      }
      if (st->answer.stopped()) {  // the answer is complete: no need to decode the rest
        job->cancel(/*answered=*/true);
        return close("stop", st->answer.answer_tokens(p.blocks));
      }
    }
    if (!p.finished) return true;
    if (auto err = job_error(*job, fd, opt_.request_timeout_s)) {
      t_log.error = err->what();
      write(sse(err->body()));
      write(kSseDone);
      st->closed = true;
      sink.done();
      return true;
    }
    const auto& tokens = job->result().tokens;
    const std::string d = st->answer.delta(tokens, true);
    if (!d.empty() && !text_chunk(d, "")) return false;
    return close(st->answer.stopped() ? "stop" : "length", st->answer.answer_tokens(tokens));
  };
  // Counts the stream as in flight until httplib drops these two callbacks (the answer is
  // written or the connection failed).
  struct InFlight {
    std::atomic<int>& n;
    explicit InFlight(std::atomic<int>& c) : n(c) { ++n; }
    ~InFlight() { --n; }
  };
  auto in_flight = std::make_shared<InFlight>(streams_);
  auto releaser = [this, st, job, t0, in_flight](bool success) {
    if (!success || !st->closed) job->cancel();  // the client went away: stop decoding
    metrics_.latency(now_s() - t0);
  };
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", provider, releaser);
}

}  // namespace dllmq::serve
