// gsm8k (lm-eval v0.4.8 gsm8k.yaml): 5 shots drawn per test doc from the train split with
// random.Random(1234).sample, "Question: ...\nAnswer:" format, strict-match and flexible-extract.
// synth: the repository's own GSM8K-format task (data/synth), zero-shot, the bare question as the
// prompt (the embedded model was trained on exactly that inside its chat template), same scoring.
#include <filesystem>

#include "eval/data.h"
#include "eval/gsm8k_answer.h"
#include "eval/prompts.h"
#include "eval/py_random.h"
#include "eval/task.h"
#include "util/error.h"

namespace dllmq::eval {

namespace {

constexpr int kGsm8kShots = 5;
constexpr uint32_t kFewshotSeed = 1234;  // lm_eval/evaluator.py fewshot_random_seed

std::string field(const nlohmann::json& doc, const char* name, const std::string& file,
                  size_t line) {
  if (!doc.contains(name) || !doc[name].is_string())
    fail("{}:{}: missing string field '{}'", file, line + 1, name);
  return doc[name].get<std::string>();
}

class Gsm8kTask : public Task {
 public:
  Gsm8kTask(const std::string& data, const TaskOptions& opt, bool synth) : synth_(synth) {
    std::string train = opt.train_path;
    if (train.empty()) train = (std::filesystem::path(data).parent_path() / "train.jsonl").string();
    const auto docs = read_jsonl(data);
    for (size_t i = 0; i < docs.size(); ++i) {
      questions_.push_back(field(docs[i], "question", data, i));
      answers_.push_back(field(docs[i], "answer", data, i));
    }
    train_path_ = train;
    apply_stop_ = opt.apply_stop;
  }

  std::string name() const override { return synth_ ? "synth" : "gsm8k"; }
  size_t size() const override { return questions_.size(); }
  std::string task_id(size_t i) const override { return std::to_string(i); }
  std::vector<std::string> stop_strings() const override {
    return {"Question:", "</s>", "<|im_end|>"};
  }
  // gsm8k: lm-eval's result keys "<metric>,<filter>" (its exact_match under the filters
  // strict-match and flexible-extract). synth is ours and keeps its short names.
  std::vector<std::string> metric_names() const override {
    if (synth_) return {"strict_match", "flexible_extract"};
    return {"exact_match,strict-match", "exact_match,flexible-extract"};
  }

  std::string prompt(size_t i) const override {
    if (synth_) return questions_[i];
    load_shots();
    std::vector<QaShot> shots;
    for (uint64_t s : shots_[i]) shots.push_back({train_q_[s], train_a_[s]});
    return gsm8k_prompt(shots, questions_[i]);
  }

  std::vector<SampleScore> score(const std::vector<size_t>& index,
                                 const std::vector<std::string>& responses,
                                 const ScoreEnv& env) const override {
    std::vector<SampleScore> out;
    for (size_t k = 0; k < index.size(); ++k) {
      const size_t i = index[k];
      SampleScore s;
      s.task_id = task_id(i);
      s.gold = gsm8k_gold(answers_[i]);
      const std::string r =
          apply_stop_ ? apply_stop_strings(responses[k], stop_strings()) : responses[k];
      const std::string strict = gsm8k_strict_extract(r);
      const std::string flex = gsm8k_flexible_extract(r);
      s.extracted = flex;
      const auto names = metric_names();
      s.metrics[names[0]] = gsm8k_match(strict, answers_[i]) ? 1.0 : 0.0;
      s.metrics[names[1]] = gsm8k_match(flex, answers_[i]) ? 1.0 : 0.0;
      s.detail = "strict: " + strict;
      out.push_back(std::move(s));
      if (env.on_progress) env.on_progress(k + 1, index.size());
    }
    return out;
  }

 private:
  // The shots depend on every earlier draw, so they are drawn for all docs in order, once.
  void load_shots() const {
    if (!shots_.empty()) return;
    const auto docs = read_jsonl(train_path_);
    if (docs.size() < kGsm8kShots)
      fail("{}: needs at least {} few-shot examples", train_path_, kGsm8kShots);
    for (size_t i = 0; i < docs.size(); ++i) {
      train_q_.push_back(field(docs[i], "question", train_path_, i));
      train_a_.push_back(field(docs[i], "answer", train_path_, i));
    }
    PyRandom rnd(kFewshotSeed);
    for (size_t i = 0; i < questions_.size(); ++i)
      shots_.push_back(rnd.sample(docs.size(), kGsm8kShots));
  }

  bool synth_ = false;
  std::vector<std::string> questions_, answers_;
  std::string train_path_;
  bool apply_stop_ = true;
  mutable std::vector<std::string> train_q_, train_a_;
  mutable std::vector<std::vector<uint64_t>> shots_;
};

}  // namespace

std::string gsm8k_prompt(const std::vector<QaShot>& shots, const std::string& question) {
  std::string out;
  for (const QaShot& s : shots)
    out += "Question: " + s.question + "\nAnswer:" + " " + s.answer + "\n\n";
  return out + "Question: " + question + "\nAnswer:";
}

std::unique_ptr<Task> make_gsm8k_task(const std::string& data, const TaskOptions& opt) {
  return std::make_unique<Gsm8kTask>(data, opt, /*synth=*/false);
}

std::unique_ptr<Task> make_synth_task(const std::string& data, const TaskOptions& opt) {
  return std::make_unique<Gsm8kTask>(data, opt, /*synth=*/true);
}

}  // namespace dllmq::eval
