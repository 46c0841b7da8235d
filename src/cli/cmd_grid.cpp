// dllmq grid --config GRID.json: the cross product of decoding settings x tasks, each run as a
// resumable `dllmq eval` child process in its own run directory, then one comparison table.
//
// GRID.json:
//   {"out": "runs/g1", "model": "DIR",
//    "tasks": [{"task": "gsm8k", "data": "shared/data/gsm8k/test.jsonl", "limit": 100, "chat":
//    true}], "fixed": {"block-length": 32},                       // flags given to every run
//    "grid":  {"gen-length": [256, 512], "threshold": [null, 0.9], "cache": ["none", "prefix"]},
//    "args":  ["--workers", "2"]}                          // extra eval arguments, verbatim
// An axis value may be an object: a bundle of flags set together, labelled by its "name", e.g.
//    "grid": {"kv": [{"name": "fp16", "kv": "fp16"}, {"name": "kivi-2", "kv": "kivi",
//                     "kv-bits": 2}]}
// Keys are `dllmq eval` flag names without "--"; null leaves the flag out, true passes it bare.
// "quantize": [{"out": DIR, "model": M, "weights": "int4"}] writes weight-quantized copies first
// (cli/grid_quantize.h), for a "model" axis that compares weight formats.
// Outputs: OUT/grid.json (every summary), OUT/grid.md (table + average per setting over tasks),
// OUT/grid.csv (one row per task x point, weight and KV bytes included) and OUT/grid.png (headline
// metric vs effective KV bits); with a "kv" axis also OUT/cells.json (per-problem results of every
// cell), OUT/frontier.md/.json and OUT/frontier-<setting>.png (cli/grid_frontier.h: frontiers,
// matched budgets, McNemar, the paper-form average). `dllmq grid --reduce --out OUT` recomputes
// those from cells.json.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/grid_config.h"
#include "cli/grid_frontier.h"
#include "cli/grid_quantize.h"
#include "cli/grid_slurm.h"
#include "cli/plot_helper.h"
#include "eval/data.h"
#include "eval/run.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_limits.h"

namespace dllmq::cli {

namespace {

namespace fs = std::filesystem;

std::string value_text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  // A bundle of flags (one grid value that sets several flags, e.g. a KV method with its bits
  // and calibration file) is shown by its "name".
  if (v.is_object() && v.contains("name")) return value_text(v["name"]);
  return v.dump();
}

// Directory-name-safe "k=v,k=v" label of one grid point. Single-valued axes are left out (the
// same everywhere), except "model": `-m` narrows that axis to one model, and its runs must not
// land in the directories of another model's.
std::string label(const std::vector<std::pair<std::string, nlohmann::json>>& point,
                  const nlohmann::json& grid) {
  std::string s;
  for (const auto& [k, v] : point) {
    if (grid.at(k).size() < 2 && k != "model") continue;
    s += (s.empty() ? "" : ",") + k + "=" + (v.is_null() ? "off" : value_text(v));
  }
  for (char& c : s)
    if (c == '/' || c == ' ') c = '_';
  return s.empty() ? "default" : s;
}

void add_flag(std::vector<std::string>& argv, const std::string& key, const nlohmann::json& v,
              const std::string& cfg) {
  if (v.is_null() || (v.is_boolean() && !v.get<bool>())) return;
  argv.push_back("--" + key);
  if (v.is_boolean()) return;
  if (!v.is_string() && !v.is_number())
    fail("{}: value of '{}' must be a string, number, bool or null", cfg, key);
  argv.push_back(value_text(v));
}

// Runs `dllmq eval ...` with stdout going to `log` (progress stays on stderr).
int run_child(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) fail("grid: fork failed");
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) dup2(fd, 1);
    execv("/proc/self/exe", args.data());
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// One finished (or failed) task x point run, flattened for the table, CSV and plot.
struct RunRow {
  std::string task, label;
  size_t point = 0;                    // index into the grid points (the plot's series)
  std::vector<nlohmann::json> values;  // per grid axis
  int exit_code = 0;
  bool ok = false;
  size_t n = 0;
  std::vector<std::string> metric_names;
  std::map<std::string, std::optional<double>> metrics;
  std::optional<double> tokens_per_s, mean_nfe, kv_bytes, kv_bytes_fp16, effective_bits;
  std::optional<double> bits_k, bits_v;  // effective bits of K and of V apart
  std::optional<double> weight_bytes;    // the checkpoint's bytes (eval's model facts)
  std::string weight_format;             // "bf16", "int4-g128-sym", ...
  std::vector<std::string> ids;          // per problem (samples.jsonl): task_id, correct
  std::vector<uint8_t> correct;
  std::optional<double> headline() const {
    return metric_names.empty() ? std::nullopt : metrics.at(metric_names[0]);
  }
};

