// The prompt text each benchmark's eval builds (lm-eval v0.4.8 conventions, docs/eval.md), as
// free functions: the eval tasks call them, and so do the calibration pair converters
// (src/eval/calib_pairs.h), so calibration prompts cannot drift from the eval's.
#pragma once

#include <string>
#include <vector>

namespace dllmq::eval {

// gsm8k: each shot "Question: q\nAnswer: a\n\n", then "Question: q\nAnswer:".
struct QaShot {
  std::string question, answer;
};
std::string gsm8k_prompt(const std::vector<QaShot>& shots, const std::string& question);

// math (minerva_math): the 4 fixed Minerva shots, then "Problem:\n{problem}\n\nSolution:".
std::string minerva_math_prompt(const std::string& problem);

// mbpp: shots (task ids 2, 3, 4) as "{task text}{code}\n[DONE]\n\n", then the task text, which
// ends in "[BEGIN]\n".
struct MbppDoc {
  int id = 0;
  std::string text, code;
  std::vector<std::string> tests;  // at least 3 asserts; the prompt shows the first 3
};
inline constexpr int kMbppShotIds[] = {2, 3, 4};
std::string mbpp_prompt(const std::vector<MbppDoc>& shots, const MbppDoc& doc);

}  // namespace dllmq::eval
