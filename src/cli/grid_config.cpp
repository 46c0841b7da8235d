#include "cli/grid_config.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "cli/grid_quantize.h"
#include "util/error.h"
#include "util/json_limits.h"

namespace dllmq::cli {

namespace {

using nlohmann::json;

const std::vector<std::string> kTopKeys = {"out",  "model",     "tasks",    "fixed",         "grid",
                                           "args", "calibrate", "quantize", "requires_model"};
const std::vector<std::string> kCalibrateKeys = {"out", "args"};

const char* type_name(const json& v) {
  return v.is_string()    ? "a string"
         : v.is_boolean() ? "a boolean"
         : v.is_number()  ? "a number"
         : v.is_null()    ? "null"
         : v.is_array()   ? "an array"
                          : "an object";
}

struct Checker {
  const std::string& path;
  const std::vector<std::string>& eval_flags;

  [[noreturn]] void bad(const std::string& at, const std::string& what, const json& v) const {
    fail("{}: {} must be {}, got {} ({})", path, at, what, type_name(v), json_brief(v, 60));
  }

  void unknown(const std::string& at, const std::string& key,
               const std::vector<std::string>& known) const {
    const std::string near = closest_name(key, known);
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    if (!near.empty()) fail("{}: unknown key '{}'{}; did you mean '{}'?", path, key, at, near);
    fail("{}: unknown key '{}'{} (known: {})", path, key, at, list);
  }

  void keys(const json& obj, const std::string& at, const std::vector<std::string>& known) const {
    for (const auto& [k, v] : obj.items())
      if (std::find(known.begin(), known.end(), k) == known.end()) unknown(at, k, known);
  }

  // A key that becomes `dllmq eval --KEY`.
  void flag_name(const std::string& at, const std::string& key) const {
    if (eval_flags.empty()) return;
    if (std::find(eval_flags.begin(), eval_flags.end(), key) != eval_flags.end()) return;
    const std::string near = closest_name(key, eval_flags);
    if (!near.empty())
      fail("{}: {}: '{}' is not a flag of dllmq eval; did you mean '{}'?", path, at, key, near);
    fail("{}: {}: '{}' is not a flag of dllmq eval (see dllmq eval --help)", path, at, key);
  }

  // A flag's value: string, number, bool (true: the bare flag, false: left out) or null (left
  // out).
  void flag_value(const std::string& at, const json& v) const {
    if (!(v.is_string() || v.is_number() || v.is_boolean() || v.is_null()))
      bad(at, "a string, number, boolean or null", v);
  }

  void flags_object(const std::string& at, const json& obj, const char* skip = nullptr) const {
    for (const auto& [k, v] : obj.items()) {
      if (skip && k == skip) continue;
      flag_name(at, k);
      flag_value(fmt::format("{}.{}", at, k), v);
    }
  }

  void string_list(const std::string& at, const json& v) const {
    if (!v.is_array()) bad(at, "an array of strings", v);
    for (size_t i = 0; i < v.size(); ++i)
      if (!v[i].is_string() && !v[i].is_number())
        bad(fmt::format("{}[{}]", at, i), "a string (or a number)", v[i]);
  }

  void tasks(const json& v) const {
    if (!v.is_array() || v.empty()) bad("\"tasks\"", "a non-empty array of task objects", v);
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string at = fmt::format("tasks[{}]", i);
      const json& t = v[i];
      if (!t.is_object()) bad(at, "an object with \"task\" and \"data\"", t);
      for (const char* k : {"task", "data"}) {
        if (!t.contains(k)) fail("{}: {} needs \"{}\"", path, at, k);
        if (!t[k].is_string() || t[k].get_ref<const std::string&>().empty())
          bad(fmt::format("{}.{}", at, k), "a non-empty string", t[k]);
      }
      flags_object(at, t);
    }
  }

  void grid(const json& v) const {
    if (!v.is_object()) bad("\"grid\"", "an object mapping flag names to value lists", v);
    for (const auto& [axis, vals] : v.items()) {
      const std::string at = fmt::format("grid.{}", axis);
      flag_name("grid axis", axis);
      if (!vals.is_array() || vals.empty()) bad(at, "a non-empty array of values", vals);
      for (size_t i = 0; i < vals.size(); ++i) {
        const json& x = vals[i];
        const std::string xat = fmt::format("{}[{}]", at, i);
        if (!x.is_object()) {
          flag_value(xat, x);
          continue;
        }
        // A bundle: flags set together, labelled by its name (the run directory's label).
        if (!x.contains("name") || !x["name"].is_string() ||
            x["name"].get_ref<const std::string&>().empty())
          fail("{}: {} is a bundle of flags and needs a \"name\" (a non-empty string)", path, xat);
        flags_object(xat, x, "name");
      }
    }
  }

