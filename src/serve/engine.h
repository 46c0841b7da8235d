// The decoding engine behind the server: `parallel` worker threads, each decoding one job at a
// time with a seat in one ForwardBatcher, so the jobs in flight share every forward; a bounded
// queue in front of them. The batches run on the thread that calls run() (the process's main
// thread, whose OpenMP team is pinned); workers only sample.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "decode/batch.h"
#include "serve/job.h"

namespace dllmq::serve {

struct EngineConfig {
  int parallel = 4;              // jobs decoded at once (the largest batch)
  int queue = 64;                // jobs waiting beyond those
  int max_positions = 0;         // prompt + generation of one canvas at most
  double straggler_wait = 0.25;  // see ForwardBatcher: fraction of a batch's time to wait
};

class Engine {
 public:
  Engine(Model& m, EngineConfig cfg);
  ~Engine();

  // Admits all of a request's jobs or none. Returns false when they do not fit now (the caller
  // answers 503 with retry_after_s()); jobs.size() must be at most capacity().
  bool submit(const std::vector<std::shared_ptr<Job>>& jobs);
  int capacity() const { return cfg_.parallel + cfg_.queue; }
  // A guess of when `n` more jobs would fit: recent job time x the queue's depth in waves.
  int retry_after_s(int n) const;

  // Graceful drain (SIGTERM): from now on submit() admits nothing (draining() says why), while
  // the queued and running jobs go on; idle() tells when they are all done.
  void drain();
  bool draining() const;
  bool idle() const;

  // Runs the batches on the calling thread until stop().
  void run();
  // Cancels every queued and running job and ends run().
  void stop();
  // stop(), then waits for the workers (after it, no on_finish call is in progress).
  void join();

  struct Stats {
    int running = 0, queued = 0;
    size_t kv_bytes = 0;  // held by the KV stores of the running jobs
    ForwardBatcher::Stats batches;
  };
  Stats stats() const;
  const EngineConfig& config() const { return cfg_; }
  // How batched forwards multiply the canvases' rows (resolved at start).
  BatchGemm batch_gemm() const { return batch_gemm_; }
  // Called on the worker's thread after each job finished (metrics). Set before submitting.
  void set_on_finish(std::function<void(const Job&)> f) { on_finish_ = std::move(f); }

 private:
  struct Slot {
    std::shared_ptr<Job> job;
    std::unique_ptr<ForwardBatcher::Seat> seat;
  };
  void work(int slot);
  void dispatch_locked();

  Model& m_;
  EngineConfig cfg_;
  ForwardBatcher batcher_;
  BatchGemm batch_gemm_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<Slot> slots_;                    // slots_[i]: the job handed to worker i
  std::vector<std::shared_ptr<Job>> running_;  // running_[i]: the job worker i decodes
  std::vector<bool> busy_;
  bool stopping_ = false;
  bool draining_ = false;
  double mean_job_s_ = 1.0;  // moving average of decode times (Retry-After)
  std::vector<std::thread> workers_;
  std::function<void(const Job&)> on_finish_;
};

}  // namespace dllmq::serve
