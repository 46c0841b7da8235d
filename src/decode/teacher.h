// Teacher forcing for TRACE (METHODS.md §3): the decoder runs exactly as at inference (block
// driver, schedule, cache policy), but every revealed position takes the reference token, and
// masked positions are ranked by the model's probability of the reference token there
// (kReference), by its own max probability (kConfidence), or uniformly at random (kRandom, the
// `random` trajectory control). The result is a feasible reveal trajectory ending in the
// reference answer.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include <string>

namespace dllmq {

enum class TeacherRank { kReference, kConfidence, kRandom };

TeacherRank parse_teacher_rank(const std::string& s);  // throws naming --rank
const char* teacher_rank_name(TeacherRank r);

struct TeacherForcing {
  std::vector<int32_t> target;  // gen_length ids: the answer padded with EOS (or truncated)
  TeacherRank rank = TeacherRank::kReference;
};

struct TeacherPick {
  int32_t token = 0;
  double conf = 0.0;
};

// The pick for one masked position whose raw logits row is `logits`.
TeacherPick teacher_proposal(const float* logits, int vocab, int32_t target, TeacherRank rank,
                             std::mt19937_64& rng);

// Answer ids padded with `eos` to `gen_length` (cut when longer), as LLaDA's SFT data are padded.
std::vector<int32_t> teacher_target(const std::vector<int32_t>& answer, int gen_length,
                                    int32_t eos);

}  // namespace dllmq
