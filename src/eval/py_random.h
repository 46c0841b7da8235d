// CPython's random.Random (MT19937, init_by_array seeding) and random.sample, so that lm-eval's
// per-document few-shot draws (Random(1234).sample(train, 5) per test doc, in order) are exact.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace dllmq::eval {

class PyRandom {
 public:
  explicit PyRandom(uint32_t seed);  // random.Random(seed) for 0 <= seed < 2**32
  uint32_t genrand_uint32();
  uint32_t getrandbits(int k);     // 1 <= k <= 32
  uint64_t randbelow(uint64_t n);  // n < 2**32
  // random.sample(range(n), k) (Python 3.11 algorithm): indices into the population.
  std::vector<uint64_t> sample(uint64_t n, int k);

 private:
  static constexpr int kN = 624;
  std::array<uint32_t, kN> mt_{};
  int index_ = kN;
};

}  // namespace dllmq::eval
