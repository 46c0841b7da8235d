#include "serve/request_body.h"

#include <fmt/format.h>

#include <chrono>

namespace dllmq::serve {

namespace {

// Bytes of an over-limit body read and dropped before the connection is given up: reading the
// rest keeps the connection in step for the 413 (as cpp-httplib does for a Content-Length), but
// a client streaming without end must not hold a thread for ever.
constexpr size_t kMaxDrained = size_t(256) << 20;

std::string framing(const httplib::Request& req) {
  std::string f = req.get_header_value("Transfer-Encoding") == "chunked"
                      ? "Transfer-Encoding: chunked"
                      : fmt::format("Content-Length {}", req.get_header_value("Content-Length"));
  const std::string enc = req.get_header_value("Content-Encoding");
  if (!enc.empty()) f += fmt::format(", counted after Content-Encoding: {}", enc);
  return f;
}

}  // namespace

std::optional<ApiError> read_request_body(const httplib::Request& req,
                                          const httplib::ContentReader& reader,
                                          const httplib::Response& res, size_t max_body,
                                          double body_timeout_s, std::string& body) {
  body.clear();
  size_t seen = 0;
  bool over = false;
  bool late = false;
  const auto t0 = std::chrono::steady_clock::now();
  // Checked as each piece arrives: a piece that comes after the deadline ends the read.
  auto in_time = [&] {
    if (body_timeout_s <= 0) return true;
    late = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >
           body_timeout_s;
    return !late;
  };
  auto receive = [&](const char* data, size_t n) {
    if (!in_time()) return false;
    seen += n;
    if (seen > max_body) {
      over = true;
      body.clear();
      body.shrink_to_fit();
      return seen <= max_body + kMaxDrained;
    }
    body.append(data, n);
    return true;
  };
  bool ok;
  const bool multipart = req.is_multipart_form_data();
  if (multipart)
    ok = reader([](const httplib::MultipartFormData&) { return true; },
                [&](const char*, size_t n) {
                  if (!in_time()) return false;
                  seen += n;
                  return seen <= max_body + kMaxDrained;
                });
  else
    ok = reader(receive);
  if (late)
    return ApiError(408, "",
                    fmt::format("the request body did not arrive within --body-timeout {} s "
                                "({} bytes received)",
                                body_timeout_s, seen));
  if (res.status == 413 || over || (multipart && seen > max_body))
    return ApiError(413, "",
                    fmt::format("the request body is larger than this server accepts: --max-body "
                                "{} bytes ({})",
                                max_body, framing(req)));
  if (!ok && res.status == 415)
    return ApiError(415, "",
                    fmt::format("Content-Encoding '{}' is not supported",
                                req.get_header_value("Content-Encoding")));
  if (multipart)
    return ApiError(415, "",
                    "a multipart/form-data body is not accepted: send the request as one JSON "
                    "object (Content-Type: application/json)");
  if (!ok)
    return ApiError(400, "",
                    fmt::format("the request body could not be read ({}): malformed framing or "
                                "the connection ended early",
                                framing(req)));
  return std::nullopt;
}

}  // namespace dllmq::serve
