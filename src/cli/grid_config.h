// GRID.json, the description `dllmq grid` runs (format: cmd_grid.cpp's header and docs/eval.md),
// checked whole before anything runs: every key known (a misspelt one is an error with a "did
// you mean", not a silently smaller grid), every value of the type its use needs (a number where
// a task name belongs is an error naming the key, not a JSON type_error), and the eval flag
// names of tasks, "fixed", grid axes and bundles among `dllmq eval`'s flags.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace dllmq::cli {

// The JSON object of a grid config (nesting bounded, util/json_limits.h); throws dllmq::Error
// naming `path` when the text is not one.
nlohmann::json parse_grid_config(std::string_view text, const std::string& path);

// Checks a parsed grid config (after the command line's -m / --out overrides); throws
// dllmq::Error naming `path` and the key. `eval_flags`: the long names of `dllmq eval`'s flags
// without "--" (an empty list skips the flag-name check).
void validate_grid_config(const nlohmann::json& cfg, const std::string& path,
                          const std::vector<std::string>& eval_flags);

// An eval run's summary.json as the grid reads it, or null when it is missing, not JSON or not
// of the shape the table needs (the run then counts as failed instead of the grid stopping on a
// type error).
nlohmann::json read_grid_summary(const std::string& path);

// The candidate closest to `key` by edit distance when it is close enough to be a misspelling
// ("" otherwise): the "did you mean" of unknown-key errors.
std::string closest_name(const std::string& key, const std::vector<std::string>& candidates);

}  // namespace dllmq::cli
