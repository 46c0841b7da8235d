#include "eval/progress.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace dllmq::eval {

Progress::Progress(std::string label, size_t total)
    : label_(std::move(label)),
      total_(total),
      tty_(isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() {
  finish();
}

void Progress::update(size_t done, double accuracy) {
  if (!tty_) return;
  std::lock_guard lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const double el = std::chrono::duration<double>(now - start_).count();
  const double eta = done > 0 ? el / done * (total_ - done) : 0.0;
  constexpr int kWidth = 30;
  const int fill = total_ ? static_cast<int>(kWidth * done / total_) : kWidth;
  std::string bar = std::string(fill, '#') + std::string(kWidth - fill, '.');
  std::string acc = accuracy >= 0 ? fmt::format("  acc {:.3f}", accuracy) : "";
  std::fprintf(stderr, "\r%s [%s] %zu/%zu  %.0fs elapsed  ETA %.0fs%s   ", label_.c_str(),
               bar.c_str(), done, total_, el, eta, acc.c_str());
  std::fflush(stderr);
}

void Progress::finish() {
  if (!tty_ || finished_) return;
  finished_ = true;
  std::fputc('\n', stderr);
}

}  // namespace dllmq::eval
