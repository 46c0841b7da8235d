// The threads that serve HTTP connections: cpp-httplib hands every accepted connection to a task
// queue, and a connection holds its thread while it sends its request, waits for its decoding
// and reads its answer. httplib's own ThreadPool has a fixed count, so a handful of slow clients
// (a slowloris trickling its headers, each byte within --io-timeout) could take every thread
// and leave the rest waiting in the queue. This pool starts a thread whenever a connection
// arrives and none is idle, up to `max_threads`, and lets threads idle for a while go.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <httplib.h>

namespace dllmq::serve {

class ConnectionPool : public httplib::TaskQueue {
 public:
  // `keep`: threads kept however idle; `max_threads`: the most at once (then connections wait).
  ConnectionPool(size_t keep, size_t max_threads);
  ~ConnectionPool() override;

  void enqueue(std::function<void()> fn) override;
  // Runs what is queued, then joins every thread.
  void shutdown() override;

  size_t threads() const;

 private:
  void work();
  void reap_locked();  // joins the threads that ended (they leave their id in ended_)

  const size_t keep_, max_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  std::vector<std::thread::id> ended_;
  size_t live_ = 0, idle_ = 0;
  bool shutdown_ = false;
};

}  // namespace dllmq::serve
