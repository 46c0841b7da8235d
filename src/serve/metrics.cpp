#include "serve/metrics.h"

#include <fmt/format.h>

#include "util/memory.h"

namespace dllmq::serve {

namespace {

// Seconds: a tiny model answers in milliseconds, an 8B one in minutes.
std::vector<double> latency_bounds() {
  return {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
}

std::string counter(const std::string& name, const std::string& help, double v) {
  return fmt::format("# HELP {0} {1}\n# TYPE {0} counter\n{0} {2}\n", name, help, v);
}

std::string gauge(const std::string& name, const std::string& help, double v) {
  return fmt::format("# HELP {0} {1}\n# TYPE {0} gauge\n{0} {2}\n", name, help, v);
}

}  // namespace

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
  std::string s = fmt::format("# HELP {0} {1}\n# TYPE {0} histogram\n", name, help);
  int64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    s += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cum);
  }
  s += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name,
                   sum_, name, count_);
  return s;
}

Metrics::Metrics()
    : request_s_(latency_bounds()), queue_s_(latency_bounds()), decode_s_(latency_bounds()) {}

void Metrics::request(const std::string& path, int status) {
  std::lock_guard<std::mutex> lk(mu_);
  ++requests_[{path, status}];
}

void Metrics::latency(double seconds) {
  std::lock_guard<std::mutex> lk(mu_);
  request_s_.observe(seconds);
}

void Metrics::job(const JobRecord& r) {
  std::lock_guard<std::mutex> lk(mu_);
  ++jobs_[r.outcome];
  if (r.outcome != JobRecord::kOk) return;
  prompt_tokens_ += r.prompt_tokens;
  generated_tokens_ += r.generated_tokens;
  completion_tokens_ += r.completion_tokens;
  nfe_ += r.nfe;
  steps_ += r.steps;
  queue_s_.observe(r.queue_s);
  decode_s_.observe(r.decode_s);
}

std::string Metrics::render(const Engine::Stats& st, const EngineConfig& cfg) const {
  std::lock_guard<std::mutex> lk(mu_);
  std::string s =
      "# HELP dllmq_requests_total HTTP requests by path and status code\n"
      "# TYPE dllmq_requests_total counter\n";
  for (const auto& [k, n] : requests_)
    s += fmt::format("dllmq_requests_total{{path=\"{}\",code=\"{}\"}} {}\n", k.first, k.second, n);
  s += "# HELP dllmq_jobs_total Prompts decoded, by outcome\n# TYPE dllmq_jobs_total counter\n";
  const char* outcomes[] = {"ok", "answered_early", "cancelled", "failed"};
  for (int i = 0; i < 4; ++i)
    s += fmt::format("dllmq_jobs_total{{outcome=\"{}\"}} {}\n", outcomes[i], jobs_[i]);
  s += counter("dllmq_prompt_tokens_total", "Prompt tokens of finished jobs", prompt_tokens_);
  s += counter("dllmq_generated_tokens_total", "Canvas positions decoded (generation lengths)",
               generated_tokens_);
  s += counter("dllmq_completion_tokens_total", "Answer tokens (before EOS) returned",
               completion_tokens_);
  s += counter("dllmq_nfe_total", "Model forwards of finished jobs (per canvas)", nfe_);
  s += counter("dllmq_steps_total", "Denoising steps of finished jobs", steps_);
  s += counter("dllmq_batches_total", "Batched forwards run", st.batches.batches);
  s += counter("dllmq_batch_canvases_total", "Canvases in those forwards", st.batches.canvases);
  // Against wall time: the share of it the batching thread computed forwards (the rest it waited
  // for decoders to sample and ask again, or for work).
  s += counter("dllmq_batch_forward_seconds_total", "Seconds spent running batched forwards",
               st.batches.forward_s);
  s += "# HELP dllmq_batches_by_size_total Batched forwards by number of canvases\n"
       "# TYPE dllmq_batches_by_size_total counter\n";
  for (size_t k = 1; k < st.batches.by_size.size(); ++k)
    s += fmt::format("dllmq_batches_by_size_total{{size=\"{}\"}} {}\n", k, st.batches.by_size[k]);
  s += gauge("dllmq_queue_depth", "Jobs waiting for a decoding slot", st.queued);
  s += gauge("dllmq_jobs_running", "Jobs being decoded", st.running);
  s += gauge("dllmq_parallel_slots", "Jobs decoded at once at most", cfg.parallel);
  s += gauge("dllmq_kv_bytes_held", "Bytes held by the KV stores of running jobs", st.kv_bytes);
  s += gauge("dllmq_resident_bytes", "Resident set size of the server", resident_bytes());
  s += request_s_.render("dllmq_request_duration_seconds",
                         "Completion request latency, arrival to last byte handed over");
  s += queue_s_.render("dllmq_queue_wait_seconds", "Time a job waited for a slot");
  s += decode_s_.render("dllmq_decode_seconds", "Time a job decoded");
  return s;
}

}  // namespace dllmq::serve
