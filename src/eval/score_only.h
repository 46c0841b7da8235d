// Score-only mode: a responses file (one {"task_id", "response"} per line) against a task.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/task.h"

namespace dllmq::eval {

struct ScoredRun {
  nlohmann::json summary;            // report.h summarize() plus "n_missing"
  std::vector<SampleScore> samples;  // in responses-file order
};

// task_id is the dataset's own id (HumanEval "HumanEval/0", MBPP 11) or, for gsm8k/math, the
// 0-based line index; numbers and strings are both accepted. Unknown or repeated ids are errors.
ScoredRun score_responses(const Task& task, const std::string& responses_path, const ScoreEnv& env);

// "11" for 11, "HumanEval/0" for "HumanEval/0"; throws naming file:line otherwise.
std::string task_id_string(const nlohmann::json& v, const std::string& file, size_t line);

}  // namespace dllmq::eval
