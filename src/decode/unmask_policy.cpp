#include "decode/unmask_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "ops/exp_sum.h"

namespace dllmq {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// The largest of l[0, n) (-inf when empty), over 8 interleaved maxima: one running maximum is a
// chain of compare latencies, 4 cycles a value, which at a 32,000 vocabulary cost more than the
// exponentials. The maximum of a set does not depend on the order it is taken in.
double max_of(const double* l, int n) {
  double m[8] = {kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf};
  int v = 0;
  for (; v + 8 <= n; v += 8)
    for (int j = 0; j < 8; ++j) m[j] = std::max(m[j], l[v + j]);
  for (; v < n; ++v) m[0] = std::max(m[0], l[v]);
  for (int j = 1; j < 8; ++j) m[0] = std::max(m[0], m[j]);
  return m[0];
}

// The first index holding the largest value, as std::max_element (logits hold no NaN).
int argmax_of(const double* l, int n) {
  const double m = max_of(l, n);
  int v = 0;
  while (v < n - 1 && !(l[v] == m)) ++v;
  return v;
}

// softmax(l)[i] in double without materialising the distribution (the exponentials on the
// vector units: ops/exp_sum.h, within an ulp of std::exp, the same bits on every CPU); m is
// max_of(l, vocab), which the caller may know already.
double prob_of(const double* l, int vocab, int i, double m) {
  if (l[i] == kNegInf) return 0.0;
  return exp_shifted(l[i] - m) / exp_shifted_sum(l, vocab, m, nullptr);
}

}  // namespace

Proposal UnmaskPolicy::llada(const float* logits, int vocab) const {
  thread_local std::vector<double> l;
  l.assign(logits, logits + vocab);
  if (opt_.logits_eos_inf && eos_ >= 0 && eos_ < vocab) l[eos_] = kNegInf;
  Proposal p;
  if (opt_.temperature <= 0.0) {
    p.token = argmax_of(l.data(), vocab);
  } else {
    // exp(l) / (-log u)^T  ==  argmax of l - T * log(-log u): a sample of softmax(l / T).
    double best = kNegInf;
    for (int v = 0; v < vocab; ++v) {
      double u = uniform();
      while (u <= 0.0) u = uniform();
      const double g = l[v] - opt_.temperature * std::log(-std::log(u));
      if (g > best) {
        best = g;
        p.token = v;
      }
    }
  }
  if (alg_ == RankAlg::kRandom) {
    p.conf = uniform();
    return p;
  }
  if (opt_.confidence_eos_eot_inf) {
    // Upstream chained assignment: EoT always leaves the softmax; at T = 0 EOS does too.
    if (eot_ >= 0 && eot_ < vocab) l[eot_] = kNegInf;
    if (opt_.temperature <= 0.0 && eos_ >= 0 && eos_ < vocab) l[eos_] = kNegInf;
  }
  // Greedy: x0 holds the maximum, and the rules above only set entries to -inf (x0 itself among
  // them gives probability 0 whatever the maximum).
  const double m = opt_.temperature <= 0.0 ? l[p.token] : max_of(l.data(), vocab);
  p.conf = prob_of(l.data(), vocab, p.token, m);
  return p;
}

Proposal UnmaskPolicy::dream(const float* logits, int vocab, RankAlg alg) const {
  thread_local std::vector<double> l, prob;
  thread_local std::vector<int> order;
  l.assign(logits, logits + vocab);
  const double T = opt_.temperature;
  if (T > 0.0)
    for (auto& x : l) x /= T;
  constexpr double kLowest = std::numeric_limits<double>::lowest();
  if (opt_.top_p > 0.0 && opt_.top_p < 1.0) {
    order.resize(vocab);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
    double m = l[order[0]], s = 0.0;
    for (int v = 0; v < vocab; ++v) s += std::exp(l[v] - m);
    // Remove a token when the cumulative probability before it already exceeds top_p.
    double cum = 0.0;
    std::vector<int> drop;
    for (int r = 0; r < vocab; ++r) {
      const int v = order[r];
      if (r > 0 && cum > opt_.top_p) drop.push_back(v);
      cum += std::exp(l[v] - m) / s;
    }
    for (int v : drop) l[v] = kLowest;
  }
  if (opt_.top_k > 0 && opt_.top_k < vocab) {
    std::vector<double> tmp(l);
    std::nth_element(tmp.begin(), tmp.begin() + (vocab - opt_.top_k), tmp.end());
    const double kth = tmp[vocab - opt_.top_k];
    for (auto& x : l)
      if (x < kth) x = kLowest;
  }
  const double m = max_of(l.data(), vocab);
  prob.resize(vocab);
  const double s = exp_shifted_sum(l.data(), vocab, m, prob.data());
  for (auto& x : prob) x /= s;
  Proposal p;
  if (T > 0.0) {
    double u = uniform() * 1.0, cum = 0.0;
    p.token = vocab - 1;
    for (int v = 0; v < vocab; ++v) {
      cum += prob[v];
      if (cum > u) {
        p.token = v;
        break;
      }
    }
  } else {
    p.token = argmax_of(prob.data(), vocab);
  }
  p.conf = prob[p.token];
  if (alg == RankAlg::kTopkMargin) {
    double a = 0.0, b = 0.0;
    for (double x : prob) {
      if (x > a) {
        b = a;
        a = x;
      } else if (x > b) {
        b = x;
      }
    }
    p.conf = a - b;
  } else if (alg == RankAlg::kEntropy) {
    double h = 0.0;
    for (double x : prob) h += x * std::log(x + 1e-10);
    p.conf = h;  // negative entropy: higher = more certain
  }
  return p;
}

}  // namespace dllmq
