#include "serve/engine.h"

#include <algorithm>
#include <cmath>

#include "ops/gemm.h"

namespace dllmq::serve {

Engine::Engine(Model& m, EngineConfig cfg)
    : m_(m),
      cfg_(cfg),
      batcher_(m, cfg.max_positions, cfg.straggler_wait),
      batch_gemm_(m.batch_gemm()),
      slots_(cfg.parallel),
      running_(cfg.parallel),
      busy_(cfg.parallel, false) {
  for (int i = 0; i < cfg_.parallel; ++i) workers_.emplace_back([this, i] { work(i); });
}

Engine::~Engine() {
  join();
}

void Engine::join() {
  stop();
  for (std::thread& t : workers_)
    if (t.joinable()) t.join();
}

bool Engine::submit(const std::vector<std::shared_ptr<Job>>& jobs) {
  std::lock_guard<std::mutex> lk(mu_);
  if (stopping_ || draining_) return false;
  const int idle = static_cast<int>(std::count(busy_.begin(), busy_.end(), false));
  const int waiting = static_cast<int>(queue_.size() + jobs.size()) - idle;
  if (waiting > cfg_.queue) return false;
  for (const auto& j : jobs) queue_.push_back(j);
  dispatch_locked();
  return true;
}

int Engine::retry_after_s(int n) const {
  std::lock_guard<std::mutex> lk(mu_);
  const double waves = std::ceil(double(queue_.size() + n) / cfg_.parallel);
  return static_cast<int>(std::clamp(std::ceil(mean_job_s_ * waves), 1.0, 300.0));
}

// Hands queued jobs to idle workers, seating all of them in the batch at once: jobs that arrive
// together (a request's prompts) then share their first forward.
void Engine::dispatch_locked() {
  while (!queue_.empty() && queue_.front()->cancelled()) {  // the client left while it waited
    queue_.front()->finish({}, std::make_exception_ptr(Cancelled()), 0);
    if (on_finish_) on_finish_(*queue_.front());
    queue_.pop_front();
  }
  std::vector<int> idle;
  for (int i = 0; i < cfg_.parallel; ++i)
    if (!busy_[i]) idle.push_back(i);
  const int k = std::min<int>(idle.size(), queue_.size());
  if (k == 0) return;
  auto seats = batcher_.seat(k);
  for (int i = 0; i < k; ++i) {
    slots_[idle[i]] = {queue_.front(), std::move(seats[i])};
    busy_[idle[i]] = true;
    queue_.pop_front();
  }
  cv_.notify_all();
}

void Engine::work(int i) {
  unpin_this_thread();  // sampling runs beside the batching thread, on any CPU
  for (;;) {
    Slot slot;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stopping_ || slots_[i].job != nullptr; });
      if (slots_[i].job == nullptr) return;  // stopping, nothing handed over
      slot = std::move(slots_[i]);
      running_[i] = slot.job;
    }
    Job& job = *slot.job;
    job.started();
    GenerateOptions opt = job.options();
    opt.runner = slot.seat.get();
    GenerateResult r;
    std::exception_ptr err;
    try {
      r = generate(m_, job.prompt(), opt, [&job](const StepInfo& s) { job.on_step(s); });
    } catch (...) {
      err = std::current_exception();
    }
    const int max_batch = slot.seat->max_batch();
    slot.seat.reset();  // leave the batch before the next one is formed without this job
    job.finish(std::move(r), err, max_batch);
    if (on_finish_) on_finish_(job);
    std::lock_guard<std::mutex> lk(mu_);
    if (!err) mean_job_s_ = 0.8 * mean_job_s_ + 0.2 * job.run_s();
    busy_[i] = false;
    running_[i].reset();
    if (!stopping_) dispatch_locked();
  }
}

void Engine::drain() {
  std::lock_guard<std::mutex> lk(mu_);
  draining_ = true;
}

bool Engine::draining() const {
  std::lock_guard<std::mutex> lk(mu_);
  return draining_;
}

bool Engine::idle() const {
  std::lock_guard<std::mutex> lk(mu_);
  return queue_.empty() && std::none_of(busy_.begin(), busy_.end(), [](bool b) { return b; });
}

void Engine::run() {
  batcher_.run();
}

void Engine::stop() {
  std::lock_guard<std::mutex> lk(mu_);
  if (stopping_) return;
  stopping_ = true;
  for (auto& j : queue_) {
    j->finish({}, std::make_exception_ptr(Cancelled()), 0);
    if (on_finish_) on_finish_(*j);
  }
  queue_.clear();
  for (Slot& s : slots_)
    if (s.job) s.job->cancel();
  for (auto& j : running_)
    if (j) j->cancel();
  batcher_.stop();
  cv_.notify_all();
}

Engine::Stats Engine::stats() const {
  Stats s;
  s.batches = batcher_.stats();
  std::lock_guard<std::mutex> lk(mu_);
  s.queued = static_cast<int>(queue_.size());
  for (int i = 0; i < cfg_.parallel; ++i) {
    s.running += busy_[i];
    if (running_[i]) s.kv_bytes += running_[i]->kv_bytes_held();
  }
  return s;
}

}  // namespace dllmq::serve
