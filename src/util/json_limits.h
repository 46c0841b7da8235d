// Bounds on JSON read from outside (HTTP request bodies, config files, JSONL records), checked
// before nlohmann::json builds a value. nlohmann's parser is iterative, but copying, comparing
// and dumping a value recurse once per nesting level: a body of 100,000 '[' (under any sane
// --max-body) overflowed the stack of `dllmq serve` when an error message echoed it. Depth is
// therefore bounded while scanning the text, and values shown in messages are cut short.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace dllmq {

// Nesting depth of JSON from a client of `dllmq serve`. The deepest request the API defines is
// 4 levels (body > messages > [i] > content parts > part); 32 leaves room for extensions.
inline constexpr int kMaxRequestJsonDepth = 32;
// Nesting depth of the JSON files dllmq reads (configs, tokenizer.json, JSONL data, grid
// configs). The deepest real file (a tokenizer.json with nested normalizer sequences) is < 10.
inline constexpr int kMaxFileJsonDepth = 128;

// The byte offset at which `text` opens its (max_depth + 1)-th nested array or object, or npos
// when it never nests deeper than max_depth. Brackets inside strings (with \" escapes) do not
// count. One linear pass; it does not validate the JSON (the parser does that next).
size_t json_depth_exceeded_at(std::string_view text, int max_depth);

// Throws dllmq::Error naming `what` when `text` nests deeper than max_depth.
void check_json_depth(std::string_view text, std::string_view what,
                      int max_depth = kMaxFileJsonDepth);

// json::parse(text, nullptr, false) after the depth check: a discarded value for invalid JSON
// and for nesting deeper than max_depth (callers that report "not a JSON object" at FILE:LINE).
nlohmann::json parse_json_or_discarded(std::string_view text, int max_depth = kMaxFileJsonDepth);

// json::parse after the depth check. Throws dllmq::Error naming `what` (a file, or "the request
// body") for invalid JSON and for nesting deeper than max_depth.
nlohmann::json parse_json_bounded(std::string_view text, std::string_view what,
                                  int max_depth = kMaxFileJsonDepth);

// j.dump(indent) with invalid UTF-8 in strings replaced by U+FFFD instead of a type_error: text
// from a model or a client is not guaranteed to be valid UTF-8, and writing it must not throw.
inline std::string json_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A value for an error message: its compact JSON, at most max_chars bytes (cut with "..."), with
// invalid UTF-8 replaced. Never throws.
std::string json_brief(const nlohmann::json& v, size_t max_chars = 120);

}  // namespace dllmq
