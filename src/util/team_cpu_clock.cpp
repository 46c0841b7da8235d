#include "util/team_cpu_clock.h"

#include <omp.h>
#include <pthread.h>

#include <vector>

namespace dllmq {

double clock_s(clockid_t id, bool* ok) {
  timespec t{};
  const bool read = clock_gettime(id, &t) == 0;
  if (ok != nullptr) *ok = read;
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

namespace {

// The team's thread clocks, found by running a parallel region of the team's size (libgomp keeps
// its threads between regions, so the same threads run the forward's regions).
std::vector<clockid_t> find_team(int n) {
  std::vector<clockid_t> ids(n, clockid_t(-1));
#pragma omp parallel num_threads(n)
  {
    clockid_t id;
    if (pthread_getcpuclockid(pthread_self(), &id) == 0) ids[omp_get_thread_num()] = id;
  }
  return ids;
}

}  // namespace

double team_cpu_s() {
  // Per calling thread: libgomp gives each thread that starts regions its own team.
  thread_local std::vector<clockid_t> ids;
  if (omp_in_parallel()) return clock_s(CLOCK_PROCESS_CPUTIME_ID);  // the team is busy
  const int n = omp_get_max_threads();
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (int(ids.size()) != n || attempt == 1) ids = find_team(n);
    double sum = 0.0;
    bool all = true;
    for (clockid_t id : ids) {
      bool ok = id != clockid_t(-1);
      if (ok) sum += clock_s(id, &ok);
      all = all && ok;
    }
    if (all) return sum;
  }
  return clock_s(CLOCK_PROCESS_CPUTIME_ID);
}

}  // namespace dllmq
