// Small helpers shared by the subcommands.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dllmq {
class Model;
}

namespace dllmq::cli {

// What the model's weights cost and how its projections run, beside the KV figures of
// generate/bench/eval --json (eval's summary: the keys of kModelFactKeys, eval/run.h):
// weight_bytes, weight_format, w8a8, proj_weight_bits, proj_weight_bytes.
nlohmann::json model_weight_facts(const Model& m);

// "3,17,250" -> {3, 17, 250}; throws naming `flag` on anything else.
std::vector<int32_t> parse_id_list(const std::string& s, const char* flag);

}  // namespace dllmq::cli
