// The comparison a grid of KV methods is run for (docs/eval.md, "Frontier and paired
// statistics"): per setting (model x cache mode x task) each method's accuracy-vs-effective-bits
// frontier with bootstrap intervals, accuracy interpolated at matched budgets, McNemar tests
// between methods within 0.25 bits, and the paper's average per method over settings x {4, 2}
// bits with the best quantized method and whether its lead is significant.
//
// Input: OUT/cells.json, one entry per grid cell with its per-problem correctness (written by
// `dllmq grid` from the run directories; `dllmq grid --reduce OUT` recomputes from it alone).
// A cell's method ("family") is its kv bundle name up to '@' ("kivi@g64-2" -> "kivi"), or the
// name without a trailing "-BITS" ("kvquant-trace-2" -> "kvquant-trace"); its nominal bits are
// the bundle's kv-bits, else that trailing number. Cells named without '@' are the method's
// paper setting (the ones the paper-form average uses).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dllmq::cli {

struct FrontierCell {
  std::string model, cache, task, name, family;
  int nominal_bits = 0;    // 0: not known
  bool quantized = false;  // kivi / kvquant / dllm-kvq (else a dense baseline)
  bool paper = false;      // the method's default setting (name without '@')
  double eff_bits = 0, eff_bits_k = 0, eff_bits_v = 0;  // per cached element, all overheads
  std::vector<std::string> ids;
  std::vector<uint8_t> correct;
};

struct FrontierOptions {
  int replicates = 2000;
  uint64_t seed = 0;
  std::vector<double> budgets = {3, 4, 5};
  double mcnemar_within = 0.25;  // bits
};

nlohmann::json cells_to_json(const std::vector<FrontierCell>& cells);
// Checks every field (a hand-edited file is an error naming the cell and key).
std::vector<FrontierCell> cells_from_json(const nlohmann::json& j, const std::string& path);

// Method family and nominal bits of a kv bundle (see above); bits 0 when unknown.
std::string kv_method_family(const std::string& name);
int kv_nominal_bits(const std::string& name, const nlohmann::json& bundle);

struct FrontierReport {
  std::string markdown;  // matched-budget table, McNemar tests, paper-form average
  nlohmann::json json;   // every number of the markdown, and the plot series
};

FrontierReport reduce_frontier(const std::vector<FrontierCell>& cells, const FrontierOptions& o);

// One PNG per setting (tools/plot/frontier.py) into `dir`, named frontier-<setting>.png;
// returns the file names written (a failed drawing is reported on stderr, not fatal).
std::vector<std::string> draw_frontiers(const FrontierReport& r, const std::string& dir);

}  // namespace dllmq::cli
