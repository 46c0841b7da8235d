// Calibration pairs from benchmark records (`dllmq make-pairs`, `dllmq calibrate --task`). The
// prompt is the one the task's eval builds (prompts.h), so the calibrated states match
// inference; the answer is the reference in the format the prompt's shots demonstrate:
//   gsm8k  {"question", "answer"} (GSM8K train): lm-eval's 5 shots, drawn per record in record
//          order with random.Random(1234).sample, from `shots` (another file: 5 drawn, as the eval
//          draws for test records) or from the records themselves (default: then 6 are drawn and
//          the record itself dropped, lm-eval's rule when the few-shot split is the evaluated
//          one). Answer " " + answer (lm-eval's target delimiter).
//   math   {"problem", "solution"} (MATH train layout): the 4 Minerva shots. Answer " " + solution
//          + "\nFinal Answer: The final answer is $X$. I hope it is correct.", X the content of
//          the solution's last \boxed{}, as every Minerva shot ends.
//   mbpp   {"task_id", "text", "code", "test_list"} (mbpp.jsonl): shots task ids 2, 3, 4 from
//          the same file; records of `split` train (601-974, default), validation (511-600) or
//          test (11-510). Answer code + "\n[DONE]", as the shots end.
//   synth  {"question", "answer"} as training/synth_task.py writes them: the bare question (a user
//          turn of the chat template, as `eval --task synth`), the answer as is.
// Errors name the file, the line and the field.
#pragma once

#include <string>
#include <vector>

#include "calib/pairs.h"

namespace dllmq::eval {

struct PairSourceOptions {
  std::string shots;            // gsm8k: few-shot pool (default: the records' own file)
  std::string split = "train";  // mbpp: train | validation | test
  size_t limit = 0;             // first N pairs (0 = all)
};

std::vector<std::string> pair_source_tasks();  // gsm8k, math, mbpp, synth

// Throws naming --task for an unknown task, and FILE:LINE and the field for a bad record.
std::vector<TextPair> convert_records(const std::string& task, const std::string& path,
                                      const PairSourceOptions& opt);

// Whether `task` is answered in the chat template by its eval (synth: always).
bool task_forces_chat(const std::string& task);

}  // namespace dllmq::eval