std::optional<double> number(const nlohmann::json& j, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (j.contains(k) && j[k].is_number()) return j[k].get<double>();
  return std::nullopt;
}

// The per-problem records of a cell: samples.jsonl, or the shard files samples.<i>-of-<n>.jsonl
// that a Slurm grid's cells leave (its merge writes summary.json only); a task_id in two shard
// files counts once, as in eval::merge_runs.
std::vector<nlohmann::json> cell_samples(const std::string& dir) {
  const fs::path single = fs::path(dir) / eval::samples_file_name(0, 1);
  if (fs::exists(single)) return eval::read_samples(single.string(), false);
  std::vector<std::string> files;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      if (name.starts_with("samples.") && name.ends_with(".jsonl") &&
          name.find("-of-") != std::string::npos)
        files.push_back(e.path().string());
    }
  std::sort(files.begin(), files.end());
  std::vector<nlohmann::json> rows;
  std::set<std::string> seen;
  for (const auto& f : files)
    for (auto& r : eval::read_samples(f, false))
      if (!r.contains("task_id") || seen.insert(r["task_id"].dump()).second)
        rows.push_back(std::move(r));
  return rows;
}

// Mean of a per-sample field over the cell's samples (0 = not recorded, e.g. the fake generator).
std::optional<double> sample_mean(const std::vector<nlohmann::json>& samples, const char* key) {
  double sum = 0;
  size_t n = 0;
  for (const auto& r : samples)
    if (r.contains(key) && r[key].is_number()) sum += r[key].get<double>(), ++n;
  if (n == 0 || sum <= 0) return std::nullopt;
  return sum / n;
}

