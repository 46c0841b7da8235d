// Aggregation of per-sample scores into the summary the CLI prints (JSON object / table).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/task.h"

namespace dllmq::eval {

// {"task", "n", <metric>: mean in [0,1] or null when not computed, "by_group" for MATH subjects,
//  "status_counts" for code tasks, "notes"}.
nlohmann::json summarize(const Task& task, const std::vector<SampleScore>& scores);
nlohmann::json summarize(const std::string& task, const std::vector<std::string>& metric_names,
                         const std::vector<SampleScore>& scores,
                         const std::vector<std::string>& notes = {});
// One JSON line per sample (task_id, extracted, gold, metrics, status, detail).
nlohmann::json sample_json(const SampleScore& s);
// Inverse of sample_json (also reads the generation run records, which are a superset).
SampleScore sample_from_json(const nlohmann::json& j);
// Markdown table of a summary.
std::string summary_markdown(const nlohmann::json& summary);

}  // namespace dllmq::eval
