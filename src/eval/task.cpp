#include "eval/task.h"

#include "util/error.h"

namespace dllmq::eval {

std::unique_ptr<Task> make_gsm8k_task(const std::string& data, const TaskOptions& opt);
std::unique_ptr<Task> make_math_task(const std::string& data, const TaskOptions& opt);
std::unique_ptr<Task> make_humaneval_task(const std::string& data, const TaskOptions& opt);
std::unique_ptr<Task> make_mbpp_task(const std::string& data, const TaskOptions& opt);
std::unique_ptr<Task> make_synth_task(const std::string& data, const TaskOptions& opt);

std::vector<std::string> task_names() {
  return {"gsm8k", "math", "humaneval", "mbpp", "synth"};
}

std::unique_ptr<Task> make_task(const std::string& name, const std::string& data,
                                const TaskOptions& opt) {
  if (name == "gsm8k") return make_gsm8k_task(data, opt);
  if (name == "math") return make_math_task(data, opt);
  if (name == "humaneval") return make_humaneval_task(data, opt);
  if (name == "mbpp") return make_mbpp_task(data, opt);
  if (name == "synth") return make_synth_task(data, opt);
  fail("--task {}: unknown task (gsm8k, math, humaneval, mbpp, synth)", name);
}

std::optional<size_t> Task::find(const std::string& id) const {
  if (id_index_.empty())
    for (size_t i = 0; i < size(); ++i) id_index_.emplace(task_id(i), i);
  const auto it = id_index_.find(id);
  if (it == id_index_.end()) return std::nullopt;
  return it->second;
}

std::string apply_stop_strings(std::string text, const std::vector<std::string>& until) {
  for (const std::string& s : until) {
    if (s.empty()) continue;
    if (const size_t p = text.find(s); p != std::string::npos) text.resize(p);
  }
  return text;
}

std::string extract_python_block(const std::string& response) {
  std::string text = response;
  static const std::string kOpen = "```python\n";
  if (const size_t p = text.find(kOpen); p != std::string::npos)
    text = text.substr(p + kOpen.size());
  if (const size_t p = text.find("```"); p != std::string::npos) text.resize(p);
  return text;
}

}  // namespace dllmq::eval
