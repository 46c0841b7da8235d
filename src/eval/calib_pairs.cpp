#include "eval/calib_pairs.h"

#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "eval/math_answer.h"
#include "eval/prompts.h"
#include "eval/py_random.h"
#include "util/error.h"
#include "util/json_limits.h"

namespace dllmq::eval {

namespace {

constexpr int kGsm8kShots = 5;
constexpr uint32_t kGsm8kFewshotSeed = 1234;  // lm_eval/evaluator.py fewshot_random_seed

struct Record {
  nlohmann::json j;
  std::string where;  // FILE:LINE
};

std::vector<Record> read_records(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("--data {}: cannot open", path);
  std::vector<Record> out;
  std::string line;
  for (size_t no = 1; std::getline(in, line); ++no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Record r{parse_json_or_discarded(line), fmt::format("{}:{}", path, no)};
    if (r.j.is_discarded() || !r.j.is_object()) fail("{}: not a JSON object", r.where);
    out.push_back(std::move(r));
  }
  if (out.empty()) fail("--data {}: no records", path);
  return out;
}

std::string str(const Record& r, const char* field) {
  if (!r.j.contains(field)) fail("{}: field '{}' is missing", r.where, field);
  if (!r.j[field].is_string()) fail("{}: field '{}' must be a string", r.where, field);
  return r.j[field].get<std::string>();
}

std::vector<TextPair> gsm8k(const std::vector<Record>& recs, const std::string& path,
                            const PairSourceOptions& o) {
  namespace fs = std::filesystem;
  const bool own = o.shots.empty() || (fs::exists(o.shots) && fs::equivalent(o.shots, path));
  std::vector<QaShot> pool;
  if (own) {
    for (const Record& r : recs) pool.push_back({str(r, "question"), str(r, "answer")});
  } else {
    if (!fs::exists(o.shots)) fail("--shots {}: cannot open", o.shots);
    for (const Record& r : read_records(o.shots))
      pool.push_back({str(r, "question"), str(r, "answer")});
  }
  const size_t need = kGsm8kShots + (own ? 1 : 0);
  if (pool.size() < need)
    fail("{}: {} few-shot records, gsm8k needs at least {}", own ? path : o.shots, pool.size(),
         need);
  PyRandom rnd(kGsm8kFewshotSeed);
  std::vector<TextPair> out;
  for (const Record& r : recs) {
    const QaShot doc{str(r, "question"), str(r, "answer")};
    std::vector<QaShot> shots;
    for (uint64_t s : rnd.sample(pool.size(), int(need))) {
      const QaShot& x = pool[s];
      // lm-eval drops the shots equal to the document itself (dict comparison).
      if (own && x.question == doc.question && x.answer == doc.answer) continue;
      if (int(shots.size()) < kGsm8kShots) shots.push_back(x);
    }
    out.push_back({gsm8k_prompt(shots, doc.question), " " + doc.answer, r.where});
    if (o.limit && out.size() >= o.limit) break;
  }
  return out;
}

std::vector<TextPair> math(const std::vector<Record>& recs, const PairSourceOptions& o) {
  std::vector<TextPair> out;
  for (const Record& r : recs) {
    const std::string problem = str(r, "problem"), solution = str(r, "solution");
    const auto boxed = last_boxed_only_string(solution);
    const auto answer = boxed ? remove_boxed(*boxed) : std::nullopt;
    if (!answer) fail("{}: field 'solution' has no \\boxed{{...}} answer", r.where);
    out.push_back({minerva_math_prompt(problem),
                   " " + solution + "\nFinal Answer: The final answer is $" + *answer +
                       "$. I hope it is correct.",
                   r.where});
    if (o.limit && out.size() >= o.limit) break;
  }
  return out;
}

MbppDoc mbpp_doc(const Record& r) {
  if (!r.j.contains("task_id") || !r.j["task_id"].is_number_integer())
    fail("{}: field 'task_id' must be an integer", r.where);
  MbppDoc d{r.j["task_id"].get<int>(), str(r, "text"), str(r, "code"), {}};
  if (!r.j.contains("test_list") || !r.j["test_list"].is_array() || r.j["test_list"].size() < 3)
    fail("{}: field 'test_list' must be an array of at least 3 asserts", r.where);
  for (const auto& t : r.j["test_list"]) {
    if (!t.is_string()) fail("{}: field 'test_list' holds a non-string", r.where);
    d.tests.push_back(t.get<std::string>());
  }
  return d;
}

std::vector<TextPair> mbpp(const std::vector<Record>& recs, const std::string& path,
                           const PairSourceOptions& o) {
  int lo = 0, hi = 0;
  if (o.split == "train")
    lo = 601, hi = 974;
  else if (o.split == "validation")
    lo = 511, hi = 600;
  else if (o.split == "test")
    lo = 11, hi = 510;
  else
    fail("--split {}: expected train (601-974), validation (511-600) or test (11-510)", o.split);
  std::vector<MbppDoc> shots;
  std::vector<std::pair<MbppDoc, std::string>> docs;
  std::set<int> ids;
  for (const Record& r : recs) {
    MbppDoc d = mbpp_doc(r);
    if (!ids.insert(d.id).second) fail("{}: field 'task_id': {} appears twice", r.where, d.id);
    if (d.id >= lo && d.id <= hi) docs.push_back({d, r.where});
    for (int s : kMbppShotIds)
      if (d.id == s) shots.push_back(d);
  }
  std::sort(shots.begin(), shots.end(), [](auto& a, auto& b) { return a.id < b.id; });
  if (shots.size() != std::size(kMbppShotIds))
    fail("{}: the few-shot records (task_id 2, 3, 4) are missing", path);
  std::sort(docs.begin(), docs.end(), [](auto& a, auto& b) { return a.first.id < b.first.id; });
  if (docs.empty()) fail("{}: no records of the {} split (task_id {}-{})", path, o.split, lo, hi);
  std::vector<TextPair> out;
  for (const auto& [d, where] : docs) {
    out.push_back({mbpp_prompt(shots, d), d.code + "\n[DONE]", where});
    if (o.limit && out.size() >= o.limit) break;
  }
  return out;
}

std::vector<TextPair> synth(const std::vector<Record>& recs, const PairSourceOptions& o) {
  std::vector<TextPair> out;
  for (const Record& r : recs) {
    out.push_back({str(r, "question"), str(r, "answer"), r.where});
    if (o.limit && out.size() >= o.limit) break;
  }
  return out;
}

}  // namespace

std::vector<std::string> pair_source_tasks() {
  return {"gsm8k", "math", "mbpp", "synth"};
}

bool task_forces_chat(const std::string& task) {
  return task == "synth";
}

std::vector<TextPair> convert_records(const std::string& task, const std::string& path,
                                      const PairSourceOptions& opt) {
  if (task != "gsm8k" && task != "math" && task != "mbpp" && task != "synth")
    fail("--task {}: expected gsm8k, math, mbpp or synth", task);
  if (!opt.shots.empty() && task != "gsm8k") fail("--shots applies to --task gsm8k only");
  if (opt.split != "train" && task != "mbpp") fail("--split applies to --task mbpp only");
  const std::vector<Record> recs = read_records(path);
  if (task == "gsm8k") return gsm8k(recs, path, opt);
  if (task == "math") return math(recs, opt);
  if (task == "mbpp") return mbpp(recs, path, opt);
  return synth(recs, opt);
}

}  // namespace dllmq::eval
