// Pictures are drawn by small matplotlib scripts in tools/plot/ (Debian's python3-matplotlib):
// the command writes a JSON spec beside the PNG, runs the script, and removes the spec.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace dllmq::cli {

// Runs `python tools/plot/<script> SPEC PNG`; throws naming what is missing when it fails.
void draw_with_matplotlib(const std::string& script, const nlohmann::json& spec,
                          const std::string& png, const std::string& python = "/usr/bin/python3");

}  // namespace dllmq::cli
