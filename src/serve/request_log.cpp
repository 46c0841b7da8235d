#include "serve/request_log.h"
#include "util/json_limits.h"

#include <atomic>
#include <chrono>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace dllmq::serve {

std::string format_log_line(const RequestLogLine& r) {
  const double ts =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  nlohmann::json j = {{"ts", ts},       {"request_id", r.id}, {"method", r.method},
                      {"path", r.path}, {"status", r.status}, {"latency_s", r.latency_s}};
  if (r.prompts > 0) {
    j["prompts"] = r.prompts;
    j["prompt_tokens"] = r.prompt_tokens;
    j["generated_tokens"] = r.generated_tokens;
    j["completion_tokens"] = r.completion_tokens;
    j["nfe"] = r.nfe;
    j["queue_s"] = r.queue_s;
    j["decode_s"] = r.decode_s;
  }
  if (!r.error.empty()) j["error"] = r.error;
  return json_text(j);
}

std::string new_request_id() {
  static const uint64_t start =
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  static std::atomic<uint64_t> counter{0};
  // splitmix64 of (start + n): distinct for every n, not guessable from a neighbour's id.
  uint64_t z = start + 0x9e3779b97f4a7c15ull * (++counter);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return fmt::format("req-{:016x}", z);
}

}  // namespace dllmq::serve
