// Benchmark tasks with lm-eval v0.4.8 conventions: documents, prompt text, stop strings and
// scoring of model responses. One implementation per benchmark (gsm8k, math, humaneval, mbpp).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/math_equiv_client.h"
#include "eval/sandbox.h"

namespace dllmq::eval {

struct TaskOptions {
  bool chat = false;       // instruct-model conventions (Fast-dLLM code post-processing)
  std::string subset;      // math: "" (all 5000) or "math500"
  std::string train_path;  // gsm8k few-shot source; default: train.jsonl beside --data
  bool apply_stop = true;  // cut raw responses at the task's stop strings (as lm-eval's until)
};

// Everything the scorer needs besides the task: code sandbox and the MATH helper processes.
struct ScoreEnv {
  const Sandbox* sandbox = nullptr;  // code tasks
  // math: lm-eval's exact_match (sympy) and math_verify, by tools/eval/math_equiv.py processes
  // that live as long as this pointer (one eval run). Null: those metrics are not computed, and
  // `math_off` says why.
  std::shared_ptr<MathHelper> math;
  std::string math_off;
  int workers = 2;
  std::function<void(size_t done, size_t total)> on_progress;
};

// One scored sample. Metrics are 0/1 per sample; nullopt = not computed.
struct SampleScore {
  std::string task_id;
  std::string extracted;  // extracted answer (math tasks) or executed-program status (code)
  std::string gold;
  std::map<std::string, std::optional<double>> metrics;
  std::string status;  // code: passed/failed/timeout/error
  std::string detail;  // code: assertion text, timeout, ...
  std::string group;   // math: subject
};

class Task {
 public:
  virtual ~Task() = default;
  virtual std::string name() const = 0;
  virtual size_t size() const = 0;
  virtual std::string task_id(size_t i) const = 0;
  // The lm-eval context (few-shot blocks included) as plain text; instruct models get all of it
  // as one user turn of the chat template.
  virtual std::string prompt(size_t i) const = 0;
  virtual std::vector<std::string> stop_strings() const = 0;
  // Metric names in report order; the first one is the headline "accuracy".
  virtual std::vector<std::string> metric_names() const = 0;
  // Scores raw responses for documents `index[k]`.
  virtual std::vector<SampleScore> score(const std::vector<size_t>& index,
                                         const std::vector<std::string>& responses,
                                         const ScoreEnv& env) const = 0;
  // Index of a task_id (as written in responses files), or nullopt.
  std::optional<size_t> find(const std::string& id) const;
  // Remarks from the last score() call, e.g. why a metric was not computed.
  const std::vector<std::string>& notes() const { return notes_; }

 protected:
  mutable std::vector<std::string> notes_;
  mutable std::map<std::string, size_t> id_index_;
};

std::vector<std::string> task_names();
std::unique_ptr<Task> make_task(const std::string& name, const std::string& data,
                                const TaskOptions& opt);

// Keeps the text before the first occurrence of each stop string, applied in order.
std::string apply_stop_strings(std::string text, const std::vector<std::string>& until);
// Fast-dLLM instruct code extraction: the text after the first "```python\n" (if any), cut at the
// next "```".
std::string extract_python_block(const std::string& response);

}  // namespace dllmq::eval
