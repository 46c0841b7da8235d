// Run-directory layout of a Slurm grid (all under OUT):
//   slurm/state.json          what was submitted: every cell with its shard sizes, the job and log
//                             of each task's latest attempt, the merge job (rewritten atomically)
//   slurm/grid-config.json    the resolved grid config the merge job reads
//   slurm/jobs/<n>/*.sbatch   the job scripts of submission n
//   slurm/logs/               calibration and merge logs
//   <task>/<label>/           a cell: config.json, samples.<i>-of-<N>.jsonl and
//                             summary.<i>-of-<N>.json per shard (each shard task appends only to
//                             its own file), slurm-<job>_<i>.log per shard task, and after the
//                             merge summary.json/summary.md over all shards
#include "cli/grid_slurm.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/core.h>

#include "eval/data.h"
#include "eval/report.h"
#include "eval/run.h"
#include "eval/task.h"
#include "launch/slurm_commands.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace dllmq::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kSlurmCommands[] = {"sbatch", "squeue", "scancel"};

std::string abs_path(const std::string& p) {
  return fs::absolute(p).lexically_normal().string();
}

std::string self_exe() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) fail("grid: cannot find the dllmq binary's path (/proc/self/exe)");
  return exe.string();
}

std::string now_text() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// The last value of a flag in an eval/calibrate argv ("" when absent).
std::string flag_value(const std::vector<std::string>& argv, const std::string& flag) {
  std::string v;
  for (size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == flag) v = argv[i + 1];
  return v;
}

// The number of documents a cell's eval evaluates (its --limit of the task's data).
size_t cell_documents(const std::vector<std::string>& argv, std::map<std::string, size_t>& cache) {
  const std::string task = flag_value(argv, "--task"), data = flag_value(argv, "--data"),
                    subset = flag_value(argv, "--subset"), train = flag_value(argv, "--train"),
                    limit = flag_value(argv, "--limit");
  const std::string key = task + "\n" + data + "\n" + subset + "\n" + train;
  if (!cache.count(key)) {
    eval::TaskOptions topt;
    topt.subset = subset;
    topt.train_path = train;
    cache[key] = eval::make_task(task, data, topt)->size();
  }
  size_t n = cache[key];
  if (!limit.empty()) {
    try {
      const long l = std::stol(limit);
      if (l > 0) n = std::min(n, size_t(l));
    } catch (const std::exception&) {
      fail("grid: --limit '{}' of task {} is not a number", limit, task);
    }
  }
  return n;
}

size_t shard_size(size_t docs, int shard, int shards) {
  return size_t(shard) < docs ? (docs - shard + shards - 1) / shards : 0;
}

std::string shard_samples(const std::string& dir, int i, int n) {
  return (fs::path(dir) / eval::samples_file_name(i, n)).string();
}
// What `eval --shard i/n` writes when it has finished (summary.json for an unsharded run).
std::string shard_summary(const std::string& dir, int i, int n) {
  return (fs::path(dir) /
          (n == 1 ? std::string("summary.json") : fmt::format("summary.{}-of-{}.json", i, n)))
      .string();
}

size_t samples_in(const std::string& path) {
  if (!fs::exists(path)) return 0;
  try {
    return eval::read_samples(path, /*repair=*/false).size();
  } catch (const Error&) {
    return 0;  // a corrupt line: the task's own --resume reports it
  }
}

// A shard is finished when its run wrote the summary (it does so after its last sample) and the
// samples file holds every document of the shard.
bool shard_finished(const std::string& dir, int i, int n, size_t total) {
  return fs::exists(shard_summary(dir, i, n)) && samples_in(shard_samples(dir, i, n)) >= total;
}

json read_json_file(const std::string& path) {
  auto j = json::parse(eval::read_text_file(path), nullptr, false);
  if (j.is_discarded() || !j.is_object()) fail("{}: not a JSON object", path);
  return j;
}

std::string state_path(const std::string& out) {
  return (fs::path(out) / "slurm" / "state.json").string();
}

std::string task_log(const std::string& pattern, const std::string& job, int index) {
  std::string s = pattern;
  for (const auto& [key, val] :
       {std::pair<std::string, std::string>{"%A", job}, {"%a", std::to_string(index)}, {"%j", job}})
    for (size_t at; (at = s.find(key)) != std::string::npos;) s.replace(at, key.size(), val);
  return s;
}

