// The server's counters, gauges and histograms in Prometheus' text format (GET /metrics).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "serve/engine.h"

namespace dllmq::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds)
      : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}
  void observe(double v);
  // "# TYPE" line, cumulative _bucket lines, _sum and _count.
  std::string render(const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket, the last one +Inf
  double sum_ = 0.0;
  int64_t count_ = 0;
};

// What one finished job contributes.
struct JobRecord {
  // kAnswered: a stream delivered the whole answer and its decoding was stopped early.
  enum Outcome { kOk, kAnswered, kCancelled, kFailed } outcome = kOk;
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;   // canvas positions decoded (the generation length)
  int64_t completion_tokens = 0;  // tokens of the answer (before EOS)
  int64_t nfe = 0, steps = 0;
  double queue_s = 0.0, decode_s = 0.0;
};

class Metrics {
 public:
  Metrics();
  void request(const std::string& path, int status);  // every answered request
  void latency(double seconds);                       // a completion request, arrival to end
  void job(const JobRecord& r);
  // The exposition, with the engine's gauges and batch counts as they are now.
  std::string render(const Engine::Stats& s, const EngineConfig& cfg) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_;
  int64_t jobs_[4] = {0, 0, 0, 0};
  int64_t prompt_tokens_ = 0, generated_tokens_ = 0, completion_tokens_ = 0, nfe_ = 0, steps_ = 0;
  Histogram request_s_, queue_s_, decode_s_;
};

}  // namespace dllmq::serve
