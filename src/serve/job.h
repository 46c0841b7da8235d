// One prompt being decoded for a request: written by the engine's worker that runs it (steps,
// completed blocks, the outcome), read by the HTTP thread that answers the request. Either side
// may cancel it; the decoder then stops at its next step or forward.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <vector>

#include "decode/generate.h"

namespace dllmq::serve {

class Job {
 public:
  using Clock = std::chrono::steady_clock;

  // One denoising step of the generated region (positions relative to the prompt's end).
  struct Step {
    int step = 0, block = 0;
    std::vector<int32_t> canvas;  // generated region, the mask id where still masked
    std::vector<int> revealed;    // positions revealed at this step
  };

  // What the HTTP side has not seen yet.
  struct Progress {
    std::vector<Step> steps;      // new steps (only when steps were asked for)
    std::vector<int32_t> blocks;  // generated ids of the completed prefix blocks (latest)
    bool finished = false;
  };

  // `block`: tokens per streamed block (the block length, or the whole generation for samplers
  // without blocks).
  Job(std::vector<int32_t> prompt, GenerateOptions options, int mask_id, int block,
      bool want_steps);

  const std::vector<int32_t>& prompt() const { return prompt_; }
  const GenerateOptions& options() const { return options_; }

  // --- HTTP side
  // Waits until there is news or `timeout` passed, and takes it.
  Progress wait(std::chrono::milliseconds timeout);
  // Stops decoding at the next step: the client is gone, or (`answered`) the streamed answer is
  // already complete (a stop sequence or EOS in the completed blocks).
  void cancel(bool answered = false);
  bool cancelled() const { return cancel_.load(); }
  bool answered() const { return answered_.load(); }
  // The server's per-request wall-clock limit (--request-timeout): past `t`, the next poll by
  // either side cancels the job, and timed_out() tells its error apart from a cancellation.
  void set_deadline(Clock::time_point t) { deadline_ = t; }
  // Cancels the job if its deadline passed; returns timed_out().
  bool check_deadline();
  bool timed_out() const { return timed_out_.load(); }
  // Polled by the worker at every step (e.g. whether the client's socket closed).
  void set_client_gone(std::function<bool()> f) { client_gone_ = std::move(f); }
  // Valid once finished.
  const GenerateResult& result() const { return result_; }
  std::exception_ptr error() const { return error_; }
  int max_batch() const { return max_batch_; }
  double queue_s() const;  // from submission to the start of decoding
  double run_s() const;    // decoding

  // --- worker side
  void started();
  // The step callback: throws Cancelled when cancelled or the client is gone; records the step.
  void on_step(const StepInfo& s);
  void finish(GenerateResult r, std::exception_ptr error, int max_batch);
  size_t kv_bytes_held() const { return kv_held_.load(); }

 private:
  std::vector<int32_t> prompt_;
  GenerateOptions options_;
  int mask_id_;
  int block_;
  bool want_steps_;
  std::function<bool()> client_gone_;
  std::atomic<bool> cancel_{false};
  std::atomic<bool> answered_{false};
  std::atomic<bool> timed_out_{false};
  Clock::time_point deadline_ = Clock::time_point::max();
  std::atomic<size_t> kv_held_{0};

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Step> steps_;  // not yet taken
  std::vector<int32_t> blocks_;
  bool blocks_new_ = false;
  bool finished_ = false;
  int done_blocks_ = 0;  // worker's count of completed prefix blocks

  GenerateResult result_;
  std::exception_ptr error_;
  int max_batch_ = 0;
  Clock::time_point submitted_ = Clock::now(), started_{}, finished_at_{};
};

}  // namespace dllmq::serve
