// Reading a request body under dllmq's own size limit (`serve --max-body`), whatever its framing
// (Content-Length, Transfer-Encoding: chunked, Content-Encoding: gzip/deflate/br) and content
// type. cpp-httplib's own checks cover only part of that: its payload limit applies to a
// Content-Length, not to a chunked body (a 64 MiB chunked body was read whole), and a
// form-urlencoded body (curl -d's default type) is capped at a compiled-in 8 KiB. Routes that
// read their body through here get one limit, counted on the bytes that reach the parser, and a
// refusal that names it.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include <httplib.h>

#include "serve/api_error.h"

namespace dllmq::serve {

// Reads the body of `req` into `body` through `reader`. Returns the error to answer with: 413
// naming --max-body and the framing when the body is larger than `max_body` (the rest of it is
// read and dropped, so memory stays at `max_body`), 415 for multipart/form-data (not JSON), 400
// when the body cannot be read (malformed chunks, a connection that ends early), 408 naming
// --body-timeout when the whole body has not arrived within `body_timeout_s` seconds (0: no
// limit) of the first read: --io-timeout bounds each wait, so a client trickling one byte per
// wait would otherwise hold its thread for max_body waits.
// `res.status` is where cpp-httplib reports what it detected itself.
std::optional<ApiError> read_request_body(const httplib::Request& req,
                                          const httplib::ContentReader& reader,
                                          const httplib::Response& res, size_t max_body,
                                          double body_timeout_s, std::string& body);

}  // namespace dllmq::serve
