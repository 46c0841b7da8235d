// Benchmark data JSONL (src/eval/data.cpp) as every task reads it (gsm8k, synth, math, humaneval,
// mbpp: src/eval/task_*.cpp), the record converters of `make-pairs` / `calibrate --task`
// (src/eval/calib_pairs.cpp) and calibration pairs files (src/calib/pairs.cpp). Accepted
// documents are turned into prompts and, for the answer-extracting tasks, scored against their
// own gold text. Input: one byte choosing the consumer, then the file.
#include "calib/pairs.h"
#include "eval/calib_pairs.h"
#include "eval/data.h"
#include "eval/task.h"
#include "fuzz_util.h"

namespace {

void exercise_task(const std::string& name, const std::string& path) {
  dllmq::eval::TaskOptions opt;
  opt.train_path = path;  // gsm8k draws its shots from the same records
  opt.chat = name == "humaneval";
  const auto task = dllmq::eval::make_task(name, path, opt);
  const size_t n = std::min<size_t>(task->size(), 4);
  std::vector<size_t> index;
  std::vector<std::string> responses;
  for (size_t i = 0; i < n; ++i) {
    (void)task->task_id(i);
    const std::string p = task->prompt(i);
    index.push_back(i);
    responses.push_back(p.substr(p.size() / 2));  // some text of the document's own
  }
  if (name == "gsm8k" || name == "synth" || name == "math") {
    dllmq::eval::ScoreEnv env;  // no sandbox, no MATH helper: the in-process metrics only
    (void)task->score(index, responses, env);
  }
}

}  // namespace

// The first byte picks the consumer, so each execution runs one loader (five times the rate
// of running all of them; libFuzzer mutates the byte like any other).
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const char* const kTasks[] = {"gsm8k", "synth", "math", "humaneval", "mbpp"};
  static const char* const kConverters[] = {"gsm8k", "math", "mbpp", "synth"};
  const unsigned pick = data[0] % 11;
  const std::string_view text = fuzz::as_text(data + 1, size - 1);
  if (pick == 0) {
    fuzz::accept_or_reject([&] { (void)dllmq::eval::parse_jsonl(text, "data.jsonl"); });
    return 0;
  }
  const std::string path = fuzz::write_scratch("data.jsonl", text);
  if (pick <= 5) {
    fuzz::accept_or_reject([&] { exercise_task(kTasks[pick - 1], path); });
  } else if (pick <= 9) {
    fuzz::accept_or_reject([&] {
      dllmq::eval::PairSourceOptions o;
      (void)dllmq::eval::convert_records(kConverters[pick - 6], path, o);
    });
  } else {
    fuzz::accept_or_reject([&] {
      dllmq::PairTokenizer bytes;  // text pairs: one id per byte, as a tokenizer would give ids
      bytes.prompt = bytes.answer = [](const std::string& s) {
        return std::vector<int32_t>(s.begin(), s.end());
      };
      std::string hash;
      (void)dllmq::read_calib_pairs(path, size % 2 ? bytes : dllmq::PairTokenizer{}, 1000, 0,
                                    &hash);
    });
  }
  return 0;
}