void fill_from_summary(RunRow& row, const nlohmann::json& s, const std::string& dir) {
  row.ok = true;
  row.n = s.value("n", size_t(0));
  if (s.contains("config") && s["config"].contains("metrics"))
    for (const auto& m : s["config"]["metrics"]) {
      const std::string name = m.get<std::string>();
      row.metric_names.push_back(name);
      row.metrics[name] = number(s, {name.c_str()});
    }
  row.tokens_per_s = number(s, {"tokens_per_s"});
  row.weight_bytes = number(s, {"weight_bytes"});
  if (s.contains("weight_format") && s["weight_format"].is_string())
    row.weight_format = s["weight_format"];
  row.mean_nfe = number(s, {"mean_nfe"});
  // Summaries written so far carry no KV sizes; the per-sample records carry kv_bytes (peak bytes
  // of the KV store), so fall back to their mean. Effective bits need the fp16 size as well.
  const std::vector<nlohmann::json> samples = cell_samples(dir);
  row.kv_bytes = number(s, {"kv_bytes", "mean_kv_bytes"});
  if (!row.kv_bytes) row.kv_bytes = sample_mean(samples, "kv_bytes");
  row.kv_bytes_fp16 = number(s, {"kv_bytes_fp16", "mean_kv_bytes_fp16"});
  if (!row.kv_bytes_fp16) row.kv_bytes_fp16 = sample_mean(samples, "kv_bytes_fp16");
  if (row.kv_bytes && row.kv_bytes_fp16 && *row.kv_bytes_fp16 > 0)
    row.effective_bits = 16.0 * *row.kv_bytes / *row.kv_bytes_fp16;
  // Per problem: what the paired statistics need (the fp16 size holds K and V alike).
  double k = 0, v = 0, f16 = 0;
  for (const auto& r : samples) {
    row.ids.push_back(r["task_id"].get<std::string>());
    row.correct.push_back(r.value("correct", false) ? 1 : 0);
    k += r.value("kv_bytes_k", 0.0), v += r.value("kv_bytes_v", 0.0);
    f16 += r.value("kv_bytes_fp16", 0.0);
  }
  if (f16 > 0 && k + v > 0) row.bits_k = 32.0 * k / f16, row.bits_v = 32.0 * v / f16;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string opt_text(const std::optional<double>& v, const char* f = "{}") {
  return v ? fmt::format(fmt::runtime(f), *v) : std::string();
}

std::string grid_csv(const std::vector<RunRow>& rows, const std::vector<std::string>& axes) {
  std::vector<std::string> metrics;  // union over tasks, in order of first appearance
  for (const auto& r : rows)
    for (const auto& m : r.metric_names)
      if (std::find(metrics.begin(), metrics.end(), m) == metrics.end()) metrics.push_back(m);
  std::string csv = "task";
  for (const auto& a : axes) csv += fmt::format(",{}", csv_field(a));
  csv += ",n";
  for (const auto& m : metrics) csv += fmt::format(",{}", csv_field(m));
  csv +=
      ",tokens_per_s,mean_nfe,kv_bytes,kv_bytes_fp16,effective_bits,effective_bits_k,"
      "effective_bits_v,weight_format,weight_bytes,total_bytes,exit_code\n";
  for (const auto& r : rows) {
    csv += csv_field(r.task);
    for (const auto& v : r.values)
      csv += fmt::format(",{}", csv_field(v.is_null() ? "off" : value_text(v)));
    csv += r.ok ? fmt::format(",{}", r.n) : std::string(",");
    for (const auto& m : metrics) {
      const auto it = r.metrics.find(m);
      csv += fmt::format(",{}",
                         it == r.metrics.end() ? std::string() : opt_text(it->second, "{:.6g}"));
    }
    // total_bytes: what a run holds in memory for the model and its cache (weights + mean KV).
    const std::optional<double> total = r.weight_bytes && r.kv_bytes
                                            ? std::optional<double>(*r.weight_bytes + *r.kv_bytes)
                                            : std::nullopt;
    csv += fmt::format(",{},{},{},{},{},{},{},{},{},{},{}\n", opt_text(r.tokens_per_s, "{:.4g}"),
                       opt_text(r.mean_nfe, "{:.4g}"), opt_text(r.kv_bytes, "{:.0f}"),
                       opt_text(r.kv_bytes_fp16, "{:.0f}"), opt_text(r.effective_bits, "{:.3g}"),
                       opt_text(r.bits_k, "{:.3g}"), opt_text(r.bits_v, "{:.3g}"),
                       csv_field(r.weight_format), opt_text(r.weight_bytes, "{:.0f}"),
                       opt_text(total, "{:.0f}"), r.exit_code);
  }
  return csv;
}

// The plot's series of a KV setting: its name without a trailing "-<bits>" ("kvquant-ar-2" and
// "kvquant-ar-4" are one method at two widths, joined by a line from 2 to 4 bits).
std::string kv_family(const std::string& name) {
  size_t i = name.size();
  while (i > 0 && std::isdigit(static_cast<unsigned char>(name[i - 1]))) --i;
  return i < name.size() && i > 1 && name[i - 1] == '-' ? name.substr(0, i - 1) : name;
}

// Per grid point: the mean of each task's headline metric (the paper's "average" column), and
// the plot of it against effective bits (drawn with matplotlib, tools/plot/scatter.py): one
// colour per KV method (the "kv" axis value up to its bits, else per point), one marker per
// value of the "cache" axis.
std::string averages_and_plot(const std::vector<RunRow>& rows, size_t n_points, size_t n_tasks,
                              const std::vector<std::string>& axes, const std::string& png_path) {
  std::string md;
  nlohmann::json pts = nlohmann::json::array();
  const auto axis = [&](const char* name) {
    return int(std::find(axes.begin(), axes.end(), name) - axes.begin());
  };
  const int kv_axis = axis("kv"), cache_axis = axis("cache"), model_axis = axis("model");
  for (size_t p = 0; p < n_points; ++p) {
    std::string name, series, marker;
    double head = 0, tps = 0, nfe = 0, bits = 0;
    size_t n = 0, ok = 0, with_bits = 0;
    for (const auto& r : rows) {
      if (r.point != p) continue;
      name = r.label;
      series = kv_axis < int(r.values.size()) ? kv_family(value_text(r.values[kv_axis])) : r.label;
      marker = cache_axis < int(r.values.size()) ? "cache " + value_text(r.values[cache_axis]) : "";
      if (model_axis < int(r.values.size()))
        marker += (marker.empty() ? "" : ", ") + value_text(r.values[model_axis]);
      if (!r.ok || !r.headline()) continue;
      ++ok, n += r.n, head += *r.headline(), tps += r.tokens_per_s.value_or(0),
          nfe += r.mean_nfe.value_or(0);
      if (r.effective_bits) ++with_bits, bits += *r.effective_bits;
    }
    if (ok < n_tasks) {
      md += fmt::format(
          "| average | {} | - | {} of {} tasks failed or lack a headline value | - | - | - | - |\n",
          name, n_tasks - ok, n_tasks);
      continue;
    }
    head /= ok, tps /= ok, nfe /= ok;
    // Runs without a recorded fp16 KV size are drawn hollow at 16 bits (dense store, assumed).
    const bool known = with_bits == ok;
    md +=
        fmt::format("| average | {} | {} | headline {:.4f} | {} | - | {:.2f} | {:.1f} |\n", name, n,
                    head, known ? fmt::format("{:.2f}", bits / ok) : std::string("-"), tps, nfe);
    pts.push_back({{"x", known ? bits / ok : 16.0},
                   {"y", head},
                   {"label", name},
                   {"series", series},
                   {"marker", marker},
                   {"hollow", !known}});
  }
  if (!pts.empty()) {
    try {
      draw_with_matplotlib("scatter.py",
                           {{"title", "Mean headline metric over tasks vs effective KV bits"},
                            {"xlabel", "effective bits per cached K/V element (all overheads)"},
                            {"ylabel", "mean headline metric"},
                            {"points", pts}},
                           png_path);
    } catch (const Error& e) {
      fmt::print(stderr, "grid: no plot: {}\n", e.what());
    }
  }
  return md;
}

// The frontier's view of the grid: the cells of a "kv" axis with per-problem results.
std::vector<FrontierCell> frontier_cells(const std::vector<RunRow>& rows,
                                         const std::vector<std::string>& axes,
                                         const nlohmann::json& cfg) {
  const auto axis = [&](const char* name) {
    return size_t(std::find(axes.begin(), axes.end(), name) - axes.begin());
  };
  const size_t kv_axis = axis("kv"), cache_axis = axis("cache"), model_axis = axis("model");
  std::vector<FrontierCell> cells;
  if (kv_axis == axes.size()) return cells;
  const auto fixed = cfg.value("fixed", nlohmann::json::object());
  for (const auto& r : rows) {
    if (!r.ok || r.ids.empty() || !r.effective_bits) continue;
    const nlohmann::json& kv = r.values[kv_axis];
    FrontierCell c;
    c.name = value_text(kv);
    const std::string method =
        kv.is_object() ? (kv.contains("kv") ? value_text(kv["kv"]) : "") : value_text(kv);
    c.quantized = method == "kivi" || method == "kvquant" || method == "dllm-kvq";
    c.family = kv_method_family(c.name);
    c.nominal_bits = c.quantized ? kv_nominal_bits(c.name, kv) : 16;
    c.paper = c.name.find('@') == std::string::npos;
    const nlohmann::json model =
        model_axis < axes.size() ? r.values[model_axis] : cfg.value("model", nlohmann::json(""));
    c.model = fs::path(value_text(model)).filename().string();
    if (c.model.empty()) c.model = "model";
    c.cache = cache_axis < axes.size()  ? value_text(r.values[cache_axis])
              : fixed.contains("cache") ? value_text(fixed["cache"])
                                        : "none";
    c.task = r.task;
    c.eff_bits = *r.effective_bits;
    c.eff_bits_k = r.bits_k.value_or(*r.effective_bits);
    c.eff_bits_v = r.bits_v.value_or(*r.effective_bits);
    c.ids = r.ids;
    c.correct = r.correct;
    cells.push_back(std::move(c));
  }
  return cells;
}

// OUT/cells.json (unless reducing from it), frontier.md/.json and the frontier plots; returns the
// markdown.
std::string write_frontier(const std::vector<FrontierCell>& cells, const std::string& out,
                           const FrontierOptions& fo, bool write_cells) {
  if (write_cells)
    write_file_atomic((fs::path(out) / "cells.json").string(), cells_to_json(cells).dump() + "\n");
  FrontierReport rep = reduce_frontier(cells, fo);
  const std::vector<std::string> pngs = draw_frontiers(rep, out);
  if (!pngs.empty()) {
    rep.markdown += "\nFrontier plots (one per setting):";
    for (const auto& p : pngs) rep.markdown += " " + p;
    rep.markdown += "\n";
  }
  rep.json["plots"] = pngs;
  write_file_atomic((fs::path(out) / "frontier.json").string(), rep.json.dump(1) + "\n");
  write_file_atomic((fs::path(out) / "frontier.md").string(), rep.markdown);
  return rep.markdown;
}

// Command-line overrides of the config's "model" and "out", and "{out}" in its strings (so the
// artifacts a config calibrates follow its run directory).
struct GridOverrides {
  std::string model, out;
};

std::string with_out(std::string s, const std::string& out) {
  for (size_t at; (at = s.find("{out}")) != std::string::npos;) s.replace(at, 5, out);
  return s;
}

nlohmann::json with_out(const nlohmann::json& v, const std::string& out) {
  if (v.is_string()) return with_out(v.get<std::string>(), out);
  if (v.is_array() || v.is_object()) {
    nlohmann::json c = v;
    for (auto& x : c) x = with_out(x, out);
    return c;
  }
  return v;
}

// "{axis}" in a bundle's string values stands for that axis's value at this point, so one
// bundle can name e.g. the artifact calibrated for the point's cache mode.
nlohmann::json substitute(const nlohmann::json& v,
                          const std::vector<std::pair<std::string, nlohmann::json>>& point) {
  if (!v.is_string()) return v;
  std::string s = v.get<std::string>();
  for (const auto& [k, pv] : point) {
    if (pv.is_object()) continue;
    const std::string key = "{" + k + "}";
    for (size_t at; (at = s.find(key)) != std::string::npos;)
      s.replace(at, key.size(), pv.is_null() ? "off" : value_text(pv));
  }
  return s;
}

// Calibration artifacts the grid needs ("calibrate": [{"out": FILE, "args": [...]}, ...]),
// made with `dllmq calibrate ARGS --out FILE` unless FILE already exists. With a "model" grid
// axis every entry is made once per model, "{model}" in its strings standing for the model
// (so "out" must contain it: artifacts are model-specific).
// With a plan (the Slurm launcher) the missing artifacts are listed there instead of made.
void run_calibrations(const nlohmann::json& cfg, const std::string& cfg_path, bool dry_run,
                      GridPlan* plan) {
  if (!cfg.contains("calibrate")) return;
  std::vector<nlohmann::json> models;  // null: the config's "model" (or the embedded one)
  const bool model_axis = cfg.contains("grid") && cfg["grid"].contains("model");
  if (model_axis)
    for (const auto& m : cfg["grid"]["model"]) models.push_back(m);
  else
    models.push_back(cfg.contains("model") ? cfg["model"] : nlohmann::json());
  for (const auto& c : cfg["calibrate"]) {
    if (!c.is_object() || !c.contains("out") || !c["out"].is_string())
      fail("{}: each \"calibrate\" entry needs \"out\" and \"args\"", cfg_path);
    if (model_axis && c["out"].get<std::string>().find("{model}") == std::string::npos)
      fail("{}: with a \"model\" grid axis each calibrate \"out\" needs \"{{model}}\"", cfg_path);
    for (const auto& model : models) {
      const std::vector<std::pair<std::string, nlohmann::json>> at = {{"model", model}};
      const std::string out = model.is_null() ? c["out"].get<std::string>()
                                              : substitute(c["out"], at).get<std::string>();
      std::vector<std::string> argv = {"dllmq", "calibrate"};
      add_flag(argv, "model", model, cfg_path);
      for (const auto& a : c.value("args", nlohmann::json::array()))
        argv.push_back(value_text(model.is_null() ? a : substitute(a, at)));
      argv.push_back("--out");
      argv.push_back(out);
      std::string shown;
      for (size_t i = 1; i < argv.size(); ++i) shown += (i > 1 ? " " : "") + argv[i];
      if (fs::exists(out)) {
        fmt::print(stderr, "dllmq grid: {} exists, not recalibrated\n", out);
        continue;
      }
      fmt::print(stderr, "dllmq grid: {}\n", shown);
      if (plan) {
        plan->calibrations.push_back({out, argv});
        continue;
      }
      if (dry_run) continue;
      if (fs::path(out).has_parent_path()) fs::create_directories(fs::path(out).parent_path());
      const std::string log = out + ".log";
      if (const int rc = run_child(argv, log); rc != 0)
        fail("grid: calibration for {} failed (exit {}; see {})", out, rc, log);
    }
  }
}

// `dllmq eval`'s long flag names: the keys a grid config may give its runs.
std::vector<std::string> eval_flag_names() {
  CLI::App tmp;
  register_eval(tmp);
  std::vector<std::string> names;
  for (const CLI::Option* o : tmp.get_subcommand("eval")->get_options())
    for (const auto& n : o->get_lnames()) names.push_back(n);
  return names;
}

void run_grid(const std::string& cfg_path, bool dry_run, const GridOverrides& over,
              const LauncherOptions& launcher, const FrontierOptions& fo) {
  auto cfg = parse_grid_config(eval::read_text_file(cfg_path), cfg_path);
  if (!over.out.empty()) cfg["out"] = over.out;
  if (!over.model.empty()) {
    if (cfg.contains("grid") && cfg["grid"].is_object() && cfg["grid"].contains("model"))
      cfg["grid"]["model"] = nlohmann::json::array({over.model});  // -m: that model only
    else
      cfg["model"] = over.model;
  }
  validate_grid_config(cfg, cfg_path, eval_flag_names());  // keys and types (grid_config.h)
  if (!cfg.contains("out") || !cfg["out"].is_string())
    fail("{}: needs \"out\" (base run directory) or --out", cfg_path);
  if (cfg.contains("model") && cfg.contains("grid") && cfg["grid"].is_object() &&
      cfg["grid"].contains("model"))
    fail("{}: give the model either as \"model\" or as a \"model\" grid axis, not both", cfg_path);
  if (cfg.value("requires_model", false) && !cfg.contains("model"))
    fail("{}: this grid runs a model you give: add -m MODEL_DIR (and --out DIR per model)",
         cfg_path);
  {
    const std::string o = cfg["out"];
    for (auto& [k, v] : cfg.items())
      if (k != "out") v = with_out(v, o);
  }
  if (!cfg.contains("tasks") || !cfg["tasks"].is_array() || cfg["tasks"].empty())
    fail("{}: needs a non-empty \"tasks\" list", cfg_path);
  const std::string out = cfg["out"];
  // The Slurm launcher collects what is to run into a plan and submits it after the loop below;
  // its merge job (--collect) finds the calibrations made and the cells' shards finished.
  GridPlan slurm_plan;
  GridPlan* plan = launcher.launcher == "slurm" && !launcher.collect ? &slurm_plan : nullptr;
  // Weight-quantized copies first (the calibrations may run on them). They take seconds, so a
  // Slurm grid makes them here, on the submitting node, before it plans the jobs.
  if (!launcher.collect) run_grid_quantizations(cfg, dry_run);
  if (!launcher.collect) run_calibrations(cfg, cfg_path, dry_run, plan);
  const nlohmann::json grid = cfg.value("grid", nlohmann::json::object());
  // Cross product of the grid axes, in the file's key order.
  std::vector<std::vector<std::pair<std::string, nlohmann::json>>> points = {{}};
  if (cfg.contains("grid")) {
    if (!cfg["grid"].is_object()) fail("{}: \"grid\" must map flag names to value lists", cfg_path);
    for (const auto& [k, vals] : cfg["grid"].items()) {
      if (!vals.is_array() || vals.empty())
        fail("{}: grid axis '{}' needs a non-empty list", cfg_path, k);
      std::vector<std::vector<std::pair<std::string, nlohmann::json>>> next;
      for (const auto& p : points)
        for (const auto& v : vals) {
          auto q = p;
          q.emplace_back(k, v);
          next.push_back(std::move(q));
        }
      points = std::move(next);
    }
  }
  std::vector<std::string> axes;
  for (const auto& [k, v] : grid.items()) axes.push_back(k);
  nlohmann::json results = nlohmann::json::array();
  std::vector<RunRow> rows;
  std::string md =
      "| task | point | n | metrics | eff. bits K+V | KV bytes | tokens/s | mean NFE |\n"
      "|---|---|---|---|---|---|---|---|\n";
  int failures = 0;
  for (const auto& t : cfg["tasks"]) {
    if (!t.is_object() || !t.contains("task") || !t.contains("data"))
      fail("{}: each task needs \"task\" and \"data\"", cfg_path);
    const std::string task = t["task"];
    for (size_t pi = 0; pi < points.size(); ++pi) {
      const auto& point = points[pi];
      const std::string dir = (fs::path(out) / task / label(point, grid)).string();
      std::vector<std::string> argv = {
          "dllmq", "eval", "--task",   task,    "--data", t["data"].get<std::string>(),
          "--out", dir,    "--resume", "--json"};
      if (cfg.contains("model")) add_flag(argv, "model", cfg["model"], cfg_path);
      for (const auto& [k, v] : t.items())
        if (k != "task" && k != "data") add_flag(argv, k, v, cfg_path);
      if (cfg.contains("fixed"))
        for (const auto& [k, v] : cfg["fixed"].items()) add_flag(argv, k, v, cfg_path);
      for (const auto& [k, v] : point) {
        if (!v.is_object()) {
          add_flag(argv, k, v, cfg_path);
          continue;
        }
        for (const auto& [k2, v2] : v.items())
          if (k2 != "name") add_flag(argv, k2, substitute(v2, point), cfg_path);
      }
      if (cfg.contains("args"))
        for (const auto& a : cfg["args"]) argv.push_back(value_text(a));
      std::string shown;
      for (size_t i = 1; i < argv.size(); ++i) shown += (i > 1 ? " " : "") + argv[i];
      fmt::print(stderr, "dllmq grid: {}{}\n", launcher.collect ? "merging the shards of: " : "",
                 shown);
      if (plan) {
        plan->cells.push_back({task, label(point, grid), dir, argv});
        continue;
      }
      if (dry_run) continue;
      fs::create_directories(dir);
      const int rc = launcher.collect ? collect_cell_shards(dir, launcher.shards)
                                      : run_child(argv, (fs::path(dir) / "eval.stdout").string());
      nlohmann::json r = {
          {"task", task}, {"point", label(point, grid)}, {"run_dir", dir}, {"exit_code", rc}};
      RunRow row;
      row.task = task, row.label = label(point, grid), row.point = pi, row.exit_code = rc;
      for (const auto& [k, v] : point) row.values.push_back(v);
      const fs::path sp = fs::path(dir) / "summary.json";
      nlohmann::json summary = rc == 0 ? read_grid_summary(sp.string()) : nlohmann::json();
      if (summary.is_object()) {
        r["summary"] = std::move(summary);
        const auto& s = r["summary"];
        fill_from_summary(row, s, dir);
        std::string metrics;
        for (const auto& m : s["config"]["metrics"]) {
          const auto& v = s[m.get<std::string>()];
          metrics += fmt::format("{}{} {}", metrics.empty() ? "" : ", ", m.get<std::string>(),
                                 v.is_number() ? fmt::format("{:.4f}", v.get<double>()) : "n/a");
        }
        md += fmt::format("| {} | {} | {} | {} | {} | {} | {:.2f} | {:.1f} |\n", task,
                          label(point, grid), s.value("n", 0), metrics,
                          opt_text(row.effective_bits, "{:.2f}"), opt_text(row.kv_bytes, "{:.0f}"),
                          s.value("tokens_per_s", 0.0), s.value("mean_nfe", 0.0));
      } else {
        ++failures;
        md += fmt::format("| {} | {} | - | run failed (exit {}) | - | - | - | - |\n", task,
                          label(point, grid), rc);
      }
      results.push_back(std::move(r));
      rows.push_back(std::move(row));
    }
  }
  if (plan) return submit_grid_to_slurm(slurm_plan, cfg, out, launcher, dry_run);
  if (dry_run) return;
  fs::create_directories(out);
  write_file_atomic((fs::path(out) / "grid.json").string(), results.dump(2) + "\n");
  md += averages_and_plot(rows, points.size(), cfg["tasks"].size(), axes,
                          (fs::path(out) / "grid.png").string());
  md +=
      "\ngrid.png: mean headline metric over tasks (y) against effective KV bits (x); colour =\n"
      "KV method, marker = cache mode; hollow = no fp16 KV size recorded, drawn at 16 bits.\n";
  if (const auto cells = frontier_cells(rows, axes, cfg); !cells.empty())
    md += write_frontier(cells, out, fo, true);
  write_file_atomic((fs::path(out) / "grid.md").string(), md);
  write_file_atomic((fs::path(out) / "grid.csv").string(), grid_csv(rows, axes));
  std::fputs(md.c_str(), stdout);
  if (failures)
    fail("grid: {} of {} runs failed (see {}/grid.json)", failures, results.size(), out);
}

std::vector<double> parse_budgets(const std::string& text) {
  std::vector<double> out;
  size_t a = 0;
  while (a <= text.size()) {
    const size_t b = std::min(text.find(',', a), text.size());
    const std::string item = text.substr(a, b - a);
    double v = 0;
    size_t used = 0;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || !(v > 0 && v <= 32))
      fail("--budgets '{}': '{}' is not a number of bits in (0, 32]", text, item);
    out.push_back(v);
    a = b + 1;
  }
  return out;
}

}  // namespace

