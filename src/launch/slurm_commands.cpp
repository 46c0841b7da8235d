#include "launch/slurm_commands.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/core.h>

#include "util/error.h"

extern char** environ;

namespace dllmq::launch {

namespace fs = std::filesystem;

namespace {

std::string slurp_and_remove(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  std::error_code ec;
  fs::remove(path, ec);
  return ss.str();
}

std::string base_job(const std::string& id) {
  return id.substr(0, id.find('_'));
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  return parts;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  while (!s.empty() && s.front() == ' ') s.erase(s.begin());
  return s;
}

}  // namespace

std::string find_on_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  for (const auto& dir : split(path ? path : "", ':')) {
    if (dir.empty()) continue;
    const std::string p = (fs::path(dir) / name).string();
    if (access(p.c_str(), X_OK) == 0 && !fs::is_directory(p)) return p;
  }
  return "";
}

void require_commands(const std::vector<std::string>& names, const std::string& what) {
  for (const auto& n : names)
    if (find_on_path(n).empty())
      fail(
          "{} needs Slurm's `{}` command, which is not on PATH: run it on a Slurm login node, or "
          "install Slurm's client commands (Debian: apt-get install slurm-client) and configure "
          "them for your cluster (docs/cluster.md)",
          what, n);
}

CommandResult run_command(const std::vector<std::string>& argv) {
  const std::string exe = find_on_path(argv.at(0));
  if (exe.empty()) fail("`{}` is not on PATH", argv[0]);
  char out_tmpl[] = "/tmp/dllmq-cmd-out.XXXXXX";
  char err_tmpl[] = "/tmp/dllmq-cmd-err.XXXXXX";
  const int out_fd = mkstemp(out_tmpl);
  const int err_fd = mkstemp(err_tmpl);
  if (out_fd < 0 || err_fd < 0) fail("cannot create a temporary file in /tmp to run {}", argv[0]);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, exe.c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(out_fd);
  close(err_fd);
  CommandResult r;
  if (rc != 0) {
    slurp_and_remove(out_tmpl), slurp_and_remove(err_tmpl);
    fail("cannot start {}: {}", exe, std::strerror(rc));
  }
  int st = 0;
  waitpid(pid, &st, 0);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = slurp_and_remove(out_tmpl);
  r.err = slurp_and_remove(err_tmpl);
  return r;
}

std::string sbatch(const std::string& script, const std::string& dependency) {
  std::vector<std::string> argv = {"sbatch", "--parsable"};
  if (!dependency.empty()) {
    argv.push_back("--dependency=" + dependency);
    // A dependency that fails (a failed shard) cancels the job instead of leaving it pending
    // forever ("DependencyNeverSatisfied").
    argv.push_back("--kill-on-invalid-dep=yes");
  }
  argv.push_back(script);
  const CommandResult r = run_command(argv);
  const std::string out = trim(r.out);
  // --parsable prints "jobid" or "jobid;cluster".
  const std::string id = out.substr(0, out.find(';'));
  if (r.exit_code != 0 || id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
    fail("sbatch {} failed (exit {}): {}", script, r.exit_code, trim(r.err + r.out));
  return id;
}

void scancel(const std::vector<std::string>& job_ids) {
  if (job_ids.empty()) return;
  std::vector<std::string> argv = {"scancel"};
  argv.insert(argv.end(), job_ids.begin(), job_ids.end());
  const CommandResult r = run_command(argv);
  if (r.exit_code != 0) fmt::print(stderr, "scancel: {}\n", trim(r.err));
}

std::vector<std::string> expand_array_id(const std::string& id) {
  const size_t lb = id.find("_[");
  if (lb == std::string::npos || id.back() != ']') return {id};
  const std::string job = id.substr(0, lb);
  std::string spec = id.substr(lb + 2, id.size() - lb - 3);
  spec = spec.substr(0, spec.find('%'));  // "0-9%2": at most 2 at once
  std::vector<std::string> ids;
  for (const auto& part : split(spec, ',')) {
    const size_t dash = part.find('-');
    try {
      const int a = std::stoi(part.substr(0, dash));
      const int b = dash == std::string::npos ? a : std::stoi(part.substr(dash + 1));
      for (int i = a; i <= b; ++i) ids.push_back(fmt::format("{}_{}", job, i));
    } catch (const std::exception&) {
      return {id};
    }
  }
  return ids;
}

namespace {

// Each line "ID|A|B" of Slurm's parsable output as (every id it stands for, A, B).
template <typename F>
std::map<std::string, TaskState> parse_rows(const std::string& text, F to_state) {
  std::map<std::string, TaskState> m;
  for (const auto& line : split(text, '\n')) {
    const auto f = split(trim(line), '|');
    if (f.size() < 3 || f[0].empty()) continue;
    for (const auto& id : expand_array_id(f[0])) m[id] = to_state(f[1], f[2]);
  }
  return m;
}

}  // namespace

std::map<std::string, TaskState> parse_squeue(const std::string& text) {
  return parse_rows(text, [](const std::string& state, const std::string& reason) {
    return TaskState{state, reason == "None" ? "" : reason, ""};
  });
}

std::map<std::string, TaskState> parse_sacct(const std::string& text) {
  return parse_rows(text, [](const std::string& state, const std::string& exit_code) {
    return TaskState{state.substr(0, state.find(' ')), "", exit_code};  // "CANCELLED by 0"
  });
}

std::map<std::string, TaskState> query_states(const std::vector<std::string>& job_ids) {
  std::set<std::string> wanted;
  for (const auto& id : job_ids) wanted.insert(base_job(id));
  std::map<std::string, TaskState> states;
  if (wanted.empty()) return states;
  std::string list;
  for (const auto& j : wanted) list += (list.empty() ? "" : ",") + j;
  // sacct (where accounting is on) knows jobs long gone from the controller; squeue, asked second,
  // wins for the jobs it still holds (fresher, and it has the pending reason).
  if (!find_on_path("sacct").empty()) {
    const auto r =
        run_command({"sacct", "-n", "-P", "-X", "-j", list, "-o", "JobID,State,ExitCode"});
    if (r.exit_code == 0) states = parse_sacct(r.out);
  }
  // Every job of this user, filtered here: `squeue -j` fails outright when one id is unknown.
  const auto r = run_command({"squeue", "-h", "-r", "-t", "all", "--me", "-o", "%i|%T|%r"});
  if (r.exit_code != 0) fail("squeue failed (exit {}): {}", r.exit_code, trim(r.err));
  for (auto& [id, s] : parse_squeue(r.out)) {
    if (!wanted.count(base_job(id))) continue;
    if (states.count(id) && states[id].exit_code.size() && !is_active(s.state))
      s.exit_code = states[id].exit_code;
    states[id] = s;
  }
  return states;
}

bool is_active(const std::string& state) {
  static const std::set<std::string> active = {
      "PENDING",     "RUNNING",      "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED",
      "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING",    "SIGNALING",  "STAGE_OUT", "STOPPED"};
  return active.count(state) > 0;
}

}  // namespace dllmq::launch
