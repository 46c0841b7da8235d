#include "serve/decode_fields.h"

#include <algorithm>
#include <memory>
#include <regex>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "serve/api_error.h"
#include "settings/flag_ranges.h"
#include "util/json_limits.h"

namespace dllmq::serve {

namespace {

const char* kServerOnly[] = {"dtype", "w8a8", "threads", "calib", "kv_base_calib", "trace_cache"};

std::string flag_of(const std::string& field) {
  std::string f = "--" + field;
  std::replace(f.begin(), f.end(), '_', '-');
  return f;
}

// The generate flags, defined once by the CLI (on a throwaway target).
const CLI::App& flag_registry() {
  static settings::GenerateFlags sink;
  static const std::unique_ptr<CLI::App> app = [] {
    auto a = std::make_unique<CLI::App>();
    settings::add_generate_flags(a.get(), sink);
    return a;
  }();
  return *app;
}

// JSON value -> the one command-line argument the flag's parser reads, checking the JSON type
// against the flag's (INT, UINT, FLOAT, TEXT or a bool flag).
std::string argument(const CLI::Option& opt, const std::string& field, const nlohmann::json& v) {
  // "INT", "UINT", "FLOAT" or "TEXT", with the range appended ("FLOAT:in (0, 1]") where
  // cli/flag_ranges attached one.
  const std::string type = opt.get_type_name();
  auto is = [&](const char* t) { return type.rfind(t, 0) == 0; };
  if (opt.get_expected_min() == 0) {
    if (!v.is_boolean()) bad_field(field, "{} must be true or false, got {}", field, json_brief(v));
    return v.get<bool>() ? "true" : "false";
  }
  if (is("INT") || is("UINT")) {
    if (!v.is_number_integer())
      bad_field(field, "{} must be an integer, got {}", field, json_brief(v));
    if (is("UINT") && v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0)
      bad_field(field, "{} must be a non-negative integer, got {}", field, json_brief(v));
    return v.dump();
  }
  if (is("FLOAT")) {
    if (!v.is_number()) bad_field(field, "{} must be a number, got {}", field, json_brief(v));
    return v.is_number_float() ? fmt::format("{}", v.get<double>()) : v.dump();
  }
  if (!v.is_string()) bad_field(field, "{} must be a string, got {}", field, json_brief(v));
  // Option names and methods ("dual", "kivi", ...): short. A longer value is refused before the
  // flag parser would echo it whole.
  constexpr size_t kMaxTextBytes = 1024;
  if (v.get_ref<const std::string&>().size() > kMaxTextBytes)
    bad_field(field, "{} is {} bytes; at most {} are accepted", field,
              v.get_ref<const std::string&>().size(), kMaxTextBytes);
  return v.get<std::string>();
}

}  // namespace

bool is_server_only_field(const std::string& field) {
  return std::find(std::begin(kServerOnly), std::end(kServerOnly), field) != std::end(kServerOnly);
}

bool is_decode_field(const std::string& field) {
  if (field.empty() || field.find('-') != std::string::npos || is_server_only_field(field))
    return false;
  return field != "help" && flag_registry().get_option_no_throw(flag_of(field)) != nullptr;
}

void apply_decode_fields(const nlohmann::json& fields, settings::GenerateFlags& flags) {
  CLI::App app;
  settings::add_generate_flags(&app, flags);  // writes only the options that are given
  settings::apply_flag_ranges(app);  // the command line's ranges (NaN-proof) for fields too
  std::vector<std::string> args;
  for (const auto& [field, v] : fields.items()) {
    const CLI::Option* opt = app.get_option_no_throw(flag_of(field));
    if (opt == nullptr) bad_field(field, "unknown field '{}'", field);
    args.push_back(flag_of(field) + "=" + argument(*opt, field, v));
  }
  std::reverse(args.begin(), args.end());  // CLI11 parses a vector from its back
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    // CLI11 names the flag ("Could not convert: --kv-bits = x"): say it with the field's name.
    std::string first;
    const std::string msg = flags_to_fields(e.what(), &first);
    bad_field(first, "{}", msg);
  }
}

std::string flags_to_fields(const std::string& message, std::string* first_field) {
  static const std::regex flag("--([a-z][a-z0-9-]*)");
  std::string out;
  auto it = std::sregex_iterator(message.begin(), message.end(), flag);
  size_t last = 0;
  for (; it != std::sregex_iterator(); ++it) {
    std::string field = (*it)[1].str();
    std::replace(field.begin(), field.end(), '-', '_');
    if (field == "gen_length") field = "max_tokens";
    if (first_field != nullptr && first_field->empty()) *first_field = field;
    out += message.substr(last, it->position() - last) + field;
    last = it->position() + it->length();
  }
  return out + message.substr(last);
}

}  // namespace dllmq::serve
