// Evaluation runs with generation: per-sample JSONL appended and flushed as each sample finishes,
// resumable after a kill (a torn last line is dropped and redone), sharding, summary at the end.
// The generator is a callback so that the driver is testable without a model (see cmd_eval.cpp
// for the wiring to decode/generate.h and the tokenizer).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/task.h"

namespace dllmq::eval {

struct GenOutput {
  std::string text;  // decoded answer (special tokens dropped); stop strings not yet applied
  int prompt_tokens = 0;
  int gen_tokens = 0;  // generated tokens before EOS
  int nfe = 0;
  int steps = 0;
  double time_s = 0.0;
  size_t kv_bytes = 0;  // peak KV store bytes, everything counted
  size_t kv_bytes_k = 0, kv_bytes_v = 0;
  size_t kv_bytes_fp16 =
      0;  // the same rows at fp16 (effective bits = 16 * kv_bytes / kv_bytes_fp16)
  std::string kv_method;
};
// `prompt` is the task's plain lm-eval context; chat templating is the generator's business.
using GenerateFn = std::function<GenOutput(size_t doc, const std::string& prompt)>;

// The keys of RunOptions::model_facts that cmd_eval fills and merge_runs carries over.
inline constexpr const char* kModelFactKeys[] = {"weight_bytes", "weight_format", "w8a8",
                                                 "proj_weight_bits", "proj_weight_bytes"};

struct RunOptions {
  std::string out_dir;
  size_t limit = 0;  // first `limit` documents only (0 = all), before sharding
  int shard = 0, num_shards = 1;
  bool resume = false;
  nlohmann::json config;  // task/data/generation settings; must match on --resume
  // Facts of the model the run used (weight bytes and format), copied into the summary beside
  // the KV figures; unlike `config`, not compared on --resume.
  nlohmann::json model_facts = nlohmann::json::object();
};

// "i/n" -> (i, n) with 0 <= i < n; throws naming --shard.
std::pair<int, int> parse_shard(const std::string& s);
// samples.jsonl, or samples.<i>-of-<n>.jsonl for shards.
std::string samples_file_name(int shard, int num_shards);

// Runs the remaining samples of this shard; returns the summary (also written as summary.json and
// summary.md in out_dir, over every sample in the file).
nlohmann::json run_eval(const Task& task, const GenerateFn& gen, const RunOptions& opt,
                        const ScoreEnv& env);

// Reads a samples file, dropping a torn final line (and truncating the file to the last complete
// line when `repair`); a corrupt line elsewhere is an error naming file:line.
std::vector<nlohmann::json> read_samples(const std::string& path, bool repair);

// Combines the shard files of one or more run directories into one summary (duplicates by
// task_id are counted once); writes merged samples.jsonl + summary files into `out_dir` if given.
nlohmann::json merge_runs(const std::vector<std::string>& run_dirs, const std::string& out_dir);

}  // namespace dllmq::eval