std::vector<std::string> commands_with(const std::vector<std::string>& argv,
                                       const std::string& exe) {
  std::vector<std::string> a = launch::with_task_threads(argv);
  a[0] = exe;
  return a;
}

// Every job id a state mentions (tasks as "job_index").
std::vector<std::string> state_jobs(const json& st) {
  std::vector<std::string> ids;
  for (const auto& c : st.value("calibrations", json::array()))
    if (c.contains("job")) ids.push_back(c["job"]);
  for (const auto& cell : st.value("cells", json::array())) {
    const json tasks = cell.value("tasks", json::object());
    for (const auto& [i, t] : tasks.items()) ids.push_back(t["job"]);
  }
  if (st.contains("merge")) ids.push_back(st["merge"]["job"]);
  return ids;
}

// The last line of a task's log, if it is the job script's exit record: the exit status.
std::optional<int> logged_exit(const std::string& log) {
  if (!fs::exists(log)) return std::nullopt;
  std::string text;
  try {
    text = eval::read_text_file(log);
  } catch (const Error&) {
    return std::nullopt;
  }
  const size_t at = text.rfind(launch::kExitMarker);
  if (at == std::string::npos) return std::nullopt;
  try {
    return std::stoi(text.substr(at + std::string(launch::kExitMarker).size()));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// One task's condition as --status and resubmission see it.
struct TaskView {
  enum Kind { kDone, kRunning, kPending, kFailed, kNotSubmitted } kind = kNotSubmitted;
  std::string why;  // state, reason, exit status
};

// `asked`: Slurm answered (else nothing is known from it, only from the log).
TaskView view_task(const json& t, const std::map<std::string, launch::TaskState>& states,
                   bool asked) {
  TaskView v;
  if (!t.is_object() || !t.contains("job")) return v;
  const std::string job = t["job"], log = t.value("log", "");
  const auto it = states.find(job);
  if (it != states.end()) {
    const auto& s = it->second;
    if (s.state == "RUNNING" || s.state == "COMPLETING" || s.state == "CONFIGURING") {
      v.kind = TaskView::kRunning;
      v.why = s.state;
      return v;
    }
    if (launch::is_active(s.state)) {
      v.kind = TaskView::kPending;
      v.why = s.reason.empty() ? s.state : s.state + " (" + s.reason + ")";
      return v;
    }
    v.kind = TaskView::kFailed;
    v.why = s.state + (s.reason.empty() ? "" : " (" + s.reason + ")");
  } else {
    v.kind = TaskView::kFailed;
    v.why = asked ? "not known to Slurm any more" : "state unknown";
  }
  if (const auto rc = logged_exit(log))
    v.why += fmt::format(", exit {}", *rc);
  else if (!asked)
    v.why += ", no exit recorded yet";
  else if (fs::exists(log))
    v.why += ", killed before it could record an exit status (cancelled, time limit, memory?)";
  else
    v.why += ", never started (no log)";
  return v;
}

void write_state(const std::string& out, const json& st) {
  write_file_atomic(state_path(out), st.dump(2) + "\n");
}

}  // namespace

void add_launcher_options(CLI::App& cmd, LauncherOptions& o) {
  cmd.add_option("--launcher", o.launcher,
                 "local: run cells one after another here (default); slurm: submit them as "
                 "Slurm job arrays (docs/cluster.md)")
      ->check(CLI::IsMember({"local", "slurm"}));
  cmd.add_option("--shards", o.shards, "slurm: eval shards per cell (array tasks), default 1")
      ->check(CLI::Range(1, 100000));
  cmd.add_flag("--status", o.status,
               "print the progress of a Slurm grid run in --out (samples, shards, failed tasks' "
               "logs); submits nothing");
  cmd.add_flag("--collect", o.collect,
               "merge every cell's finished shards and write grid.md/csv/png (the Slurm "
               "launcher's last job; runs nothing else)");
  cmd.add_option("--job-template", o.job_template,
                 "slurm: job script template replacing the built-in one (must contain "
                 "{{sbatch}} and {{command}})");
  cmd.add_option("--partition", o.sbatch.partition, "slurm: #SBATCH --partition");
  cmd.add_option("--account", o.sbatch.account, "slurm: #SBATCH --account");
  cmd.add_option("--time", o.sbatch.time, "slurm: #SBATCH --time per task (e.g. 04:00:00)");
  cmd.add_option("--cpus-per-task", o.sbatch.cpus_per_task,
                 "slurm: #SBATCH --cpus-per-task; each task runs that many threads")
      ->check(CLI::Range(1, 4096));
  cmd.add_option("--mem", o.sbatch.mem, "slurm: #SBATCH --mem per task (e.g. 32G)");
  cmd.add_option("--sbatch-line", o.sbatch.extra,
                 "slurm: an extra directive for every job, e.g. --sbatch-line=--qos=long "
                 "(repeatable)");
}

void submit_grid_to_slurm(const GridPlan& plan, const json& cfg, const std::string& out,
                          const LauncherOptions& o, bool dry_run) {
  if (!dry_run)
    launch::require_commands({std::begin(kSlurmCommands), std::end(kSlurmCommands)},
                             "dllmq grid --launcher slurm");
  const int n = o.shards;
  const std::string tmpl = o.job_template.empty() ? launch::default_job_template()
                                                  : eval::read_text_file(o.job_template);
  const std::string tmpl_name =
      o.job_template.empty() ? "the default job template" : o.job_template;
  const std::string exe = self_exe(), workdir = fs::current_path().string();
  const std::string sdir = abs_path((fs::path(out) / "slurm").string());

  json st = fs::exists(state_path(out)) ? read_json_file(state_path(out)) : json::object();
  if (st.contains("shards") && st["shards"] != n)
    fail(
        "{}: this run was submitted with --shards {}; rerun with the same --shards (its shard "
        "files are samples.<i>-of-{}.jsonl)",
        out, st["shards"].dump(), st["shards"].dump());

  // An earlier submission still in the queue: resubmitting would run shards twice into the same
  // files. Only the earlier merge job may be replaced (it is resubmitted at the end).
  if (!dry_run && !st.empty()) {
    const auto states = launch::query_states(state_jobs(st));
    const std::string old_merge = st.contains("merge") ? st["merge"]["job"].get<std::string>() : "";
    std::vector<std::string> busy;
    bool merge_busy = false;
    for (const auto& [id, s] : states) {
      if (!launch::is_active(s.state)) continue;
      if (id == old_merge)
        merge_busy = true;
      else
        busy.push_back(id + " " + s.state);
    }
    if (!busy.empty()) {
      std::string list;
      for (size_t i = 0; i < busy.size() && i < 6; ++i) list += (i ? ", " : "") + busy[i];
      fail(
          "{}: {} task(s) of an earlier submission are still queued or running ({}{}); wait "
          "for them or scancel them, then rerun (`dllmq grid --status --out {}` shows progress)",
          out, busy.size(), list, busy.size() > 6 ? ", ..." : "", out);
    }
    if (merge_busy) {
      fmt::print(stderr, "dllmq grid: cancelling the earlier merge job {} (a new one follows)\n",
                 old_merge);
      launch::scancel({old_merge});
    }
  }

  // Cells: documents per shard, finished shards.
  std::map<std::string, size_t> docs_cache;
  std::map<std::string, json> old_cells;
  for (const auto& c : st.value("cells", json::array())) old_cells[c["dir"]] = c;
  json cells = json::array();
  std::vector<std::vector<int>> todo(plan.cells.size());
  size_t retried = 0;  // shards whose earlier task failed, was cancelled or killed
  for (size_t ci = 0; ci < plan.cells.size(); ++ci) {
    const auto& c = plan.cells[ci];
    const size_t docs = cell_documents(c.argv, docs_cache);
    json cell = {{"task", c.task},    {"label", c.label},        {"dir", abs_path(c.dir)},
                 {"documents", docs}, {"totals", json::array()}, {"tasks", json::object()}};
    if (old_cells.count(cell["dir"])) cell["tasks"] = old_cells[cell["dir"]]["tasks"];
    for (int i = 0; i < n; ++i) {
      const size_t total = shard_size(docs, i, n);
      cell["totals"].push_back(total);
      if (shard_finished(c.dir, i, n, total)) continue;
      todo[ci].push_back(i);
      if (cell["tasks"].contains(std::to_string(i))) ++retried;
    }
    cells.push_back(std::move(cell));
  }

  const std::string stamp = std::to_string(st.value("submissions", json::array()).size() + 1);
  const fs::path jobs_dir = fs::path(sdir) / "jobs" / stamp;
  const std::string logs = (fs::path(sdir) / "logs").string();
  std::vector<std::string> submitted;  // for cancelling on a failed sbatch
  // Writes (or prints) a script and submits it; returns the job id ("" on a dry run).
  const auto submit = [&](const std::string& name, const launch::JobSpec& job,
                          const std::string& dependency) -> std::string {
    const std::string script = launch::render_job_script(job, o.sbatch, tmpl, tmpl_name);
    const std::string path = (jobs_dir / (name + ".sbatch")).string();
    if (dry_run) {
      fmt::print(
          "# ---- {} ----\n# sbatch --parsable{} {}\n{}\n", name,
          dependency.empty() ? "" : " --dependency=" + dependency + " --kill-on-invalid-dep=yes",
          path, script);
      return "";
    }
    fs::create_directories(jobs_dir);
    write_file_atomic(path, script);
    try {
      const std::string id = launch::sbatch(path, dependency);
      submitted.push_back(id);
      return id;
    } catch (const Error&) {
      launch::scancel(submitted);
      throw;
    }
  };

  // 1. Calibrations: one array task per missing artifact.
  std::map<std::string, std::string> calib_task;  // artifact path -> "job_index" (or placeholder)
  json calibs = json::array();
  if (!plan.calibrations.empty()) {
    launch::JobSpec job;
    job.name = "dllmq-calibrate";
    job.log = (fs::path(logs) / "calibrate-%A_%a.log").string();
    job.workdir = workdir;
    for (size_t k = 0; k < plan.calibrations.size(); ++k) {
      job.commands[int(k)] = commands_with(plan.calibrations[k].argv, exe);
      const auto& p = plan.calibrations[k].out;
      if (fs::path(p).has_parent_path() && !dry_run)
        fs::create_directories(fs::path(p).parent_path());
    }
    if (!dry_run) fs::create_directories(logs);
    const std::string id = submit("calibrate", job, "");
    for (size_t k = 0; k < plan.calibrations.size(); ++k) {
      const std::string task =
          (dry_run ? std::string("<calibrate>") : id) + "_" + std::to_string(k);
      calib_task[plan.calibrations[k].out] = task;
      calibs.push_back({{"out", abs_path(plan.calibrations[k].out)},
                        {"job", task},
                        {"log", task_log(job.log, id, int(k))}});
    }
  }

  // 2. One array per cell with unfinished shards, held on the calibrations its argv names.
  std::vector<std::string> cell_jobs;
  size_t n_tasks = 0;
  for (size_t ci = 0; ci < plan.cells.size(); ++ci) {
    if (todo[ci].empty()) continue;
    const auto& c = plan.cells[ci];
    launch::JobSpec job;
    job.name = "dllmq-" + c.task + "-" + c.label;
    for (char& ch : job.name)
      if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '.') ch = '_';
    job.log = (fs::path(cells[ci]["dir"].get<std::string>()) / "slurm-%A_%a.log").string();
    job.workdir = workdir;
    for (int i : todo[ci]) {
      auto argv = commands_with(c.argv, exe);
      argv.push_back("--shard");
      argv.push_back(fmt::format("{}/{}", i, n));
      job.commands[i] = std::move(argv);
    }
    std::vector<std::string> deps;
    for (const auto& a : c.argv)
      if (calib_task.count(a) && std::find(deps.begin(), deps.end(), calib_task[a]) == deps.end())
        deps.push_back(calib_task[a]);
    if (!dry_run) fs::create_directories(c.dir);
    const std::string id =
        submit(fmt::format("cell-{}", ci), job, launch::afterok_dependency(deps));
    cell_jobs.push_back(dry_run ? fmt::format("<cell-{}>", ci) : id);
    for (int i : todo[ci])
      cells[ci]["tasks"][std::to_string(i)] = {{"job", id + "_" + std::to_string(i)},
                                               {"log", task_log(job.log, id, i)}};
    n_tasks += todo[ci].size();
  }

  // 3. The merge job, after every shard (and calibration) of this submission succeeded.
  std::vector<std::string> merge_deps = cell_jobs;
  if (!calibs.empty()) merge_deps.push_back(dry_run ? "<calibrate>" : submitted.front());
  const std::string cfg_copy = (fs::path(sdir) / "grid-config.json").string();
  launch::JobSpec merge;
  merge.name = "dllmq-grid-merge";
  merge.log = (fs::path(logs) / "merge-%j.log").string();
  merge.workdir = workdir;
  merge.array = false;
  merge.commands[0] = {exe,        "grid", "--config", cfg_copy, "--shards", std::to_string(n),
                       "--collect"};
  if (!dry_run) {
    fs::create_directories(sdir);
    write_file_atomic(cfg_copy, cfg.dump(1) + "\n");
  }
  const std::string merge_id = submit("merge", merge, launch::afterok_dependency(merge_deps));
  if (dry_run) return;

  // 4. Record it: state.json keeps each task's latest attempt, so --status and the next rerun
  // know where every shard's job and log are.
  json old_calibs = st.value("calibrations", json::array());
  for (const auto& c : old_calibs) {
    bool replaced = false;
    for (const auto& n2 : calibs) replaced |= n2["out"] == c["out"];
    if (!replaced) calibs.push_back(c);
  }
  st["shards"] = n;
  st["config"] = cfg_copy;
  st["out"] = abs_path(out);
  st["calibrations"] = calibs;
  st["cells"] = cells;
  st["merge"] = {{"job", merge_id}, {"log", task_log(merge.log, merge_id, 0)}};
  if (!st.contains("submissions")) st["submissions"] = json::array();
  st["submissions"].push_back({{"time", now_text()}, {"jobs", submitted}});
  write_state(out, st);
  if (retried)
    fmt::print(stderr,
               "dllmq grid: {} shard(s) of an earlier submission did not finish (failed, cancelled "
               "or killed): resubmitted, each resuming after its last finished sample\n",
               retried);
  fmt::print(stderr,
             "dllmq grid: submitted {} calibration task(s), {} shard task(s) in {} cell array(s) "
             "({} cell(s) already finished), merge job {}\n"
             "dllmq grid: follow it with `dllmq grid --status --out {}`; the table appears in "
             "{}/grid.md\n",
             plan.calibrations.size(), n_tasks, cell_jobs.size(),
             plan.cells.size() - cell_jobs.size(), merge_id, out, out);
}

