// The packed kernels' next-group prefetch (ops/next_group_prefetch.h): over its k steps it must
// touch every line of the next group's segments, nothing outside them, each line once and in
// order, and be done when the steps are. Its effect on the products' bits is nil by construction
// (a prefetch is a hint); the packed GEMM tests check the products themselves.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "ops/next_group_prefetch.h"

namespace {

using dllmq::kern::NextGroupPrefetch;

std::vector<const unsigned char*> g_lines;

struct Record {
  static void line(const unsigned char* p) { g_lines.push_back(p); }
};

struct Case {
  ptrdiff_t offset;     // of the first segment from a 64-byte boundary
  ptrdiff_t seg_bytes;  // kc x bytes per k of a panel
  ptrdiff_t stride;     // panel stride (K x bytes per k)
  int segs;
  long steps;
};

// The 64-byte lines that the segments' bytes lie in, in order.
std::vector<uintptr_t> expected_lines(uintptr_t first, const Case& c) {
  std::vector<uintptr_t> out;
  for (int s = 0; s < c.segs; ++s) {
    const uintptr_t b = first + uintptr_t(s) * uintptr_t(c.stride);
    for (uintptr_t l = b & ~uintptr_t(63); l < b + uintptr_t(c.seg_bytes); l += 64)
      out.push_back(l);
  }
  return out;
}

TEST(NextGroupPrefetch, CoversEveryLineOfTheSegmentsOnceInOrderWithinTheSteps) {
  const Case cases[] = {
      {0, 1024 * 64, 1024 * 64, 4, 3L * 4 * 1024},    // bf16 AVX-512 panels, 32 rows, one K block
      {0, 1024 * 128, 1024 * 128, 4, 3L * 4 * 1024},  // f32: two lines a k
      {0, 1024 * 128, 1024 * 128, 4, 1L * 4 * 1024},  // 16 rows: fewer steps than lines
      {0, 768 * 64, 2048 * 64, 4, 31L * 4 * 768},     // 256 rows, a K block of 768 of 2048
      {0, 200 * 8, 1000 * 8, 3, 5},                   // AVX2 4-bit codes (8 bytes a k), 3 panels
      {32, 100, 300, 2, 1000},                        // begins inside a line, ends in one
      {0, 64, 64, 1, 1},                              // one line, one step
      {16, 4096, 4096, 4, 2},                         // far more lines than steps
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "offset " << c.offset << " bytes " << c.seg_bytes << " stride " << c.stride
                 << " segs " << c.segs << " steps " << c.steps);
    // Addresses only: the walker never reads the bytes.
    std::vector<unsigned char> buf(size_t(c.stride) * size_t(c.segs) + 256);
    const uintptr_t base = (reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~uintptr_t(63);
    const auto* first = reinterpret_cast<const unsigned char*>(base + uintptr_t(c.offset));
    g_lines.clear();
    auto g =
        NextGroupPrefetch<Record>::over(first, c.stride, c.seg_bytes, c.segs, c.steps, 1L << 40);
    EXPECT_TRUE(g.armed);
    for (long i = 0; i < c.steps; ++i) g.step();
    const std::vector<uintptr_t> want = expected_lines(reinterpret_cast<uintptr_t>(first), c);
    ASSERT_EQ(g_lines.size(), want.size()) << "every line once, all within the steps";
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(reinterpret_cast<uintptr_t>(g_lines[i]), want[i]) << "line " << i;
    // More steps fetch nothing more.
    for (int i = 0; i < 100; ++i) g.step();
    EXPECT_EQ(g_lines.size(), want.size());
  }
}

TEST(NextGroupPrefetch, SpreadsTheLinesOverTheSteps) {
  // 4 segments of 16 lines over 640 steps: one line every 9 or 10 steps, not all at the start.
  std::vector<unsigned char> buf(4 * 1024 + 64);
  const auto* first = reinterpret_cast<const unsigned char*>(
      (reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~uintptr_t(63));
  g_lines.clear();
  auto g = NextGroupPrefetch<Record>::over(first, 1024, 1024, 4, 640, 1L << 40);
  for (int i = 0; i < 320; ++i) g.step();
  EXPECT_GE(g_lines.size(), 16u);
  EXPECT_LE(g_lines.size(), 40u);
  for (int i = 0; i < 320; ++i) g.step();
  EXPECT_EQ(g_lines.size(), 64u);
}

TEST(NextGroupPrefetch, AdvancingNStepsFetchesWhatNStepsWould) {
  // The kernels walk once per four k (outer()): after each advance(n) the lines so far must be
  // the ones n calls of step() fetch, in order, across segment ends, the byte cap and the end.
  std::vector<unsigned char> buf(8 * 1024 + 128);
  const auto* first = reinterpret_cast<const unsigned char*>(
      ((reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~uintptr_t(63)) + 16);
  for (const long n : {1L, 3L, 4L, 7L}) {
    for (const long cap : {1L << 40, 37L * 64}) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " cap " << cap);
      auto one = NextGroupPrefetch<Record>::over(first, 2048, 1000, 4, 150, cap);
      auto many = one;
      std::vector<const unsigned char*> by_step, by_advance;
      for (long i = 0; i < 160; i += n) {
        g_lines.clear();
        for (long j = 0; j < n; ++j) one.step();
        by_step.insert(by_step.end(), g_lines.begin(), g_lines.end());
        g_lines.clear();
        many.advance(n);
        by_advance.insert(by_advance.end(), g_lines.begin(), g_lines.end());
        ASSERT_EQ(by_advance, by_step) << "after step " << i + n;
      }
      EXPECT_EQ(by_step.size(),
                size_t(cap < (1L << 40) ? 37 : 4 * 16));  // bytes 16..1015 a segment
    }
  }
}

TEST(NextGroupPrefetch, FetchesNoMoreThanItsByteCapFromTheFirstLine) {
  // 4 segments of 10 lines, 1,024 bytes apart, capped at 25 lines: the first 25 in walk order.
  const Case c{0, 640, 1024, 4, 1000};
  std::vector<unsigned char> buf(4 * 1024 + 64);
  const uintptr_t base = (reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~uintptr_t(63);
  const auto* first = reinterpret_cast<const unsigned char*>(base);
  g_lines.clear();
  auto g = NextGroupPrefetch<Record>::over(first, c.stride, c.seg_bytes, c.segs, c.steps, 25 * 64);
  for (long i = 0; i < c.steps; ++i) g.step();
  const std::vector<uintptr_t> all = expected_lines(base, c);
  ASSERT_EQ(g_lines.size(), 25u);
  for (size_t i = 0; i < 25; ++i) EXPECT_EQ(reinterpret_cast<uintptr_t>(g_lines[i]), all[i]);
}

TEST(NextGroupPrefetch, NothingToFetchIsArmedAndIdle) {
  g_lines.clear();
  const unsigned char b[64] = {};
  for (auto g : {NextGroupPrefetch<Record>::over(b, 64, 64, 0, 100, 1L << 40),
                 NextGroupPrefetch<Record>::over(b, 64, 64, 1, 0, 1L << 40),
                 NextGroupPrefetch<Record>::over(b, 64, 64, 1, 100, 63),
                 NextGroupPrefetch<Record>::over(b, 64, 64, 1, 100, -5)}) {
    EXPECT_TRUE(g.armed);
    for (int i = 0; i < 10; ++i) g.step();
  }
  EXPECT_TRUE(g_lines.empty());
  NextGroupPrefetch<Record> idle;  // a group's first tile: not armed, fetches nothing
  EXPECT_FALSE(idle.armed);
  for (int i = 0; i < 10; ++i) idle.step();
  EXPECT_TRUE(g_lines.empty());
}

}  // namespace
