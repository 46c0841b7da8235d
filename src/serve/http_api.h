// The HTTP routes of `dllmq serve` on cpp-httplib: OpenAI's /v1/completions,
// /v1/chat/completions and /v1/models, plus /health, /metrics (Prometheus) and the page at /.
#pragma once

#include <string>

#include <httplib.h>

#include "cli/text_codec.h"
#include "model/model.h"
#include "serve/engine.h"
#include "serve/metrics.h"
#include "serve/request.h"

namespace dllmq::serve {

class HttpApi {
 public:
  HttpApi(const Model& m, const cli::TextCodec& codec, Engine& engine, RequestDefaults defaults,
          std::string model_name, bool log_requests, size_t max_body = size_t(1) << 20);
  // Routes, error bodies in OpenAI's shape, and the request log.
  void install(httplib::Server& svr);

 private:
  void completions(const httplib::Request& req, httplib::Response& res,
                   const httplib::ContentReader& body, Endpoint e);
  void respond(const CompletionRequest& r, const std::vector<std::shared_ptr<class Job>>& jobs,
               int fd, httplib::Response& res);
  void stream(const CompletionRequest& r, std::shared_ptr<class Job> job, int fd,
              httplib::Response& res, double t0);
  void record(const Job& job);

  const Model& m_;
  const cli::TextCodec& codec_;
  Engine& engine_;
  Metrics metrics_;
  RequestDefaults defaults_;
  std::string model_name_;
  bool log_;
  size_t max_body_;  // --max-body: the request body limit, whatever its framing
};

}  // namespace dllmq::serve
