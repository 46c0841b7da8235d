#include "serve/connection_pool.h"

#include <chrono>

namespace dllmq::serve {

namespace {
// A thread above `keep` that found no connection for this long ends.
constexpr auto kIdleExit = std::chrono::seconds(30);
}  // namespace

ConnectionPool::ConnectionPool(size_t keep, size_t max_threads)
    : keep_(keep), max_(std::max(keep, max_threads)) {}

ConnectionPool::~ConnectionPool() {
  shutdown();
}

void ConnectionPool::reap_locked() {
  for (const std::thread::id id : ended_)
    for (size_t i = 0; i < threads_.size(); ++i)
      if (threads_[i].get_id() == id) {
        threads_[i].join();  // it has returned from work(): immediate
        threads_.erase(threads_.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
  ended_.clear();
}

void ConnectionPool::enqueue(std::function<void()> fn) {
  std::lock_guard<std::mutex> lk(mu_);
  reap_locked();
  tasks_.push_back(std::move(fn));
  if (idle_ < tasks_.size() && live_ < max_) {
    ++live_;
    threads_.emplace_back([this] { work(); });
  }
  cv_.notify_one();
}

void ConnectionPool::work() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    ++idle_;
    const bool woke = cv_.wait_for(lk, kIdleExit, [&] { return shutdown_ || !tasks_.empty(); });
    --idle_;
    if (tasks_.empty()) {
      if (shutdown_ || (!woke && live_ > keep_)) break;
      continue;
    }
    auto fn = std::move(tasks_.front());
    tasks_.pop_front();
    lk.unlock();
    fn();
    lk.lock();
  }
  --live_;
  ended_.push_back(std::this_thread::get_id());  // joined by the next enqueue() or shutdown()
}

void ConnectionPool::shutdown() {
  std::vector<std::thread> ts;
  {
    std::lock_guard<std::mutex> lk(mu_);
    shutdown_ = true;
    ts.swap(threads_);
  }
  cv_.notify_all();
  for (auto& t : ts)
    if (t.joinable()) t.join();
}

size_t ConnectionPool::threads() const {
  std::lock_guard<std::mutex> lk(mu_);
  return live_;
}

}  // namespace dllmq::serve
