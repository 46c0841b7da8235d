// The HTTP routes of `dllmq serve` on cpp-httplib: OpenAI's /v1/completions,
// /v1/chat/completions and /v1/models, plus /health, /metrics (Prometheus) and the page at /.
#pragma once

#include <atomic>
#include <string>

#include <httplib.h>

#include "model/model.h"
#include "serve/api_key.h"
#include "serve/engine.h"
#include "serve/metrics.h"
#include "serve/request.h"
#include "settings/text_codec.h"

namespace dllmq::serve {

// What the operator sets on the routes (flags of `dllmq serve`).
struct HttpOptions {
  ApiKeyPolicy auth;               // --api-key / --api-key-file / DLLMQ_API_KEY, --metrics-public
  double request_timeout_s = 0.0;  // --request-timeout: wall clock per request (0: none)
  int max_tokens = 0;              // --max-tokens: the largest generation a request may ask for
  bool log = false;                // --log: one JSON line per request on stderr
  size_t max_body = size_t(1) << 20;  // --max-body: the request body limit, whatever its framing
  double body_timeout_s = 60.0;       // --body-timeout: seconds to receive a whole body (0: none)
};

class HttpApi {
 public:
  HttpApi(const Model& m, const settings::TextCodec& codec, Engine& engine,
          RequestDefaults defaults, std::string model_name, HttpOptions options);
  // Routes, the API key and drain checks before them, error bodies in OpenAI's shape, and the
  // request log.
  void install(httplib::Server& svr);
  // Streams still being written. cpp-httplib ends a chunked answer as soon as the server stops
  // listening, so a drain waits for this to reach 0 before it stops the server.
  int streams_in_flight() const { return streams_.load(); }

 private:
  void completions(const httplib::Request& req, httplib::Response& res,
                   const httplib::ContentReader& body, Endpoint e);
  void respond(const CompletionRequest& r, const std::vector<std::shared_ptr<class Job>>& jobs,
               int fd, httplib::Response& res);
  void stream(const CompletionRequest& r, std::shared_ptr<class Job> job, int fd,
              httplib::Response& res, double t0);
  void record(const Job& job);

  const Model& m_;
  const settings::TextCodec& codec_;
  Engine& engine_;
  Metrics metrics_;
  RequestDefaults defaults_;
  std::string model_name_;
  HttpOptions opt_;
  std::atomic<int> streams_{0};
};

}  // namespace dllmq::serve
