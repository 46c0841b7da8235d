// dllmq grid --config GRID.json: the cross product of decoding settings x tasks, each run as a
// resumable `dllmq eval` child process in its own run directory, then one comparison table.
//
// GRID.json:
//   {"out": "runs/g1", "model": "DIR",
//    "tasks": [{"task": "gsm8k", "data": "shared/data/gsm8k/test.jsonl", "limit": 100, "chat": true}],
//    "fixed": {"block-length": 32},                       // flags given to every run
//    "grid":  {"gen-length": [256, 512], "threshold": [null, 0.9], "cache": ["none", "prefix"]},
//    "args":  ["--workers", "2"]}                          // extra eval arguments, verbatim
// Keys are `dllmq eval` flag names without "--"; null leaves the flag out, true passes it bare.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "eval/data.h"
#include "util/error.h"

namespace dllmq::cli {

namespace {

namespace fs = std::filesystem;

std::string value_text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

// Directory-name-safe "k=v,k=v" label of one grid point.
std::string label(const std::vector<std::pair<std::string, nlohmann::json>>& point, const nlohmann::json& grid) {
  std::string s;
  for (const auto& [k, v] : point) {
    if (grid.at(k).size() < 2) continue;  // single-valued axes are the same everywhere
    s += (s.empty() ? "" : ",") + k + "=" + (v.is_null() ? "off" : value_text(v));
  }
  for (char& c : s)
    if (c == '/' || c == ' ') c = '_';
  return s.empty() ? "default" : s;
}

void add_flag(std::vector<std::string>& argv, const std::string& key, const nlohmann::json& v, const std::string& cfg) {
  if (v.is_null() || (v.is_boolean() && !v.get<bool>())) return;
  argv.push_back("--" + key);
  if (v.is_boolean()) return;
  if (!v.is_string() && !v.is_number()) fail("{}: value of '{}' must be a string, number, bool or null", cfg, key);
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

void run_grid(const std::string& cfg_path, bool dry_run) {
  const auto cfg = nlohmann::json::parse(eval::read_text_file(cfg_path), nullptr, false);
  if (cfg.is_discarded() || !cfg.is_object()) fail("{}: not a JSON object", cfg_path);
  if (!cfg.contains("out") || !cfg["out"].is_string()) fail("{}: needs \"out\" (base run directory)", cfg_path);
  if (!cfg.contains("tasks") || !cfg["tasks"].is_array() || cfg["tasks"].empty())
    fail("{}: needs a non-empty \"tasks\" list", cfg_path);
  const std::string out = cfg["out"];
  const nlohmann::json grid = cfg.value("grid", nlohmann::json::object());
  // Cross product of the grid axes, in the file's key order.
  std::vector<std::vector<std::pair<std::string, nlohmann::json>>> points = {{}};
  if (cfg.contains("grid")) {
    if (!cfg["grid"].is_object()) fail("{}: \"grid\" must map flag names to value lists", cfg_path);
    for (const auto& [k, vals] : cfg["grid"].items()) {
      if (!vals.is_array() || vals.empty()) fail("{}: grid axis '{}' needs a non-empty list", cfg_path, k);
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
  nlohmann::json results = nlohmann::json::array();
  std::string md = "| task | point | n | metrics | tokens/s | mean NFE |\n|---|---|---|---|---|---|\n";
  int failures = 0;
  for (const auto& t : cfg["tasks"]) {
    if (!t.is_object() || !t.contains("task") || !t.contains("data")) fail("{}: each task needs \"task\" and \"data\"", cfg_path);
    const std::string task = t["task"];
    for (const auto& point : points) {
      const std::string dir = (fs::path(out) / task / label(point, grid)).string();
      std::vector<std::string> argv = {"dllmq", "eval", "--task", task, "--data", t["data"].get<std::string>(),
                                       "--out", dir, "--resume", "--json"};
      if (cfg.contains("model")) add_flag(argv, "model", cfg["model"], cfg_path);
      for (const auto& [k, v] : t.items())
        if (k != "task" && k != "data") add_flag(argv, k, v, cfg_path);
      if (cfg.contains("fixed"))
        for (const auto& [k, v] : cfg["fixed"].items()) add_flag(argv, k, v, cfg_path);
      for (const auto& [k, v] : point) add_flag(argv, k, v, cfg_path);
      if (cfg.contains("args"))
        for (const auto& a : cfg["args"]) argv.push_back(value_text(a));
      std::string shown;
      for (size_t i = 1; i < argv.size(); ++i) shown += (i > 1 ? " " : "") + argv[i];
      fmt::print(stderr, "dllmq grid: {}\n", shown);
      if (dry_run) continue;
      fs::create_directories(dir);
      const int rc = run_child(argv, (fs::path(dir) / "eval.stdout").string());
      nlohmann::json r = {{"task", task}, {"point", label(point, grid)}, {"run_dir", dir}, {"exit_code", rc}};
      const fs::path sp = fs::path(dir) / "summary.json";
      if (rc == 0 && fs::exists(sp)) {
        r["summary"] = nlohmann::json::parse(eval::read_text_file(sp.string()), nullptr, false);
        const auto& s = r["summary"];
        std::string metrics;
        for (const auto& m : s["config"]["metrics"]) {
          const auto& v = s[m.get<std::string>()];
          metrics += fmt::format("{}{} {}", metrics.empty() ? "" : ", ", m.get<std::string>(),
                                 v.is_number() ? fmt::format("{:.4f}", v.get<double>()) : "n/a");
        }
        md += fmt::format("| {} | {} | {} | {} | {:.2f} | {:.1f} |\n", task, label(point, grid), s.value("n", 0), metrics,
                          s.value("tokens_per_s", 0.0), s.value("mean_nfe", 0.0));
      } else {
        ++failures;
        md += fmt::format("| {} | {} | - | run failed (exit {}) | - | - |\n", task, label(point, grid), rc);
      }
      results.push_back(std::move(r));
    }
  }
  if (dry_run) return;
  fs::create_directories(out);
  std::ofstream(fs::path(out) / "grid.json") << results.dump(2) << "\n";
  std::ofstream(fs::path(out) / "grid.md") << md;
  std::fputs(md.c_str(), stdout);
  if (failures) fail("grid: {} of {} runs failed (see {}/grid.json)", failures, results.size(), out);
}

}  // namespace

void register_grid(CLI::App& app) {
  auto* cmd = app.add_subcommand("grid", "Run dllmq eval over a grid of decoding settings (GRID.json)");
  auto cfg = std::make_shared<std::string>();
  auto dry = std::make_shared<bool>(false);
  cmd->add_option("--config", *cfg, "grid description (see docs/eval.md)")->required();
  cmd->add_flag("--dry-run", *dry, "print the eval command lines only");
  cmd->callback([cfg, dry] { run_grid(*cfg, *dry); });
}

}  // namespace dllmq::cli
