// Short names of the repository's embedded models for -m / --model (and grid configs):
//   synth-llada  models/dllmq-synth-tiny        (LLaDA architecture)
//   synth-dream  models/dllmq-synth-dream-tiny  (Dream architecture)
//   synth-llada-kshot  models/dllmq-synth-kshot  (synth-llada fine-tuned on 400-800-token k-shot
//                      prompts, max_sequence_length 1024: the long-cache regime of issue 30)
// An existing path always wins over a short name, so a directory called synth-llada still works.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace dllmq::cli {

struct ModelName {
  const char* name;  // short name
  const char* dir;   // repository-relative model directory
};

// The short names, in the order the help text lists them.
const std::vector<ModelName>& embedded_models();

// "synth-llada, synth-dream, ...": the short names for help texts.
std::string embedded_model_names();

// `arg` unchanged when it is an existing path or not a short name; else the embedded model's
// directory (found above the binary or in the source tree; fails if that directory is missing).
std::string resolve_model_name(const std::string& arg);

// A CLI11 transform applying resolve_model_name to the option's value.
CLI::Validator model_name_transform();

}  // namespace dllmq::cli
