// The weight-quantized models a grid compares ("quantize" in GRID.json): each entry writes a
// `dllmq quantize` copy of a model once, before the calibrations, so a config can put the copies
// on its "model" axis beside the originals (configs/weights_synth.json: weights x KV caches).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "wquant/weight_quant.h"

namespace dllmq::cli {

// Keys of a "quantize" entry: {"out": DIR, "model": M, "weights": "int8"|"int4", "group": N,
// "asym": true|false}; "group" and "asym" are optional with `dllmq quantize`'s defaults.
inline const char* const kGridQuantizeKeys[] = {"out", "model", "weights", "group", "asym"};

// The scheme an entry asks for: "group" defaults to -1 (per channel) for int8 and 128 for int4,
// symmetric unless "asym" is true, as `dllmq quantize` does.
WeightQuantScheme grid_quantize_scheme(const nlohmann::json& e);

// Checks one entry's keys and types (grid_config.cpp's validation; in grid_quantize_check.cpp);
// throws naming `at` in `path`.
void check_grid_quantize_entry(const nlohmann::json& e, const std::string& path,
                               const std::string& at);

// Writes every entry's DIR that does not exist yet (into DIR.partial, renamed when whole, so an
// interrupted grid never takes a half-written copy for a finished one). A dry run only lists them.
void run_grid_quantizations(const nlohmann::json& cfg, bool dry_run);

}  // namespace dllmq::cli
