// CPU time of the OpenMP team, for the per-phase profile of a forward (model/model.cpp): the sum of
// each team thread's own CPU clock. The process clock (CLOCK_PROCESS_CPUTIME_ID) is no substitute
// at the scale of a phase: Linux adds another thread's running time to it only at that thread's
// next tick or context switch (every 4 ms at HZ 250), so a phase of 1-2 ms was charged with the
// worker's time of the phase before it and read 1.3 cores busy where both cores ran the whole
// phase (attention, docs/performance.md). A thread clock read from another thread is brought up
// to date by the kernel (task_sched_runtime), so the sum is current when it is read.
#pragma once

#include <time.h>

namespace dllmq {

// Seconds on clock `id` (clock_gettime); *ok, when given, says whether the clock could be read.
double clock_s(clockid_t id, bool* ok = nullptr);

// CPU seconds used so far by the threads of the OpenMP team of omp_get_max_threads() threads
// started by the calling thread (itself included). The team's threads are found once per calling
// thread with a parallel region, and again when the team size changes or a thread has gone; the
// process clock stands in inside a parallel region or where a thread clock cannot be read.
double team_cpu_s();

}  // namespace dllmq
