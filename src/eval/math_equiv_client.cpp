#include "eval/math_equiv_client.h"
#include "util/json_limits.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

extern char** environ;

namespace dllmq::eval {

namespace fs = std::filesystem;

const char* const kMathEnvHint =
    "install the MATH scoring environment with scripts/setup.sh (or tools/eval/setup_venv.sh "
    "alone: it creates .venv-eval/ from tools/eval/requirements.txt, i.e. sympy, "
    "antlr4-python3-runtime 4.11 and math-verify from PyPI), or point DLLMQ_EVAL_PYTHON / "
    "--eval-python at a Python that has them";

std::string default_math_equiv_helper() {
  if (const char* e = std::getenv("DLLMQ_MATH_EQUIV"); e && *e) return e;
  return fmt::format("{}/tools/eval/math_equiv.py", DLLMQ_SOURCE_DIR);
}

namespace {

using Clock = std::chrono::steady_clock;

bool send_all(int fd, const std::string& s) {
  for (size_t off = 0; off < s.size();) {
    const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// 1: a line (without "\n") in *line; 0: timeout; -1: EOF or error.
int read_line(int fd, std::string& buf, double timeout_s, std::string* line) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    if (const size_t nl = buf.find('\n'); nl != std::string::npos) {
      *line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      return 1;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return 0;
    pollfd pfd{fd, POLLIN, 0};
    const int pr = ::poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (pr < 0 && errno != EINTR) return -1;
    if (pr <= 0) continue;
    char tmp[65536];
    const ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    buf.append(tmp, static_cast<size_t>(n));
  }
}

std::string exit_text(int st) {
  if (WIFSIGNALED(st))
    return fmt::format("killed by signal {} ({})", WTERMSIG(st), strsignal(WTERMSIG(st)));
  if (WIFEXITED(st)) return fmt::format("exit code {}", WEXITSTATUS(st));
  return "ended";
}

}  // namespace

MathHelper::MathHelper(std::string python, std::string script, int workers)
    : python_(std::move(python)), script_(std::move(script)), workers_(std::max(1, workers)) {}

MathHelper::~MathHelper() {
  for (auto& p : procs_) stop(*p);
}

void MathHelper::stop(Proc& p) {
  if (p.fd >= 0) ::close(p.fd);
  p.fd = -1;
  if (p.pid > 0) {
    ::kill(p.pid, SIGKILL);
    int st = 0;
    while (::waitpid(p.pid, &st, 0) < 0 && errno == EINTR) {
    }
  }
  p.pid = -1;
  if (p.err_fd >= 0) ::close(p.err_fd);
  p.err_fd = -1;
  p.buf.clear();
}

std::string MathHelper::err_tail(const Proc& p) const {
  if (p.err_fd < 0) return "";
  const off_t end = ::lseek(p.err_fd, 0, SEEK_END);
  if (end <= 0) return "";
  const off_t from = std::max<off_t>(0, end - 600);
  std::string s(static_cast<size_t>(end - from), '\0');
  const ssize_t n = ::pread(p.err_fd, s.data(), s.size(), from);
  s.resize(n > 0 ? static_cast<size_t>(n) : 0);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (const size_t nl = s.rfind('\n'); nl != std::string::npos) s = s.substr(nl + 1);
  return s;
}

bool MathHelper::start(Proc& p, std::string* why) {
  stop(p);
  if (script_.empty() || !fs::exists(script_)) {
    *why = "helper script not found: " + script_;
    return false;
  }
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    *why = std::string("socketpair: ") + std::strerror(errno);
    return false;
  }
  const char* tmpdir = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/dllmq-math-XXXXXX";
  const int err = ::mkostemp(tmpl.data(), O_CLOEXEC);
  if (err >= 0) ::unlink(tmpl.c_str());
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
  if (err >= 0)
    posix_spawn_file_actions_adddup2(&fa, err, 2);
  else
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  std::string py = python_, iso = "-I", sc = script_;
  char* argv[] = {py.data(), iso.data(), sc.data(), nullptr};
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, py.c_str(), &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(sv[1]);
  if (rc != 0) {
    ::close(sv[0]);
    if (err >= 0) ::close(err);
    *why = fmt::format("cannot start {}: {}", python_, std::strerror(rc));
    return false;
  }
  p.pid = pid;
  p.fd = sv[0];
  p.err_fd = err;
  std::string line;
  const int r = read_line(p.fd, p.buf, start_timeout_s, &line);
  nlohmann::json j = r == 1 ? nlohmann::json::parse(line, nullptr, false) : nlohmann::json();
  if (r == 1 && j.is_object() && j.value("ready", false)) {
    std::lock_guard lock(mu_);
    if (versions_.empty() && j.contains("versions")) versions_ = json_text(j["versions"]);
    if (mismatch_.empty() && j.contains("pin_mismatch") && j["pin_mismatch"].is_array())
      for (const auto& m : j["pin_mismatch"]) mismatch_.push_back(m.get<std::string>());
    return true;
  }
  if (r == 1 && j.is_object() && j.contains("error"))
    *why = fmt::format("{}: {}", python_, j["error"].get<std::string>());
  else if (r == 0)
    *why = fmt::format("{} {}: no answer within {:.0f} s", python_, script_, start_timeout_s);
  else {
    const std::string tail = err_tail(p);
    int st = 0;
    ::kill(p.pid, SIGKILL);
    while (::waitpid(p.pid, &st, 0) < 0 && errno == EINTR) {
    }
    p.pid = -1;
    *why = fmt::format("{} {}: {}{}{}", python_, script_, exit_text(st), tail.empty() ? "" : ": ",
                       tail);
  }
  stop(p);
  return false;
}

bool MathHelper::ready(std::string* why) {
  if (!checked_) {
    checked_ = true;
    if (procs_.empty()) procs_.push_back(std::make_unique<Proc>());
    ok_ = start(*procs_[0], &why_);
  }
  if (!ok_ && why) *why = why_;
  return ok_;
}

MathVerdict MathHelper::run(Proc& p, const MathRequest& r, long long id) {
  static const std::vector<std::string> kPhases = {"equiv", "verify"};
  MathVerdict v;
  size_t next = 0;
  int send_failures = 0;
  auto set = [&](size_t phase, bool value) {
    (kPhases[phase] == "equiv" ? v.exact_match : v.math_verify) = value;
  };
  while (next < kPhases.size()) {
    std::string why;
    if (p.pid < 0 && !start(p, &why)) {
      v.error += (v.error.empty() ? "" : "; ") + ("helper restart failed: " + why);
      return v;  // the remaining phases stay not computed
    }
    nlohmann::json req = {{"id", id}, {"response", r.response}, {"solution", r.solution}};
    req["phases"] = std::vector<std::string>(kPhases.begin() + next, kPhases.end());
    if (!send_all(p.fd, json_text(req) + "\n")) {
      stop(p);
      ++restarts_;
      if (++send_failures >= 2) {
        v.error += (v.error.empty() ? "" : "; ") + std::string("helper does not take requests");
        return v;
      }
      continue;
    }
    while (next < kPhases.size()) {
      std::string line;
      const int rc = read_line(p.fd, p.buf, phase_timeout_s, &line);
      nlohmann::json j = rc == 1 ? nlohmann::json::parse(line, nullptr, false) : nlohmann::json();
      if (rc == 1 && j.is_object() && j.value("phase", "") == kPhases[next] &&
          j.value("id", -1LL) == id) {
        set(next, j.value("value", 0) != 0);
        if (kPhases[next] == "equiv") {
          v.pred = j.value("pred", "");
          v.gold = j.value("gold", "");
          v.normalized = true;
        }
        if (j.contains("error") && j["error"].is_string())
          v.error +=
              (v.error.empty() ? "" : "; ") + kPhases[next] + ": " + j["error"].get<std::string>();
        ++next;
        continue;
      }
      // No answer in time, the helper died, or it wrote something else: this phase scores 0
      // (lm-eval's alarm would have ended it), the helper is replaced.
      std::string what;
      if (rc == 0) {
        what = fmt::format("{}: no answer within {:.0f} s, helper killed", kPhases[next],
                           phase_timeout_s);
      } else {
        const std::string tail = err_tail(p);
        int st = 0;
        bool ended = false;
        // EOF: the helper is exiting; give it a moment to become reapable.
        for (int t = 0; rc < 0 && p.pid > 0 && t < 100 && !ended; ++t) {
          ended = ::waitpid(p.pid, &st, WNOHANG) == p.pid;
          if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        if (ended) {
          p.pid = -1;
          what = fmt::format("{}: helper {}", kPhases[next], exit_text(st));
        } else {
          what = fmt::format("{}: helper protocol error", kPhases[next]);
        }
        if (!tail.empty()) what += ": " + tail;
      }
      v.error += (v.error.empty() ? "" : "; ") + what;
      set(next, false);
      ++next;
      stop(p);
      ++restarts_;
      break;
    }
  }
  return v;
}

std::vector<MathVerdict> MathHelper::judge(const std::vector<MathRequest>& reqs,
                                           const std::function<void(size_t)>& on_done) {
  std::vector<MathVerdict> out(reqs.size());
  if (reqs.empty()) return out;
  const int n = std::max(1, std::min<int>(workers_, static_cast<int>(reqs.size())));
  while (static_cast<int>(procs_.size()) < n) procs_.push_back(std::make_unique<Proc>());
  std::atomic<size_t> next{0}, done{0};
  auto work = [&](int w) {
    for (size_t i; (i = next++) < reqs.size();) {
      out[i] = run(*procs_[w], reqs[i], static_cast<long long>(i));
      const size_t d = ++done;
      if (on_done) on_done(d);
    }
  };
  if (n == 1) {
    work(0);
  } else {
    std::vector<std::thread> threads;
    for (int w = 0; w < n; ++w) threads.emplace_back(work, w);
    for (auto& t : threads) t.join();
  }
  return out;
}

}  // namespace dllmq::eval
