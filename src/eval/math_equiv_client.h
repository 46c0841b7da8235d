// Client of tools/eval/math_equiv.py: lm-eval v0.4.8 minerva_math `process_results` (the sympy
// `is_equiv` exact_match and math_verify) computed by long-lived Python helper processes, one per
// worker, each serving every sample of the eval run over a socket (one JSON line per request and
// per phase). A helper that stops answering (a hang outside Python code, so its own 5 s alarms
// cannot fire) or dies is killed and restarted; the phase it was in scores 0, as lm-eval's
// timeout would.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace dllmq::eval {

// Default helper script: $DLLMQ_MATH_EQUIV, else <source dir>/tools/eval/math_equiv.py.
std::string default_math_equiv_helper();

// What to tell a user whose MATH scoring environment is missing.
extern const char* const kMathEnvHint;

struct MathRequest {
  std::string response;  // after the task's stop strings
  std::string solution;  // the document's solution (gold = its last \boxed{}, normalized)
};

struct MathVerdict {
  std::optional<bool> exact_match;  // sympy is_equiv; nullopt = not computed
  std::optional<bool> math_verify;
  std::string pred, gold;   // lm-eval's normalized answers, as the helper computed them
  bool normalized = false;  // pred/gold came back (the equiv phase answered)
  std::string error;        // helper killed / died on this sample (the phase then scores 0)
};

class MathHelper {
 public:
  // `python`: interpreter with sympy, antlr4 4.11 and math-verify; `script`: math_equiv.py.
  MathHelper(std::string python, std::string script, int workers);
  ~MathHelper();
  MathHelper(const MathHelper&) = delete;
  MathHelper& operator=(const MathHelper&) = delete;

  // Starts the first helper (once) and says whether scoring is possible; `why` otherwise.
  bool ready(std::string* why);
  // Versions that differ from tools/eval/requirements.txt ("sympy 1.12 (pinned 1.14.0)").
  const std::vector<std::string>& pin_mismatch() const { return mismatch_; }
  const std::string& versions() const { return versions_; }
  // Scores every request (ready() must be true), `workers` helpers in parallel; `on_done` is
  // called from the worker threads with the number finished so far.
  std::vector<MathVerdict> judge(const std::vector<MathRequest>& reqs,
                                 const std::function<void(size_t)>& on_done = nullptr);
  // Helper restarts so far (kills after a phase timeout, crashes).
  size_t restarts() const { return restarts_.load(); }

  double phase_timeout_s = 60.0;  // per phase, far above the helper's own 5 s alarms
  double start_timeout_s = 180.0;

 private:
  struct Proc {
    pid_t pid = -1;
    int fd = -1;      // our end of the helper's stdin/stdout socket
    int err_fd = -1;  // unlinked temp file with the helper's stderr
    std::string buf;
  };
  bool start(Proc& p, std::string* why);
  void stop(Proc& p);
  std::string err_tail(const Proc& p) const;
  // Runs one request's phases on `p`; restarts `p` as needed.
  MathVerdict run(Proc& p, const MathRequest& r, long long id);

  std::string python_, script_;
  int workers_;
  std::vector<std::unique_ptr<Proc>> procs_;
  bool checked_ = false, ok_ = false;
  std::string why_, versions_;
  std::vector<std::string> mismatch_;
  std::mutex mu_;
  std::atomic<size_t> restarts_{0};
};

}  // namespace dllmq::eval
