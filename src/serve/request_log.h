// The structured request log of `dllmq serve --log`: one JSON object per line on stderr for
// every answered request, with what a completion cost (tokens, forwards, queue wait, decoding).
#pragma once

#include <cstdint>
#include <string>

namespace dllmq::serve {

struct RequestLogLine {
  std::string id;  // also sent to the client as the X-Request-Id header
  std::string method, path;
  int status = 0;
  // Completion requests only (zero elsewhere): summed over the request's prompts.
  int prompts = 0;
  int64_t prompt_tokens = 0, generated_tokens = 0, completion_tokens = 0, nfe = 0;
  double queue_s = 0.0, decode_s = 0.0;  // the longest queue wait, the summed decoding
  double latency_s = 0.0;                // arrival to the last byte written
  std::string error;                     // the error message the client got, if any
};

// `{"ts": ..., "request_id": ..., ...}` without a trailing newline.
std::string format_log_line(const RequestLogLine& r);

// A process-unique id: "req-" + 16 hex digits (a counter mixed with the start time).
std::string new_request_id();

}  // namespace dllmq::serve
