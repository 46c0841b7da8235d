// The accepted range of every numeric flag, in one table, attached to the parsed options of all
// subcommands (main.cpp calls apply_flag_ranges after registering them). A value outside its
// range, NaN or an infinity is refused while the command line is parsed, before any model loads,
// with the flag and the range in the message ("--top-p: nan is not in (0, 1]"). Unlike
// CLI::Range and CLI::PositiveNumber the checks refuse NaN: every comparison with NaN is false,
// so "x < lo || x > hi" lets it through. Library entry points (generate(), the calibrators) keep
// their own NaN-proof checks for callers that do not come through the command line.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace dllmq::settings {

// Attaches the range validator of each numeric flag of `app`'s subcommands (recursively). A
// numeric flag without an entry in the table stays unchecked, and
// tests/python/test_input_errors.py (which reads every command's --help) fails naming it, so a
// new flag cannot ship without its range.
void apply_flag_ranges(CLI::App& app);

// "--flag" -> "[lo, hi]" style description, for tests and docs; empty if not in the table.
std::string flag_range_text(const std::string& flag);

}  // namespace dllmq::settings
