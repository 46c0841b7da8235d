// `dllmq grid --launcher slurm`: the grid's calibrations and cells as Slurm jobs (one array for
// the calibrations, one array of `dllmq eval --shard i/N --resume` tasks per cell held on the
// calibrations it uses, one merge job writing grid.md/csv/png), `--status`, and the merge step
// (`--collect`). cmd_grid.cpp builds the plan; this file launches and follows it. docs/cluster.md.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "launch/slurm_script.h"

namespace dllmq::cli {

// What a grid has to run, as cmd_grid.cpp resolved it (argv[0] is "dllmq").
struct GridPlan {
  struct Calibration {
    std::string out;  // the artifact (missing: calibrations already made are not listed)
    std::vector<std::string> argv;
  };
  struct Cell {
    std::string task, label, dir;   // dir: the cell's run directory, OUT/<task>/<label>
    std::vector<std::string> argv;  // `dllmq eval ... --out dir --resume`, without --shard
  };
  std::vector<Calibration> calibrations;
  std::vector<Cell> cells;
};

struct LauncherOptions {
  std::string launcher = "local";  // local | slurm
  int shards = 1;                  // eval shards per cell (slurm)
  bool status = false;             // --status: progress of a Slurm run, no submission
  bool collect = false;            // --collect: merge the shards of every cell, then the table
  std::string job_template;        // file replacing launch::default_job_template()
  launch::SbatchOptions sbatch;
};

// The launcher flags of `dllmq grid`.
void add_launcher_options(CLI::App& cmd, LauncherOptions& o);

// Submits what the plan lists and is not finished yet (rerunning is resuming); `cfg` is the
// resolved grid config, saved for the merge job. With dry_run, prints the job scripts instead.
void submit_grid_to_slurm(const GridPlan& plan, const nlohmann::json& cfg, const std::string& out,
                          const LauncherOptions& o, bool dry_run);

// The merge step of one cell: when all `shards` shard runs in `dir` have finished, writes the
// merged summary.json/summary.md there (what a one-process run writes) and returns 0; otherwise
// says which shard is missing on stderr and returns 1.
int collect_cell_shards(const std::string& dir, int shards);

// `dllmq grid --status --out DIR`: per-cell progress and the failed tasks' logs.
void print_grid_status(const std::string& out);

}  // namespace dllmq::cli
