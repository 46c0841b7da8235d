// dllmq make-pairs: benchmark records -> the calibration pairs JSONL `dllmq calibrate --data`
// reads, each prompt as the task's eval builds it (src/eval/calib_pairs.h). `calibrate --task`
// does the same conversion in memory; this writes it out for inspection or reuse.
#include <fmt/core.h>

#include "calib/pairs.h"
#include "cli/commands.h"
#include "eval/calib_pairs.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace dllmq::cli {

namespace {

struct MakePairsArgs {
  std::string task, data, out;
  eval::PairSourceOptions opt;
};

void run(const MakePairsArgs& a) {
  const std::vector<TextPair> pairs = eval::convert_records(a.task, a.data, a.opt);
  std::string bytes;
  for (const TextPair& p : pairs) bytes += pair_json_line(p) + "\n";
  write_file_atomic(a.out, bytes);
  fmt::print(stderr, "dllmq make-pairs: {} {} pairs from {} -> {}{}\n", pairs.size(), a.task,
             a.data, a.out,
             eval::task_forces_chat(a.task) ? " (calibrate with --chat, as its eval does)" : "");
}

}  // namespace

void register_make_pairs(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "make-pairs",
      "Turn GSM8K / MATH / MBPP / synth records into calibration pairs (eval prompts)");
  auto a = std::make_shared<MakePairsArgs>();
  cmd->add_option("--task", a->task, "gsm8k | math | mbpp | synth")->required();
  cmd->add_option("--data", a->data, "the task's records (JSONL)")->required();
  cmd->add_option("--shots", a->opt.shots,
                  "gsm8k: few-shot pool (default: the records themselves, each record left out "
                  "of its own shots)");
  cmd->add_option("--split", a->opt.split, "mbpp: train (601-974) | validation | test")
      ->capture_default_str();
  cmd->add_option("--limit", a->opt.limit, "first N pairs only (0 = all)")->capture_default_str();
  cmd->add_option("--out", a->out, "pairs JSONL (written to a temporary file and renamed)")
      ->required();
  cmd->callback([a] { run(*a); });
}

}  // namespace dllmq::cli
