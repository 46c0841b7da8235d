// Batched decoding: several decoders run at once, one thread each, and their forwards are joined
// into one Model::forward_batch. A decoder's forward waits until every seated decoder has asked
// for one (or left); the batching thread then runs them together and hands each its logits.
// forward_batch is exact per canvas, so every decoder's tokens equal its batch-1 run; each keeps
// its own lengths, block and step state, sampler RNG and KV store (they live in the decoder).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <vector>

#include "decode/generate.h"
#include "model/model.h"

namespace dllmq {

// Thrown inside a decoder that was cancelled (its client went away, or the batcher stopped); it
// unwinds generate() at the decoder's next forward or step.
class Cancelled : public std::runtime_error {
 public:
  Cancelled() : std::runtime_error("decoding cancelled") {}
};

class ForwardBatcher {
 public:
  // Grows the model's shared tables for canvases of up to `max_positions` rows, computes its
  // fingerprint and resolves its batch GEMM mode now: decoders on other threads only read them.
  //
  // A batch starts when every seated decoder has asked for a forward. With `straggler_wait` > 0
  // it starts earlier, once the first request has waited that fraction of the previous batch's
  // time (at least 1 ms): a decoder whose thread is slow to run (a busy machine) then joins the
  // next batch instead of holding up all the others. Results are exact either way.
  ForwardBatcher(Model& m, int max_positions, double straggler_wait = 0.0);
  ForwardBatcher(const ForwardBatcher&) = delete;
  ForwardBatcher& operator=(const ForwardBatcher&) = delete;

  // One decoder's place in the batch: set GenerateOptions::runner to it. It leaves the batch
  // when destroyed, so the others stop waiting for it.
  class Seat final : public ForwardRunner {
   public:
    ~Seat() override;
    // Blocks until the batch holding this forward has run. Throws Cancelled once cancel() was
    // called or the batcher stopped.
    void forward(const ForwardArgs& args, float* logits) override;
    // The decoder stops at its next forward (thread-safe).
    void cancel();
    bool cancelled() const;
    int max_batch() const { return max_batch_; }  // most canvases one of its forwards ran with
    int forwards() const { return forwards_; }

   private:
    friend class ForwardBatcher;
    explicit Seat(ForwardBatcher& b) : b_(b) {}
    ForwardBatcher& b_;
    bool cancelled_ = false;  // guarded by the batcher's mutex
    int max_batch_ = 0, forwards_ = 0;
  };

  // Seats `k` decoders together, so a batch that starts now waits for each of them.
  std::vector<std::unique_ptr<Seat>> seat(int k);

  // Runs batches on the calling thread (whose OpenMP team computes them) until stop().
  void run();
  // Ends run() after the batch in progress; waiting and later forwards throw Cancelled.
  void stop();

  struct Stats {
    int64_t batches = 0;           // forward_batch calls
    int64_t canvases = 0;          // canvas forwards in them
    std::vector<int64_t> by_size;  // by_size[k]: batches of k canvases
    double forward_s = 0.0;        // wall seconds the batching thread spent running forwards
    int seated = 0;                // decoders seated now
  };
  Stats stats() const;

 private:
  struct Pending {
    const ForwardArgs* args;
    float* logits;
    Seat* seat;
    bool taken = false;  // in the batch being computed
    bool done = false;
    std::exception_ptr error;
  };
  void run_batch(std::vector<Pending*>& batch);

  Model& m_;
  double straggler_wait_;
  double last_batch_s_ = 0.0;
  std::chrono::steady_clock::time_point first_pending_;
  mutable std::mutex mu_;
  std::condition_variable batch_cv_;  // wakes the batching thread (a request, a seat left)
  std::condition_variable done_cv_;   // wakes the decoders (their batch ran)
  std::vector<Pending*> pending_;
  int seated_ = 0;
  bool stop_ = false;
  Stats stats_;
};

// Decodes several prompts together (one thread per job, the batches on the calling thread) and
// returns each job's result in order, as generate() would have returned it alone.
struct BatchJob {
  std::span<const int32_t> prompt;
  GenerateOptions options;
  StepCallback on_step;
};
struct BatchOutcome {
  GenerateResult result;
  std::exception_ptr error;  // set when the job failed (its options, its store, ...)
  int max_batch = 0;         // most canvases one of its forwards ran with
};
std::vector<BatchOutcome> generate_batched(Model& m, std::span<const BatchJob> jobs);

}  // namespace dllmq
