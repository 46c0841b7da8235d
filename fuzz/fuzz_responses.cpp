// Responses JSONL of `eval --responses` (src/eval/score_only.cpp) against fixed gsm8k and math
// tasks, with the answer extractors run on arbitrary model output, and the samples file an
// interrupted `eval` resumes from (src/eval/run.cpp read_samples, with and without repair, and
// the summary `eval merge` computes over it).
#include <filesystem>

#include "eval/run.h"
#include "eval/score_only.h"
#include "eval/task.h"
#include "fuzz_util.h"

namespace {

const dllmq::eval::Task& fixed_task(bool math) {
  static const auto tasks = [] {
    const std::string gsm =
        fuzz::write_scratch("gsm8k.jsonl",
                            "{\"question\": \"Tom has 3 apples and buys 4 more. How many?\", "
                            "\"answer\": \"3 + 4 = 7\\n#### 7\"}\n"
                            "{\"question\": \"What is 10 - 4?\", \"answer\": \"#### 6\"}\n"
                            "{\"question\": \"q3\", \"answer\": \"#### 1,000\"}\n"
                            "{\"question\": \"q4\", \"answer\": \"#### -2.5\"}\n"
                            "{\"question\": \"q5\", \"answer\": \"#### 0\"}\n"
                            "{\"question\": \"q6\", \"answer\": \"#### 12\"}\n");
    const std::string math = fuzz::write_scratch(
        "math.jsonl",
        "{\"problem\": \"1+1?\", \"solution\": \"It is $\\\\boxed{2}$.\", \"type\": \"Algebra\"}\n"
        "{\"problem\": \"half\", \"solution\": \"$\\\\boxed{\\\\frac{1}{2}}$\"}\n"
        "{\"problem\": \"root\", \"solution\": \"$\\\\boxed{\\\\sqrt{2}}$\"}\n");
    dllmq::eval::TaskOptions o;
    o.train_path = gsm;
    std::vector<std::unique_ptr<dllmq::eval::Task>> t;
    t.push_back(dllmq::eval::make_task("gsm8k", gsm, o));
    t.push_back(dllmq::eval::make_task("math", math, o));
    return t;
  }();
  return *tasks[math ? 1 : 0];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool math = data[0] & 1;
  const std::string_view text = fuzz::as_text(data + 1, size - 1);
  const std::string path = fuzz::write_scratch("responses.jsonl", text);
  fuzz::accept_or_reject([&] {
    dllmq::eval::ScoreEnv env;
    (void)dllmq::eval::score_responses(fixed_task(math), path, env);
  });
  fuzz::accept_or_reject([&] { (void)dllmq::eval::read_samples(path, false); });
  fuzz::accept_or_reject([&] {
    // `eval merge` over a run directory holding the file as its samples: the summary reads
    // every field of every accepted record.
    static const std::string run = [] {
      const std::string dir = fuzz::scratch_dir() + "/run";
      std::filesystem::create_directories(dir);
      fuzz::write_scratch("run/config.json",
                          R"({"task": "gsm8k", "metrics": ["exact_match,strict-match"]})");
      return dir;
    }();
    fuzz::write_scratch("run/samples.jsonl", text);
    (void)dllmq::eval::merge_runs({run}, "");
  });
  fuzz::accept_or_reject([&] {
    const auto rows = dllmq::eval::read_samples(path, true);
    // After repair the file holds exactly the complete records that were read.
    if (dllmq::eval::read_samples(path, false).size() != rows.size()) std::abort();
  });
  return 0;
}
