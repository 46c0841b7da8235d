// Benchmark data files: JSONL (optionally gzip-compressed, as HumanEval ships) and JSON lists.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace dllmq::eval {

// One object per non-empty line; ".gz" files are decompressed with gzip(1). Errors name file:line.
std::vector<nlohmann::json> read_jsonl(const std::string& path);
// The same on text in memory; `path` names it in errors.
std::vector<nlohmann::json> parse_jsonl(std::string_view text, const std::string& path);

// Reads a whole file (throws naming it).
std::string read_text_file(const std::string& path);

}  // namespace dllmq::eval
