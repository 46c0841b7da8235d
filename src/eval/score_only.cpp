#include "eval/score_only.h"

#include <set>

#include "eval/data.h"
#include "eval/report.h"
#include "util/error.h"

namespace dllmq::eval {

std::string task_id_string(const nlohmann::json& v, const std::string& file, size_t line) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  fail("{}:{}: task_id must be a string or an integer", file, line);
}

ScoredRun score_responses(const Task& task, const std::string& responses_path,
                          const ScoreEnv& env) {
  const auto rows = read_jsonl(responses_path);
  std::vector<size_t> index;
  std::vector<std::string> responses;
  std::set<size_t> seen;
  for (size_t k = 0; k < rows.size(); ++k) {
    const auto& r = rows[k];
    if (!r.contains("task_id")) fail("{}:{}: missing field 'task_id'", responses_path, k + 1);
    if (!r.contains("response") || !r["response"].is_string())
      fail("{}:{}: missing string field 'response'", responses_path, k + 1);
    const std::string id = task_id_string(r["task_id"], responses_path, k + 1);
    const auto i = task.find(id);
    if (!i) fail("{}:{}: task_id {} is not in the {} data", responses_path, k + 1, id, task.name());
    if (!seen.insert(*i).second) fail("{}:{}: task_id {} appears twice", responses_path, k + 1, id);
    index.push_back(*i);
    responses.push_back(r["response"].get<std::string>());
  }
  ScoredRun run;
  run.samples = task.score(index, responses, env);
  run.summary = summarize(task, run.samples);
  run.summary["n_missing"] = task.size() - index.size();
  return run;
}

}  // namespace dllmq::eval
