// Runs untrusted Python programs (model-written code + tests), one python3 process per sample.
// Each sample gets its own temp directory (cwd), process group, rlimits (CPU, address space, file
// size, processes), a scrubbed environment and, when the kernel allows it (root or user
// namespaces), fresh network/mount/PID namespaces: no network, harness directories hidden behind
// empty read-only tmpfs mounts, a private /tmp, and every descendant killed with the sample.
// Running as root, the program also drops to an unprivileged per-worker uid.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace dllmq::eval {

struct SandboxOptions {
  std::string python = "python3";  // resolved via PATH once, before the environment is scrubbed
  double timeout_s =
      3.0;  // in-process timer as HF code_eval; the process tree is SIGKILLed 2 s later
  size_t mem_mb = 4096;  // RLIMIT_AS
  size_t fsize_mb = 64;  // RLIMIT_FSIZE
  int nproc = 64;        // RLIMIT_NPROC (only applied with the per-worker uid)
  int workers = 2;
  std::vector<std::string> hide;  // directories to hide (in addition to cwd and $HOME)
  std::string tmp_base;           // where the per-sample dirs go ($TMPDIR or /tmp)
};

// What the program sees: `code` (with `sanitize` the Fast-dLLM AST sanitizer runs on it first,
// keeping what `entry_point` needs) followed by "\n" + `test`.
struct CodeSample {
  std::string code;
  std::string test;
  bool sanitize = false;
  std::string entry_point;  // for sanitize; empty keeps every definition
};

enum class RunStatus { kPassed, kFailed, kTimeout, kError };
const char* run_status_name(RunStatus s);

struct RunResult {
  RunStatus status = RunStatus::kError;
  std::string detail;   // "AssertionError: assert f(1) == 2" / signal / stderr tail
  std::string program;  // the program actually executed (after sanitizing), when reported
  double wall_s = 0.0;
};

class Sandbox {
 public:
  explicit Sandbox(SandboxOptions opt);  // probes python3 and the namespaces; throws if no python
  // Runs all samples on opt.workers threads; results in input order. `on_done(i)` (optional) is
  // called from a worker thread after each sample.
  std::vector<RunResult> run_all(const std::vector<CodeSample>& samples,
                                 const std::function<void(size_t)>& on_done = nullptr) const;
  RunResult run_one(const CodeSample& sample, int slot) const;
  // "netns+mountns+pidns+uid" style summary of the isolation actually in force.
  std::string isolation() const;

 private:
  SandboxOptions opt_;
  std::string python_exe_;         // absolute interpreter path
  std::vector<std::string> hide_;  // final list of directories to cover
  bool ns_ = false;                // CLONE_NEWNET|CLONE_NEWNS|CLONE_NEWPID work
  bool net_only_ = false;          // only CLONE_NEWNET works
  bool root_ = false;
};

}  // namespace dllmq::eval
