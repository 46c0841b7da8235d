#include "eval/py_random.h"

#include <cmath>
#include <numeric>
#include <unordered_set>

namespace dllmq::eval {

PyRandom::PyRandom(uint32_t seed) {
  // init_genrand(19650218) then init_by_array({seed}), as CPython's random_seed for small ints.
  mt_[0] = 19650218u;
  for (int i = 1; i < kN; ++i)
    mt_[i] = 1812433253u * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + static_cast<uint32_t>(i);
  const uint32_t key[1] = {seed};
  const int key_length = 1;
  int i = 1, j = 0;
  for (int k = kN; k; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525u)) + key[j] +
             static_cast<uint32_t>(j);
    ++i;
    ++j;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
    if (j >= key_length) j = 0;
  }
  for (int k = kN - 1; k; --k) {
    mt_[i] =
        (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941u)) - static_cast<uint32_t>(i);
    ++i;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
  }
  mt_[0] = 0x80000000u;
  index_ = kN;
}

uint32_t PyRandom::genrand_uint32() {
  constexpr uint32_t kUpper = 0x80000000u, kLower = 0x7fffffffu, kMatrix = 0x9908b0dfu;
  if (index_ >= kN) {
    for (int k = 0; k < kN; ++k) {
      const uint32_t y = (mt_[k] & kUpper) | (mt_[(k + 1) % kN] & kLower);
      mt_[k] = mt_[(k + 397) % kN] ^ (y >> 1) ^ ((y & 1u) ? kMatrix : 0u);
    }
    index_ = 0;
  }
  uint32_t y = mt_[index_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

uint32_t PyRandom::getrandbits(int k) {
  return genrand_uint32() >> (32 - k);
}

uint64_t PyRandom::randbelow(uint64_t n) {
  int k = 0;
  while ((n >> k) != 0) ++k;  // n.bit_length()
  uint64_t r = getrandbits(k);
  while (r >= n) r = getrandbits(k);
  return r;
}

std::vector<uint64_t> PyRandom::sample(uint64_t n, int k) {
  std::vector<uint64_t> out;
  uint64_t setsize = 21;
  if (k > 5)
    setsize += static_cast<uint64_t>(std::pow(4.0, std::ceil(std::log(k * 3.0) / std::log(4.0))));
  if (n <= setsize) {
    std::vector<uint64_t> pool(n);
    std::iota(pool.begin(), pool.end(), 0);
    for (int i = 0; i < k; ++i) {
      const uint64_t j = randbelow(n - i);
      out.push_back(pool[j]);
      pool[j] = pool[n - i - 1];
    }
  } else {
    std::unordered_set<uint64_t> selected;
    for (int i = 0; i < k; ++i) {
      uint64_t j = randbelow(n);
      while (selected.count(j)) j = randbelow(n);
      selected.insert(j);
      out.push_back(j);
    }
  }
  return out;
}

}  // namespace dllmq::eval
