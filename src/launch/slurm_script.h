// Slurm batch scripts for dllmq's launchers: one job (or job array) whose tasks each run one
// command line, rendered from a template the user can replace, with the pass-through #SBATCH
// options. Pure text: submitting is slurm_commands.h's job.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace dllmq::launch {

// Options passed through to every job as #SBATCH lines (empty / 0: not set, Slurm's default).
struct SbatchOptions {
  std::string partition, account, time, mem;
  int cpus_per_task = 0;
  std::vector<std::string> extra;  // extra directives: "--qos=high" or "#SBATCH --qos=high"
};

// One job script: a job array when `commands` has several entries (or a key other than 0),
// each array task running the command stored under its SLURM_ARRAY_TASK_ID.
struct JobSpec {
  std::string name;                                  // --job-name
  std::string log;                                   // --output (may use %A, %a, %j)
  std::string workdir;                               // cd here first (the submission's cwd)
  std::map<int, std::vector<std::string>> commands;  // array task id -> argv
  bool array = true;                                 // false: one plain job running commands[0]
};

// The template used when the user gives none: {{sbatch}} becomes the #SBATCH lines, {{workdir}}
// the quoted working directory, {{command}} the block that runs the task's command, records its
// exit status as the log's last line and exits with it.
std::string default_job_template();

// Fills `tmpl` (which must contain {{sbatch}} and {{command}}; `what` names it in errors).
std::string render_job_script(const JobSpec& job, const SbatchOptions& opt,
                              const std::string& tmpl = default_job_template(),
                              const std::string& what = "the default job template");

// "0-2,5,7-8" for sorted unique ids (Slurm's --array syntax).
std::string array_ranges(const std::vector<int>& ids);

// "afterok:12_0:12_3:14" for the given job ids ("" when none).
std::string afterok_dependency(const std::vector<std::string>& job_ids);

// The last line a job's command block writes to its log: "dllmq-task-exit: N".
inline constexpr const char* kExitMarker = "dllmq-task-exit: ";

// An argv element equal to this is rendered as the task's CPU count, "${SLURM_CPUS_PER_TASK:-1}"
// (so `--threads` follows the allocation, not the submitting machine).
inline constexpr const char* kTaskCpus = "{SLURM_CPUS_PER_TASK}";

// argv with its "--threads N" (or "--threads=N") removed and "--threads <kTaskCpus>" appended:
// a task runs as many threads as Slurm gave it CPUs, whatever the config fixed.
std::vector<std::string> with_task_threads(const std::vector<std::string>& argv);

// Single-quoted for bash when it has anything but [A-Za-z0-9_./=:,+-@%].
std::string shell_quote(const std::string& s);

}  // namespace dllmq::launch
