// One-line progress bar with ETA and running accuracy on stderr; silent unless stderr is a TTY.
#pragma once

#include <chrono>
#include <mutex>
#include <string>

namespace dllmq::eval {

class Progress {
 public:
  Progress(std::string label, size_t total);
  ~Progress();
  // `done` items out of total; `accuracy` < 0 hides the accuracy field.
  void update(size_t done, double accuracy = -1.0);
  void finish();

 private:
  std::string label_;
  size_t total_;
  bool tty_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_{};
  std::mutex mu_;
};

}  // namespace dllmq::eval