int collect_cell_shards(const std::string& dir, int shards) {
  size_t expected = 0;
  json notes = json::array();  // the shards' notes (why a metric is missing, ...), each once
  for (int i = 0; i < shards; ++i) {
    const std::string sp = shard_summary(dir, i, shards);
    if (!fs::exists(sp)) {
      fmt::print(stderr, "dllmq grid: {}: shard {}/{} has not finished (no {})\n", dir, i, shards,
                 fs::path(sp).filename().string());
      return 1;
    }
    const json shard = read_json_file(sp);
    expected += shard.value("n_expected", size_t(0));
    for (const auto& note : shard.value("notes", json::array()))
      if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
  }
  json summary = eval::merge_runs({dir}, "");
  if (summary.value("duplicates_dropped", 0) > 0)
    fmt::print(stderr, "dllmq grid: {}: {} sample(s) present in two shard files, counted once\n",
               dir, summary["duplicates_dropped"].get<int>());
  summary["n_expected"] = expected;
  summary["shards"] = shards;
  if (!notes.empty()) summary["notes"] = notes;
  write_file_atomic((fs::path(dir) / "summary.json").string(), summary.dump(2) + "\n");
  write_file_atomic((fs::path(dir) / "summary.md").string(), eval::summary_markdown(summary));
  return 0;
}

