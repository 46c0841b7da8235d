// What this process may allocate, for size checks made before large allocations: a request that
// cannot fit is refused with the bytes it needs, instead of surfacing as std::bad_alloc.
#pragma once

#include <cstdint>
#include <string>

namespace dllmq {

// Physical memory plus swap, lowered to RLIMIT_AS / RLIMIT_DATA when either is set.
uint64_t usable_memory_bytes();

// Peak resident set size of this process in bytes (from /proc/self/status VmHWM).
size_t peak_rss_bytes();
// Resident set size now (VmRSS) in bytes.
size_t resident_bytes();

// "1.5 GiB", "12.0 MiB", "800 B".
std::string format_bytes(double bytes);

}  // namespace dllmq