  void calibrate(const json& v) const {
    if (!v.is_array()) bad("\"calibrate\"", "an array of {\"out\", \"args\"} objects", v);
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string at = fmt::format("calibrate[{}]", i);
      const json& c = v[i];
      if (!c.is_object()) bad(at, "an object {\"out\": FILE, \"args\": [...]}", c);
      keys(c, " in " + at, kCalibrateKeys);
      if (!c.contains("out")) fail("{}: {} needs \"out\" (the artifact to write)", path, at);
      if (!c["out"].is_string() || c["out"].get_ref<const std::string&>().empty())
        bad(at + ".out", "a non-empty string", c["out"]);
      if (c.contains("args")) string_list(at + ".args", c["args"]);
    }
  }

  void all(const json& cfg) const {
    if (!cfg.is_object()) fail("{}: a grid config must be a JSON object", path);
    keys(cfg, "", kTopKeys);
    if (cfg.contains("out") &&
        (!cfg["out"].is_string() || cfg["out"].get_ref<const std::string&>().empty()))
      bad("\"out\"", "a non-empty string (the base run directory)", cfg["out"]);
    if (cfg.contains("model") && !cfg["model"].is_string())
      bad("\"model\"", "a string (a model directory)", cfg["model"]);
    if (cfg.contains("requires_model") && !cfg["requires_model"].is_boolean())
      bad("\"requires_model\"", "true or false", cfg["requires_model"]);
    if (!cfg.contains("tasks")) fail("{}: needs a non-empty \"tasks\" list", path);
    tasks(cfg["tasks"]);
    if (cfg.contains("fixed")) {
      if (!cfg["fixed"].is_object()) bad("\"fixed\"", "an object of flags", cfg["fixed"]);
      flags_object("fixed", cfg["fixed"]);
    }
    if (cfg.contains("grid")) grid(cfg["grid"]);
    if (cfg.contains("args")) string_list("\"args\"", cfg["args"]);
    if (cfg.contains("calibrate")) calibrate(cfg["calibrate"]);
    if (cfg.contains("quantize")) {
      if (!cfg["quantize"].is_array())
        bad("\"quantize\"", "an array of {\"out\", \"model\", \"weights\"} objects",
            cfg["quantize"]);
      for (size_t i = 0; i < cfg["quantize"].size(); ++i)
        check_grid_quantize_entry(cfg["quantize"][i], path, fmt::format("quantize[{}]", i));
    }
  }
};

// Optimal-string-alignment distance: insertions, deletions, substitutions and transpositions of
// neighbours ("gird" -> "grid") each cost 1.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::string closest_name(const std::string& key, const std::vector<std::string>& candidates) {
  // Keys are short; a key of thousands of bytes is no misspelling (and would cost a large table).
  if (key.size() > 64) return "";
  std::string best;
  // Close enough to be a typo: one edit in a short name, up to three in a long one.
  size_t best_d = std::max<size_t>(1, std::min<size_t>(3, key.size() / 4)) + 1;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(key, c);
    if (d < best_d) best = c, best_d = d;
  }
  return best;
}

json parse_grid_config(std::string_view text, const std::string& path) {
  json cfg = parse_json_bounded(text, path);
  if (!cfg.is_object()) fail("{}: a grid config must be a JSON object", path);
  return cfg;
}

void validate_grid_config(const json& cfg, const std::string& path,
                          const std::vector<std::string>& eval_flags) {
  Checker{path, eval_flags}.all(cfg);
}

json read_grid_summary(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return nullptr;
  std::ostringstream text;
  text << in.rdbuf();
  json s;
  try {
    s = parse_json_bounded(text.str(), path);
  } catch (const Error&) {
    return nullptr;
  }
  if (!s.is_object() || !s.contains("config") || !s["config"].is_object() ||
      !s["config"].contains("metrics") || !s["config"]["metrics"].is_array())
    return nullptr;
  for (const auto& m : s["config"]["metrics"])
    if (!m.is_string()) return nullptr;
  for (const char* k : {"n", "tokens_per_s", "mean_nfe"})
    if (s.contains(k) && !s[k].is_number()) return nullptr;
  if (s.contains("n") && !s["n"].is_number_unsigned()) return nullptr;
  return s;
}

}  // namespace dllmq::cli
