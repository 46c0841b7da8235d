// dllmq's decoding fields of a request: the command line's flags under their names with '_' for
// '-' (block_length, threshold, cache, kv_bits, ...). They are applied over the server's
// defaults through the CLI's own option definitions (cli/generate_flags), so a field is spelled,
// typed and checked exactly like its flag, and a new flag is a new field without more code.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "settings/generate_flags.h"

namespace dllmq::serve {

// Whether `field` is one of the per-request decoding fields (gen_length included).
bool is_decode_field(const std::string& field);

// Whether `field` names a flag that only the server's command line may set (it is shared by
// every request in a batch, or reads server files): dtype, threads, calib, trace_cache.
bool is_server_only_field(const std::string& field);

// Sets the fields of `fields` (an object holding decoding fields only) on `flags`. A JSON value
// of the wrong type or one the flag rejects is an ApiError (400) naming the field.
void apply_decode_fields(const nlohmann::json& fields, settings::GenerateFlags& flags);

// The message of a decoding error with flag spellings turned into request field names
// ("--block-length 16" -> "block_length 16", "--gen-length" -> "max_tokens"), and the first field
// it names ("" if none).
std::string flags_to_fields(const std::string& message, std::string* first_field);

}  // namespace dllmq::serve
