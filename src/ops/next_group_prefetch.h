// The packed kernels' prefetch of the next panel group's weights into L2, spread over the k steps
// of every row tile of the current group (ops/packed_kernel_impl.h, block_pass).
//
// Why: without it a panel group's first row tile streams the group's weights from memory (a
// decode step's weights do not fit the last-level cache) and its other row tiles read them again
// from L2, fetching nothing: memory waits and FMAs took turns (one thread, 32 rows over bf16
// weights streamed from DRAM: the first tile of a group took 1.5-1.7x the cycles of the others).
// Session 14 spread the lines over the later tiles' k steps; with few rows that left the same
// turns (16 rows are two tiles: the first streamed its group with nothing fetched ahead, then the
// second computed from L2 while the next group came), so since session 26 every tile fetches,
// the first one included, which then finds its weights in L2. The lines are spread evenly: one line
// every step (done in fewer steps than there are), or all of them in half the steps, was slower, as
// the prefetches then hold the line-fill buffers that the tiles' own loads need
// (docs/performance.md). A prefetch is only a hint: no effect on the bits.
//
// Fetch::line(p) issues the prefetch of the line at p. The kernels pass a type of their own
// translation unit, so that each instruction set keeps its own copy of this code; the tests pass
// one that records the lines.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dllmq::kern {

template <class Fetch>
struct NextGroupPrefetch {
  const unsigned char* p = nullptr;     // the next line to fetch
  const unsigned char* end = nullptr;   // the end of the current segment
  const unsigned char* next = nullptr;  // the start of the following segment
  ptrdiff_t seg_bytes = 0, seg_stride = 0;
  int segs_left = 0;  // segments after the current one
  // Spread: each step earns `lines` credits and a line costs `steps` (so `lines` lines take the
  // `steps` steps, evenly, whatever the ratio).
  long lines = 0, steps = 1, credit = 0;
  long left = 0;       // lines still to fetch
  bool armed = false;  // over() was called for this group (whatever it found to fetch)

  // `segs` segments of `seg_bytes` bytes, the first at `first`, each `seg_stride` bytes after the
  // one before (a K block of consecutive panels), to be fetched over `steps` calls of step(); at
  // most `max_bytes` of them, from the first (what L2 has room for beside what it holds).
  static NextGroupPrefetch over(const unsigned char* first, ptrdiff_t seg_stride,
                                ptrdiff_t seg_bytes, int segs, long steps, long max_bytes) {
    NextGroupPrefetch g;
    g.armed = true;
    if (segs <= 0 || seg_bytes <= 0 || steps <= 0 || max_bytes < 64) return g;
    g.seg_bytes = seg_bytes;
    g.seg_stride = seg_stride;
    g.start(first);
    g.next = first + seg_stride;
    g.segs_left = segs - 1;
    // Lines per segment, at most: its bytes may begin inside a line.
    g.lines = long(segs) * ((seg_bytes + 63) / 64 + 1);
    if (g.lines > max_bytes / 64) g.lines = max_bytes / 64;
    g.left = g.lines;
    g.steps = steps;
    return g;
  }

  inline __attribute__((always_inline)) void step() { advance(1); }

  // n steps at once: the lines that n calls of step() would fetch, in the same order.
  inline __attribute__((always_inline)) void advance(long n) {
    for (credit += n * lines; credit >= steps; credit -= steps) {
      if (p >= end || left == 0) {
        if (segs_left == 0 || left == 0) {  // done: idle from now on
          lines = credit = 0;
          return;
        }
        start(next);
        next += seg_stride;
        --segs_left;
      }
      Fetch::line(p);
      p += 64;
      --left;
    }
  }

 private:
  // From the line that holds the segment's first byte.
  inline __attribute__((always_inline)) void start(const unsigned char* s) {
    p = s - (reinterpret_cast<uintptr_t>(s) & 63);
    end = s + seg_bytes;
  }
};

}  // namespace dllmq::kern
