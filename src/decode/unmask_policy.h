// Unmask policy: turns one logits row into a proposed token x0 and a confidence used to rank
// masked positions (LLaDA low_confidence/random, Dream maskgit_plus/topk_margin/entropy),
// with temperature (Gumbel / categorical sampling), top-p/top-k and the EOS/EoT rules.
#pragma once

#include <cstdint>
#include <random>

#include "decode/generate.h"

namespace dllmq {

struct Proposal {
  int32_t token = 0;
  double conf = 0.0;
};

class UnmaskPolicy {
 public:
  UnmaskPolicy(RankAlg alg, const GenerateOptions& opt, int eos_id, int eot_id,
               std::mt19937_64& rng)
      : alg_(alg), opt_(opt), eos_(eos_id), eot_(eot_id), rng_(rng) {}

  // LLaDA / Fast-dLLM rule (generate.py): argmax of Gumbel-perturbed logits, confidence =
  // float64 softmax probability of x0 (or uniform random for `random`).
  Proposal llada(const float* logits, int vocab) const;
  // Dream sample_tokens: temperature, top-p, top-k, then x0 and the confidence of `alg`.
  Proposal dream(const float* logits, int vocab, RankAlg alg) const;

  // Whether proposing a row under `alg` draws from the RNG (sampling, or random ranking). Rows that
  // draw must be proposed one after another in position order (the stream of draws is part of
  // the result); the others depend on their own logits only and may run on any thread.
  bool draws(RankAlg alg) const { return opt_.temperature > 0.0 || alg == RankAlg::kRandom; }

  double uniform() const { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }
  RankAlg alg() const { return alg_; }

 private:
  RankAlg alg_;
  const GenerateOptions& opt_;
  int eos_, eot_;
  std::mt19937_64& rng_;
};

}  // namespace dllmq
