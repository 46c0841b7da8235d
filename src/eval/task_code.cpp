// humaneval and mbpp (lm-eval v0.4.8 humaneval.yaml / mbpp.yaml), scored by running each program
// in the sandbox (pass@1 of greedy samples = pass fraction). Base convention: humaneval program =
// prompt + completion, mbpp program = completion. --chat: Fast-dLLM's instruct post-processing
// (first ```python block, then the AST sanitizer, inside the sandbox).
#include <algorithm>
#include <atomic>
#include <map>

#include "eval/data.h"
#include "eval/prompts.h"
#include "eval/task.h"
#include "util/error.h"

namespace dllmq::eval {

namespace {

std::string str_field(const nlohmann::json& d, const char* name, const std::string& file,
                      size_t line) {
  if (!d.contains(name) || !d[name].is_string())
    fail("{}:{}: missing string field '{}'", file, line + 1, name);
  return d[name].get<std::string>();
}

// Shared: build programs, run them, turn sandbox results into scores.
class CodeTask : public Task {
 public:
  // lm-eval's names: humaneval's pass_at_k returns {"pass@1": ...}; mbpp's metric function is
  // utils.pass_at_1, so lm-eval reports "pass_at_1" there (kept next to "pass@1", same value).
  std::vector<std::string> metric_names() const override {
    if (name() == "mbpp") return {"pass@1", "pass_at_1"};
    return {"pass@1"};
  }

  std::vector<SampleScore> score(const std::vector<size_t>& index,
                                 const std::vector<std::string>& responses,
                                 const ScoreEnv& env) const override {
    notes_.clear();
    if (!env.sandbox) fail("{}: scoring code needs the sandbox", name());
    std::vector<CodeSample> samples;
    for (size_t k = 0; k < index.size(); ++k) samples.push_back(program(index[k], responses[k]));
    std::atomic<size_t> done{0};
    const auto results = env.sandbox->run_all(samples, [&](size_t) {
      const size_t d = ++done;
      if (env.on_progress) env.on_progress(d, index.size());
    });
    std::vector<SampleScore> out;
    for (size_t k = 0; k < index.size(); ++k) {
      SampleScore s;
      s.task_id = task_id(index[k]);
      s.status = run_status_name(results[k].status);
      s.detail = results[k].detail;
      s.extracted = results[k].program.empty() ? samples[k].code : results[k].program;
      for (const std::string& m : metric_names())
        s.metrics[m] = results[k].status == RunStatus::kPassed ? 1.0 : 0.0;
      out.push_back(std::move(s));
    }
    return out;
  }

 protected:
  virtual CodeSample program(size_t i, const std::string& response) const = 0;
  bool chat_ = false, apply_stop_ = true;
};

class HumanEvalTask : public CodeTask {
 public:
  HumanEvalTask(const std::string& data, const TaskOptions& opt) {
    chat_ = opt.chat;
    apply_stop_ = opt.apply_stop;
    const auto docs = read_jsonl(data);
    for (size_t i = 0; i < docs.size(); ++i)
      docs_.push_back({str_field(docs[i], "task_id", data, i),
                       str_field(docs[i], "prompt", data, i), str_field(docs[i], "test", data, i),
                       str_field(docs[i], "entry_point", data, i)});
  }
  std::string name() const override { return "humaneval"; }
  size_t size() const override { return docs_.size(); }
  std::string task_id(size_t i) const override { return docs_[i].id; }
  std::string prompt(size_t i) const override { return docs_[i].prompt; }
  std::vector<std::string> stop_strings() const override {
    if (chat_) return {};  // Fast-dLLM decodes instruct HumanEval without stop strings
    return {"\nclass", "\ndef", "\n#", "\nif", "\nprint"};
  }

