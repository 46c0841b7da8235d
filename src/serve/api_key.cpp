#include "serve/api_key.h"

#include <arpa/inet.h>

#include <cstdlib>
#include <fstream>

#include "util/error.h"

namespace dllmq::serve {

namespace {

std::string trim(std::string s) {
  const char* ws = " \t\r\n";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

void check_key_text(const std::string& key, const std::string& where) {
  for (unsigned char c : key)
    if (c <= 0x20 || c == 0x7f)
      fail(
          "{}: the API key holds white space or a control character; use printable characters "
          "only (it is sent in an HTTP header)",
          where);
  if (key.size() > 4096) fail("{}: the API key is {} bytes; at most 4096", where, key.size());
}

}  // namespace

std::string resolve_api_key(const std::string& flag_key, const std::string& key_file) {
  if (!flag_key.empty() && !key_file.empty())
    fail("--api-key and --api-key-file both given; set the key one way");
  if (!flag_key.empty()) {
    check_key_text(flag_key, "--api-key");
    return flag_key;
  }
  if (!key_file.empty()) {
    std::ifstream f(key_file);
    if (!f) fail("--api-key-file {}: cannot be read", key_file);
    std::string line;
    std::getline(f, line);
    line = trim(line);
    if (line.empty())
      fail("--api-key-file {}: the first line is empty; it must hold the key", key_file);
    check_key_text(line, "--api-key-file " + key_file);
    return line;
  }
  if (const char* env = std::getenv("DLLMQ_API_KEY"); env && *env) {
    const std::string key = trim(env);
    check_key_text(key, "DLLMQ_API_KEY");
    return key;
  }
  return "";
}

bool keys_equal(std::string_view a, std::string_view b) {
  // Every byte of the longer string is looked at whatever the contents; the length difference
  // is folded into the result rather than returned early.
  const size_t n = std::max(a.size(), b.size());
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  // A volatile read keeps the compiler from turning the loop into an early-exit comparison.
  volatile unsigned sink = diff;
  return sink == 0;
}

std::optional<ApiError> check_api_key(const httplib::Request& req, const ApiKeyPolicy& policy) {
  if (policy.key.empty()) return std::nullopt;
  if (req.path == "/health" || (req.method == "GET" && req.path == "/")) return std::nullopt;
  if (req.path == "/metrics" && policy.metrics_public) return std::nullopt;
  const std::string auth = req.get_header_value("Authorization");
  // The scheme is case-insensitive (RFC 9110); one or more spaces before the token.
  std::string_view v(auth);
  constexpr std::string_view kBearer = "bearer";
  bool bearer = v.size() > kBearer.size();
  for (size_t i = 0; bearer && i < kBearer.size(); ++i) bearer = (v[i] | 0x20) == kBearer[i];
  if (bearer && v[kBearer.size()] == ' ') {
    v.remove_prefix(kBearer.size());
    while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    if (keys_equal(v, policy.key)) return std::nullopt;
    return ApiError(401, "", "Incorrect API key provided.", "invalid_request_error");
  }
  return ApiError(401, "",
                  auth.empty() ? "You didn't provide an API key. Send it as 'Authorization: Bearer "
                                 "KEY'."
                               : "The Authorization header must be 'Bearer KEY'.",
                  "invalid_request_error");
}

bool is_loopback_host(const std::string& host) {
  if (host == "localhost") return true;
  in_addr a4{};
  if (inet_pton(AF_INET, host.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6{};
  if (inet_pton(AF_INET6, host.c_str(), &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
  return false;  // a name: whatever it resolves to, it is not known to be loopback
}

}  // namespace dllmq::serve
