// Talking to Slurm through its own client commands (sbatch, squeue, sacct, scancel): no daemon
// of ours, no SSH. The parsers are separate from the calls so that they can be tested on text.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace dllmq::launch {

struct CommandResult {
  int exit_code = 0;
  std::string out, err;
};

// Runs argv[0] (searched on PATH) and waits; stdout and stderr are captured.
CommandResult run_command(const std::vector<std::string>& argv);

// The full path of `name` on PATH, or "" if it is not there.
std::string find_on_path(const std::string& name);

// Fails, naming the first missing command and what it is needed for, unless every one is on PATH.
void require_commands(const std::vector<std::string>& names, const std::string& what);

// `sbatch --parsable [--dependency=DEP --kill-on-invalid-dep=yes] SCRIPT`; returns the job id.
std::string sbatch(const std::string& script, const std::string& dependency);

// `scancel ID...` (errors are reported, not thrown: the jobs may have ended meanwhile).
void scancel(const std::vector<std::string>& job_ids);

// What Slurm says about one job or array task ("123" or "123_4").
struct TaskState {
  std::string state;      // PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ...
  std::string reason;     // squeue's reason (e.g. DependencyNeverSatisfied), "" from sacct
  std::string exit_code;  // "1:0" (exit status:signal) where known
};

// "123_[0-2,5]" -> 123_0 123_1 123_2 123_5; other ids unchanged.
std::vector<std::string> expand_array_id(const std::string& id);

// Lines "ID|STATE|REASON" (squeue -h -r -t all -o '%i|%T|%r').
std::map<std::string, TaskState> parse_squeue(const std::string& text);
// Lines "ID|STATE|EXITCODE" (sacct -n -P -X -o JobID,State,ExitCode); "CANCELLED by 0" ->
// CANCELLED.
std::map<std::string, TaskState> parse_sacct(const std::string& text);

// The states of the given jobs (and every task of the given arrays): squeue first (jobs the
// controller still holds, finished ones for MinJobAge), then sacct where accounting is enabled.
// Jobs neither knows are absent.
std::map<std::string, TaskState> query_states(const std::vector<std::string>& job_ids);

// Pending, running or about to run again: the job is not over.
bool is_active(const std::string& state);

}  // namespace dllmq::launch
