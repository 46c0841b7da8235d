// API keys for `dllmq serve`, in OpenAI's convention: a client sends `Authorization: Bearer KEY`;
// a request without the server's key gets 401 in OpenAI's error shape. /health stays open (load
// balancers and probes), /metrics is protected unless made public, the page at / is static and
// open (its API calls carry the key the user types into it).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <httplib.h>

#include "serve/api_error.h"

namespace dllmq::serve {

struct ApiKeyPolicy {
  std::string key;              // empty: no authentication
  bool metrics_public = false;  // /metrics without the key
};

// The server's key from, in order, --api-key, --api-key-file (its first line, surrounding white
// space removed), or $DLLMQ_API_KEY; empty when none is set. Both flags at once, an unreadable or
// empty file, or a key with white space or control characters inside is an error naming the
// flag or file.
std::string resolve_api_key(const std::string& flag_key, const std::string& key_file);

// Compares in time that depends only on the lengths, not on where the first difference is.
bool keys_equal(std::string_view a, std::string_view b);

// The 401 that `req` gets under `policy`, or nullopt when it may go on.
std::optional<ApiError> check_api_key(const httplib::Request& req, const ApiKeyPolicy& policy);

// Whether `host` (a --host value) only accepts connections from this machine.
bool is_loopback_host(const std::string& host);

}  // namespace dllmq::serve
