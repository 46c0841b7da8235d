#include "decode/teacher.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace dllmq {

TeacherRank parse_teacher_rank(const std::string& s) {
  if (s == "reference") return TeacherRank::kReference;
  if (s == "confidence") return TeacherRank::kConfidence;
  if (s == "random") return TeacherRank::kRandom;
  fail("--rank: unknown ranking '{}' (expected reference or confidence)", s);
}

const char* teacher_rank_name(TeacherRank r) {
  return r == TeacherRank::kReference    ? "reference"
         : r == TeacherRank::kConfidence ? "confidence"
                                         : "random";
}

TeacherPick teacher_proposal(const float* logits, int vocab, int32_t target, TeacherRank rank,
                             std::mt19937_64& rng) {
  TeacherPick p;
  p.token = target;
  if (rank == TeacherRank::kRandom) {
    p.conf = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    return p;
  }
  double m = logits[0];
  for (int v = 1; v < vocab; ++v) m = std::max(m, double(logits[v]));
  double s = 0.0;
  for (int v = 0; v < vocab; ++v) s += std::exp(double(logits[v]) - m);
  const double pick = rank == TeacherRank::kReference ? double(logits[target]) : m;
  p.conf = std::exp(pick - m) / s;
  return p;
}

std::vector<int32_t> teacher_target(const std::vector<int32_t>& answer, int gen_length,
                                    int32_t eos) {
  std::vector<int32_t> t(answer.begin(),
                         answer.begin() + std::min<size_t>(answer.size(), size_t(gen_length)));
  t.resize(gen_length, eos);
  return t;
}

}  // namespace dllmq
