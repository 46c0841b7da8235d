#include "serve/job.h"

#include <algorithm>

#include "decode/batch.h"

namespace dllmq::serve {

namespace {
double seconds(Job::Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}
}  // namespace

Job::Job(std::vector<int32_t> prompt, GenerateOptions options, int mask_id, int block,
         bool want_steps)
    : prompt_(std::move(prompt)),
      options_(std::move(options)),
      mask_id_(mask_id),
      block_(std::max(block, 1)),
      want_steps_(want_steps) {}

Job::Progress Job::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait_for(lk, timeout, [&] { return finished_ || blocks_new_ || !steps_.empty(); });
  Progress p;
  p.steps.swap(steps_);
  if (blocks_new_) p.blocks = blocks_;
  blocks_new_ = false;
  p.finished = finished_;
  return p;
}

void Job::cancel(bool answered) {
  if (answered) answered_ = true;
  cancel_ = true;
}

bool Job::check_deadline() {
  if (!timed_out_ && !cancel_ && Clock::now() >= deadline_) {
    timed_out_ = true;
    cancel_ = true;
  }
  return timed_out_;
}

double Job::queue_s() const {
  std::lock_guard<std::mutex> lk(mu_);
  return started_ == Clock::time_point{} ? seconds(Clock::now() - submitted_)
                                         : seconds(started_ - submitted_);
}

double Job::run_s() const {
  std::lock_guard<std::mutex> lk(mu_);
  if (started_ == Clock::time_point{}) return 0.0;
  return seconds((finished_ ? finished_at_ : Clock::now()) - started_);
}

void Job::started() {
  std::lock_guard<std::mutex> lk(mu_);
  started_ = Clock::now();
}

void Job::on_step(const StepInfo& s) {
  if (cancel_ || check_deadline() || (client_gone_ && client_gone_())) {
    cancel_ = true;
    throw Cancelled();
  }
  if (s.store != nullptr) kv_held_ = s.store->held().total();
  const auto gen = s.canvas.subspan(s.prompt_length);
  // Completed prefix blocks: revealed tokens never change, so their text is final.
  int done = done_blocks_;
  const int n = static_cast<int>(gen.size());
  while (done * block_ < n) {
    const int e = std::min(n, (done + 1) * block_);
    if (std::find(gen.begin() + done * block_, gen.begin() + e, mask_id_) != gen.begin() + e) break;
    ++done;
  }
  if (done == done_blocks_ && !want_steps_) return;  // nothing the HTTP side waits for
  std::lock_guard<std::mutex> lk(mu_);
  if (done > done_blocks_) {
    done_blocks_ = done;
    blocks_.assign(gen.begin(), gen.begin() + std::min(n, done * block_));
    blocks_new_ = true;
  }
  if (want_steps_) {
    Step st{s.step, s.block, std::vector<int32_t>(gen.begin(), gen.end()), {}};
    for (int p : s.revealed) st.revealed.push_back(p - s.prompt_length);
    steps_.push_back(std::move(st));
  }
  cv_.notify_all();
}

void Job::finish(GenerateResult r, std::exception_ptr error, int max_batch) {
  kv_held_ = 0;
  std::lock_guard<std::mutex> lk(mu_);
  result_ = std::move(r);
  error_ = error;
  max_batch_ = max_batch;
  finished_ = true;
  finished_at_ = Clock::now();
  if (started_ == Clock::time_point{}) started_ = finished_at_;
  cv_.notify_all();
}

}  // namespace dllmq::serve
