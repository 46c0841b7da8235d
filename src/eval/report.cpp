#include "eval/report.h"

#include <map>

#include <fmt/format.h>

namespace dllmq::eval {

nlohmann::json summarize(const Task& task, const std::vector<SampleScore>& scores) {
  return summarize(task.name(), task.metric_names(), scores, task.notes());
}

nlohmann::json summarize(const std::string& task, const std::vector<std::string>& metric_names,
                         const std::vector<SampleScore>& scores,
                         const std::vector<std::string>& notes) {
  nlohmann::json j;
  j["task"] = task;
  j["n"] = scores.size();
  for (const std::string& m : metric_names) {
    double sum = 0;
    size_t n = 0;
    for (const auto& s : scores)
      if (auto it = s.metrics.find(m); it != s.metrics.end() && it->second) sum += *it->second, ++n;
    if (n == scores.size() && n > 0)
      j[m] = sum / n;
    else if (scores.empty())
      j[m] = 0.0;
    else
      j[m] = nullptr;  // not computed (for some or all samples)
  }
  struct Group {
    double sum = 0;
    size_t n = 0, computed = 0;
  };
  std::map<std::string, Group> groups;
  std::map<std::string, size_t> status;
  const std::string head = metric_names.front();
  for (const auto& s : scores) {
    if (!s.group.empty()) {
      auto& g = groups[s.group];
      if (auto it = s.metrics.find(head); it != s.metrics.end() && it->second)
        g.sum += *it->second, ++g.computed;
      ++g.n;
    }
    if (!s.status.empty()) ++status[s.status];
  }
  if (!groups.empty()) {
    nlohmann::json by = nlohmann::json::object();
    for (const auto& [name, g] : groups)
      by[name] = {
          {"n", g.n},
          {head, g.computed == g.n ? nlohmann::json(g.sum / g.n) : nlohmann::json(nullptr)}};
    j["by_group"] = by;
  }
  if (!status.empty()) j["status_counts"] = status;
  if (!notes.empty()) j["notes"] = notes;
  return j;
}

nlohmann::json sample_json(const SampleScore& s) {
  nlohmann::json m = nlohmann::json::object();
  for (const auto& [k, v] : s.metrics) m[k] = v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  nlohmann::json j = {
      {"task_id", s.task_id}, {"extracted", s.extracted}, {"gold", s.gold}, {"metrics", m}};
  if (!s.status.empty()) j["status"] = s.status;
  if (!s.detail.empty()) j["detail"] = s.detail;
  if (!s.group.empty()) j["group"] = s.group;
  return j;
}

SampleScore sample_from_json(const nlohmann::json& j) {
  SampleScore s;
  s.task_id = j.value("task_id", std::string());
  s.extracted = j.value("extracted", std::string());
  s.gold = j.value("gold", std::string());
  s.status = j.value("status", std::string());
  s.detail = j.value("detail", std::string());
  s.group = j.value("group", std::string());
  if (j.contains("metrics") && j["metrics"].is_object())
    for (const auto& [k, v] : j["metrics"].items())
      s.metrics[k] = v.is_number() ? std::optional<double>(v.get<double>()) : std::nullopt;
  return s;
}

std::string summary_markdown(const nlohmann::json& summary) {
  std::string out = "| task | n | metric | value |\n|---|---|---|---|\n";
  std::string stats;
  for (const auto& [k, v] : summary.items()) {
    if (k == "task" || k == "n" || v.is_object() || v.is_array() || v.is_string()) continue;
    // Counts and timings go below the table; the rows are the metrics.
    if (k.starts_with("n_") || k.starts_with("mean_") || k == "tokens_per_s" ||
        k == "duplicates_dropped") {
      stats += fmt::format("{}{} {}", stats.empty() ? "" : ", ", k, v.dump());
      continue;
    }
    const std::string val = v.is_null() ? "not computed" : fmt::format("{:.4f}", v.get<double>());
    out += fmt::format("| {} | {} | {} | {} |\n", summary["task"].get<std::string>(),
                       summary["n"].get<size_t>(), k, val);
  }
  if (summary.contains("by_group"))
    for (const auto& [g, v] : summary["by_group"].items())
      for (const auto& [m, x] : v.items())
        if (m != "n")
          out += fmt::format(
              "| {} / {} | {} | {} | {} |\n", summary["task"].get<std::string>(), g,
              v["n"].get<size_t>(), m,
              x.is_null() ? std::string("not computed") : fmt::format("{:.4f}", x.get<double>()));
  if (summary.contains("status_counts"))
    for (const auto& [st, c] : summary["status_counts"].items())
      out += fmt::format("| {} | {} | status {} | {} |\n", summary["task"].get<std::string>(),
                         summary["n"].get<size_t>(), st, c.get<size_t>());
  if (!stats.empty()) out.append("\n").append(stats).append("\n");
  if (summary.contains("notes"))
    for (const auto& note : summary["notes"]) out += "\nnote: " + note.get<std::string>() + "\n";
  return out;
}

}  // namespace dllmq::eval