void print_grid_status(const std::string& out) {
  if (!fs::exists(state_path(out)))
    fail(
        "{}: no Slurm submission recorded here ({} is missing); --status follows grids run with "
        "--launcher slurm",
        out, state_path(out));
  const json st = read_json_file(state_path(out));
  const int n = st.value("shards", 1);
  std::map<std::string, launch::TaskState> states;
  std::string note;
  if (launch::find_on_path("squeue").empty())
    note = "squeue is not on PATH: job states unknown, progress from the run directory only";
  else
    try {
      states = launch::query_states(state_jobs(st));
    } catch (const Error& e) {  // the controller down or unreachable: the files still tell a lot
      note = fmt::format("{}: job states unknown, progress from the run directory only", e.what());
    }

  const auto subs = st.value("submissions", json::array());
  fmt::print("grid {}: {} cell(s) x {} shard(s), {} submission(s), last {}\n", out,
             st["cells"].size(), n, subs.size(),
             subs.empty() ? "-" : subs.back().value("time", ""));
  if (!note.empty()) fmt::print("note: {}\n", note);
  std::vector<std::string> failures;
  const auto calibs = st.value("calibrations", json::array());
  if (!calibs.empty()) {
    size_t made = 0;
    for (const auto& c : calibs) {
      if (fs::exists(c["out"].get<std::string>())) {
        ++made;
        continue;
      }
      const TaskView v = view_task(c, states, note.empty());
      if (v.kind == TaskView::kFailed)
        failures.push_back(fmt::format("calibration {} (task {}): {}\n    log: {}",
                                       c["out"].get<std::string>(), c["job"].get<std::string>(),
                                       v.why, c.value("log", "")));
    }
    fmt::print("calibrations: {} of {} made\n", made, calibs.size());
  }
  size_t width = 4;
  for (const auto& cell : st["cells"])
    width = std::max(width, cell["task"].get<std::string>().size() + 1 +
                                cell["label"].get<std::string>().size());
  fmt::print("{:<{}} {:>15}  {:>5} {:>7} {:>7} {:>6}\n", "cell", width, "samples", "done",
             "running", "pending", "failed");
  size_t all_done = 0, all_total = 0;
  for (const auto& cell : st["cells"]) {
    const std::string dir = cell["dir"];
    size_t done = 0, total = 0;
    int n_done = 0, n_run = 0, n_pend = 0, n_fail = 0;
    for (int i = 0; i < n; ++i) {
      const size_t t = cell["totals"][i];
      total += t;
      done += std::min(t, samples_in(shard_samples(dir, i, n)));
      if (shard_finished(dir, i, n, t)) {
        ++n_done;
        continue;
      }
      const auto& tasks = cell["tasks"];
      const std::string key = std::to_string(i);
      const TaskView v = view_task(tasks.contains(key) ? tasks[key] : json(), states, note.empty());
      if (v.kind == TaskView::kRunning) ++n_run;
      if (v.kind == TaskView::kPending) ++n_pend;
      if (v.kind == TaskView::kFailed || v.kind == TaskView::kNotSubmitted) {
        ++n_fail;
        failures.push_back(
            v.kind == TaskView::kNotSubmitted
                ? fmt::format("{}/{} shard {}/{}: never submitted", cell["task"].get<std::string>(),
                              cell["label"].get<std::string>(), i, n)
                : fmt::format("{}/{} shard {}/{} (task {}): {}\n    log: {}",
                              cell["task"].get<std::string>(), cell["label"].get<std::string>(), i,
                              n, tasks[key]["job"].get<std::string>(), v.why,
                              tasks[key].value("log", "")));
      }
    }
    all_done += done, all_total += total;
    fmt::print("{:<{}} {:>15}  {:>5} {:>7} {:>7} {:>6}\n",
               cell["task"].get<std::string>() + "/" + cell["label"].get<std::string>(), width,
               fmt::format("{}/{}", done, total), n_done, n_run, n_pend, n_fail);
  }
  fmt::print("total: {}/{} samples\n", all_done, all_total);
  if (!failures.empty()) {
    fmt::print("failed or stopped tasks ({}):\n", failures.size());
    for (const auto& f : failures) fmt::print("  {}\n", f);
  }
  if (st.contains("merge")) {
    const auto& m = st["merge"];
    const std::string id = m["job"], log = m.value("log", "");
    const auto it = states.find(id);
    const std::string s = it == states.end() ? "" : it->second.state;
    const std::string reason = it == states.end() ? "" : it->second.reason;
    std::string line;
    if (s.empty())
      line = fs::exists(fs::path(out) / "grid.md") ? "finished (grid.md written)"
             : note.empty()                        ? "not known to Slurm any more, no grid.md"
                                                   : "state unknown, no grid.md yet";
    else if (s == "COMPLETED")
      line = "COMPLETED: grid.md, grid.csv, grid.png written";
    else if (s == "CANCELLED" && reason.find("Dependency") != std::string::npos)
      line = fmt::format(
          "did not run: Slurm cancelled it ({}) because a task it waits for did not succeed "
          "(listed above); rerun the same `dllmq grid ... --launcher slurm` command to resubmit "
          "the unfinished work",
          reason);
    else if (s == "PENDING")
      line = "PENDING" + (reason.empty() ? std::string() : " (" + reason + ")") +
             ": runs when every shard has succeeded";
    else
      line = s + (reason.empty() ? std::string() : " (" + reason + ")") + ", log: " + log;
    fmt::print("merge job {}: {}\n", id, line);
  }
}

}  // namespace dllmq::cli