void register_grid(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("grid", "Run dllmq eval over a grid of decoding settings (GRID.json)");
  auto cfg = std::make_shared<std::string>();
  auto dry = std::make_shared<bool>(false);
  auto over = std::make_shared<GridOverrides>();
  auto launcher = std::make_shared<LauncherOptions>();
  cmd->add_option("--config", *cfg, "grid description (see docs/eval.md)");
  cmd->add_option("-m,--model", over->model, "model directory (overrides the config's \"model\")");
  cmd->add_option("--out", over->out,
                  "run directory (overrides the config's \"out\"; \"{out}\" in the config's "
                  "strings stands for it)");
  cmd->add_flag("--dry-run", *dry,
                "print the eval command lines only (slurm: the job scripts, nothing submitted)");
  add_launcher_options(*cmd, *launcher);
  auto fo = std::make_shared<FrontierOptions>();
  auto reduce = std::make_shared<bool>(false);
  auto budgets = std::make_shared<std::string>("3,4,5");
  cmd->add_flag("--reduce", *reduce,
                "recompute the frontier statistics of a finished grid from --out DIR/cells.json "
                "(nothing is run)");
  cmd->add_option("--bootstrap", fo->replicates,
                  "bootstrap replicates of the frontier intervals (100..100000)")
      ->capture_default_str();
  cmd->add_option("--bootstrap-seed", fo->seed, "seed of the bootstrap resampler")
      ->capture_default_str();
  cmd->add_option("--budgets", *budgets,
                  "effective bits at which methods are compared, comma-separated (each in "
                  "(0, 32])")
      ->capture_default_str();
  cmd->callback([cfg, dry, over, launcher, fo, reduce, budgets] {
    if (fo->replicates < 100 || fo->replicates > 100000)
      fail("--bootstrap {}: accepted range is 100..100000", fo->replicates);
    fo->budgets = parse_budgets(*budgets);
    if (*reduce) {
      if (over->out.empty())
        fail("grid --reduce: give the finished grid's directory with --out DIR");
      const std::string path = (fs::path(over->out) / "cells.json").string();
      if (!fs::exists(path))
        fail("grid --reduce: {} does not exist (a grid with a \"kv\" axis writes it)", path);
      const auto cells =
          cells_from_json(parse_json_bounded(eval::read_text_file(path), path), path);
      std::fputs(write_frontier(cells, over->out, *fo, false).c_str(), stdout);
      return;
    }
    if (launcher->status) {
      if (over->out.empty()) fail("grid --status: give the run directory with --out DIR");
      return print_grid_status(over->out);
    }
    if (cfg->empty()) fail("grid: --config GRID.json is required (or --status --out DIR)");
    if (launcher->shards > 1 && launcher->launcher != "slurm" && !launcher->collect)
      fail("grid --shards {}: sharding cells needs --launcher slurm", launcher->shards);
    run_grid(*cfg, *dry, *over, *launcher, *fo);
  });
}

}  // namespace dllmq::cli