 protected:
  CodeSample program(size_t i, const std::string& response) const override {
    const Doc& d = docs_[i];
    CodeSample s;
    s.test = d.test + "\ncheck(" + d.entry_point + ")";
    if (chat_) {
      s.code = d.prompt + "\n" + extract_python_block(response);
      s.sanitize = true;
      s.entry_point = d.entry_point;
    } else {
      s.code = d.prompt + (apply_stop_ ? apply_stop_strings(response, stop_strings()) : response);
    }
    return s;
  }

 private:
  struct Doc {
    std::string id, prompt, test, entry_point;
  };
  std::vector<Doc> docs_;
};

class MbppTask : public CodeTask {
 public:
  MbppTask(const std::string& data, const TaskOptions& opt) {
    chat_ = opt.chat;
    apply_stop_ = opt.apply_stop;
    const auto docs = read_jsonl(data);
    std::map<int, MbppDoc> by_id;
    for (size_t i = 0; i < docs.size(); ++i) {
      const auto& d = docs[i];
      if (!d.contains("task_id") || !d["task_id"].is_number_integer())
        fail("{}:{}: missing integer task_id", data, i + 1);
      if (!d.contains("test_list") || !d["test_list"].is_array() || d["test_list"].size() < 3)
        fail("{}:{}: test_list needs 3 asserts", data, i + 1);
      MbppDoc doc{d["task_id"].get<int>(),
                  str_field(d, "text", data, i),
                  str_field(d, "code", data, i),
                  {}};
      for (const auto& t : d["test_list"]) {
        if (!t.is_string()) fail("{}:{}: test_list holds a non-string", data, i + 1);
        doc.tests.push_back(t.get<std::string>());
      }
      by_id[doc.id] = std::move(doc);
    }
    for (int id : kMbppShotIds) {
      if (!by_id.count(id)) fail("{}: few-shot task_id {} missing", data, id);
      shots_.push_back(by_id[id]);
    }
    for (int id = 11; id <= 510; ++id)  // the test split
      if (by_id.count(id)) docs_.push_back(by_id[id]);
    if (docs_.empty()) fail("{}: no test-split problems (task_id 11-510)", data);
  }
  std::string name() const override { return "mbpp"; }
  size_t size() const override { return docs_.size(); }
  std::string task_id(size_t i) const override { return std::to_string(docs_[i].id); }
  std::vector<std::string> stop_strings() const override { return {"[DONE]"}; }
  std::string prompt(size_t i) const override { return mbpp_prompt(shots_, docs_[i]); }

 protected:
  CodeSample program(size_t i, const std::string& response) const override {
    const MbppDoc& d = docs_[i];
    CodeSample s;
    s.test = d.tests[0] + "\n" + d.tests[1] + "\n" + d.tests[2];
    const std::string r = apply_stop_ ? apply_stop_strings(response, stop_strings()) : response;
    if (chat_) {
      s.code = extract_python_block(r);
      s.sanitize = true;  // no entry point: keep every definition
    } else {
      s.code = r;
    }
    return s;
  }

 private:
  std::vector<MbppDoc> shots_, docs_;
};

std::string mbpp_text(const MbppDoc& d) {
  return "You are an expert Python programmer, and here is your task: " + d.text +
         " Your code should pass these tests:\n\n" + d.tests[0] + "\n" + d.tests[1] + "\n" +
         d.tests[2] + "\n[BEGIN]\n";
}

}  // namespace

std::string mbpp_prompt(const std::vector<MbppDoc>& shots, const MbppDoc& doc) {
  std::string out;
  for (const MbppDoc& s : shots)
    out += mbpp_text(s) + s.code + "\n[DONE]" + "\n\n";  // target_delimiter ""
  return out + mbpp_text(doc);
}

std::unique_ptr<Task> make_humaneval_task(const std::string& data, const TaskOptions& opt) {
  return std::make_unique<HumanEvalTask>(data, opt);
}
std::unique_ptr<Task> make_mbpp_task(const std::string& data, const TaskOptions& opt) {
  return std::make_unique<MbppTask>(data, opt);
}

}  // namespace dllmq::eval
