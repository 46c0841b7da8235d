#include "decode/batch.h"

#include <algorithm>
#include <thread>

#include "ops/gemm.h"
#include "util/error.h"

namespace dllmq {

ForwardBatcher::ForwardBatcher(Model& m, int max_positions, double straggler_wait)
    : m_(m), straggler_wait_(straggler_wait) {
  m_.reserve_positions(max_positions);
  (void)m_.fingerprint();
  (void)m_.batch_gemm();  // the stacking check, before any batch waits for it
}

ForwardBatcher::Seat::~Seat() {
  std::lock_guard<std::mutex> lk(b_.mu_);
  --b_.seated_;
  b_.batch_cv_.notify_one();  // the batch may have been waiting for this decoder only
}

void ForwardBatcher::Seat::cancel() {
  std::lock_guard<std::mutex> lk(b_.mu_);
  cancelled_ = true;
}

bool ForwardBatcher::Seat::cancelled() const {
  std::lock_guard<std::mutex> lk(b_.mu_);
  return cancelled_;
}

void ForwardBatcher::Seat::forward(const ForwardArgs& args, float* logits) {
  Pending p{&args, logits, this, false, false, nullptr};
  std::unique_lock<std::mutex> lk(b_.mu_);
  if (cancelled_ || b_.stop_) throw Cancelled();
  if (b_.pending_.empty()) b_.first_pending_ = std::chrono::steady_clock::now();
  b_.pending_.push_back(&p);
  b_.batch_cv_.notify_one();
  // Once taken into a batch the request must run to the end: the batch writes into `logits`.
  b_.done_cv_.wait(lk, [&] { return p.done || (b_.stop_ && !p.taken); });
  if (!p.done) {  // stopped before a batch took it: take the request back out
    std::erase(b_.pending_, &p);
    throw Cancelled();
  }
  if (p.error) std::rethrow_exception(p.error);
}

std::vector<std::unique_ptr<ForwardBatcher::Seat>> ForwardBatcher::seat(int k) {
  std::vector<std::unique_ptr<Seat>> out;
  std::lock_guard<std::mutex> lk(mu_);
  for (int i = 0; i < k; ++i) out.emplace_back(new Seat(*this));
  seated_ += k;
  return out;
}

void ForwardBatcher::run() {
  std::vector<Pending*> batch;
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    // Every seated decoder is waiting for a forward: nothing more can join this batch.
    auto full = [&] { return stop_ || (seated_ > 0 && int(pending_.size()) >= seated_); };
    if (straggler_wait_ > 0.0) {
      batch_cv_.wait(lk, [&] { return full() || !pending_.empty(); });
      const double wait = std::max(1e-3, straggler_wait_ * last_batch_s_);
      batch_cv_.wait_until(lk,
                           first_pending_ + std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                std::chrono::duration<double>(wait)),
                           full);
    } else {
      batch_cv_.wait(lk, full);
    }
    if (stop_) return;
    batch.swap(pending_);
    for (Pending* p : batch) p->taken = true;
    lk.unlock();
    const auto t0 = std::chrono::steady_clock::now();
    run_batch(batch);
    lk.lock();
    last_batch_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const int k = static_cast<int>(batch.size());
    ++stats_.batches;
    stats_.forward_s += last_batch_s_;
    stats_.canvases += k;
    if (int(stats_.by_size.size()) <= k) stats_.by_size.resize(k + 1, 0);
    ++stats_.by_size[k];
    for (Pending* p : batch) {
      p->seat->max_batch_ = std::max(p->seat->max_batch_, k);
      ++p->seat->forwards_;
      p->done = true;
    }
    batch.clear();
    done_cv_.notify_all();
  }
}

void ForwardBatcher::run_batch(std::vector<Pending*>& batch) {
  std::vector<CanvasForward> cf;
  cf.reserve(batch.size());
  for (Pending* p : batch) cf.push_back({p->args, p->logits});
  try {
    m_.forward_batch(cf);
    return;
  } catch (...) {
    if (batch.size() == 1) {
      batch[0]->error = std::current_exception();
      return;
    }
  }
  // One canvas failed (e.g. a store refused non-finite rows): run each alone so the error goes
  // to its own decoder only. Safe to repeat: a forward's store writes are a function of its
  // canvas, and no forward reads the rows it writes.
  for (Pending* p : batch) {
    try {
      m_.forward(*p->args, p->logits);
    } catch (...) {
      p->error = std::current_exception();
    }
  }
}

void ForwardBatcher::stop() {
  std::lock_guard<std::mutex> lk(mu_);
  stop_ = true;
  batch_cv_.notify_all();
  done_cv_.notify_all();
}

ForwardBatcher::Stats ForwardBatcher::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  Stats s = stats_;
  s.seated = seated_;
  return s;
}

std::vector<BatchOutcome> generate_batched(Model& m, std::span<const BatchJob> jobs) {
  int max_positions = 0;
  for (const BatchJob& j : jobs) {
    if (!j.options.trace_cache.empty() || j.options.probe != nullptr)
      fail("--trace-cache and calibration probes run their own forwards; not in batched decoding");
    max_positions =
        std::max(max_positions, static_cast<int>(j.prompt.size()) + j.options.gen_length);
  }
  std::vector<BatchOutcome> out(jobs.size());
  if (jobs.empty()) return out;
  ForwardBatcher batcher(m, max_positions);
  auto seats = batcher.seat(static_cast<int>(jobs.size()));
  std::mutex mu;
  size_t running = jobs.size();
  std::vector<std::thread> threads;
  for (size_t i = 0; i < jobs.size(); ++i)
    threads.emplace_back([&, i] {
      unpin_this_thread();  // not the batching thread's one CPU: sampling runs beside forwards
      GenerateOptions opt = jobs[i].options;
      opt.runner = seats[i].get();
      try {
        out[i].result = generate(m, jobs[i].prompt, opt, jobs[i].on_step);
      } catch (...) {
        out[i].error = std::current_exception();
      }
      out[i].max_batch = seats[i]->max_batch();
      seats[i].reset();  // leave the batch
      std::lock_guard<std::mutex> lk(mu);
      if (--running == 0) batcher.stop();
    });
  batcher.run();
  for (std::thread& t : threads) t.join();
  return out;
}

}  // namespace dllmq
