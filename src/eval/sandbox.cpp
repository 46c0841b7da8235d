#include "eval/sandbox.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "eval/sandbox_runner.h"
#include "util/error.h"
#include "util/json_limits.h"

namespace dllmq::eval {

namespace fs = std::filesystem;

const char* run_status_name(RunStatus s) {
  switch (s) {
    case RunStatus::kPassed:
      return "passed";
    case RunStatus::kFailed:
      return "failed";
    case RunStatus::kTimeout:
      return "timeout";
    case RunStatus::kError:
      return "error";
  }
  return "?";
}

namespace {

constexpr uid_t kSandboxUidBase = 61000;  // unprivileged uids 61000..77383 (root only)
constexpr int kNsFlags = CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID;
constexpr double kOuterGraceS = 2.0;

// Runs `cmd` through the shell and returns its stdout (used once, to ask python for its paths).
std::string capture(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  if (pclose(p) != 0) return {};
  return out;
}

// Forks a child that tries unshare(flags) (and a private mount tree); true if it worked.
bool probe_unshare(int flags) {
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    if (unshare(flags) != 0) _exit(1);
    if ((flags & CLONE_NEWNS) && mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
      _exit(1);
    _exit(0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

bool is_prefix_dir(const std::string& dir, const std::string& path) {
  if (dir == "/") return true;
  return path == dir ||
         (path.size() > dir.size() && path.starts_with(dir) && path[dir.size()] == '/');
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
  if (!f) fail("{}: cannot write sandbox file", p.string());
}

}  // namespace

Sandbox::Sandbox(SandboxOptions opt) : opt_(std::move(opt)) {
  root_ = geteuid() == 0;
  // sys.executable resolves pyenv-style shims to the real interpreter; the prefixes must stay
  // visible.
  const std::string info = capture("'" + opt_.python +
                                   "' -c 'import sys; print(sys.executable); print(sys.prefix); "
                                   "print(sys.base_prefix)' 2>/dev/null");
  std::vector<std::string> lines;
  for (size_t a = 0, b; (b = info.find('\n', a)) != std::string::npos; a = b + 1)
    lines.push_back(info.substr(a, b - a));
  if (lines.size() < 3 || lines[0].empty())
    fail("--python {}: cannot run it (needed to execute code samples)", opt_.python);
  python_exe_ = lines[0];
  if (opt_.tmp_base.empty()) {
    const char* t = std::getenv("TMPDIR");
    opt_.tmp_base = t && *t ? t : "/tmp";
  }
  ns_ = probe_unshare(kNsFlags);
  net_only_ = !ns_ && probe_unshare(CLONE_NEWNET);

  std::vector<std::string> keep = {python_exe_, lines[1], lines[2],
                                   fs::weakly_canonical(python_exe_).string()};
  std::vector<std::string> cand = opt_.hide;
  cand.push_back(fs::current_path().string());
  if (const char* h = std::getenv("HOME"); h && *h) cand.push_back(h);
  static const char* kSystem[] = {"/",     "/usr", "/bin", "/lib", "/lib64", "/etc",
                                  "/proc", "/dev", "/sys", "/tmp", "/var",   "/opt"};
  for (const std::string& c0 : cand) {
    std::error_code ec;
    const std::string c = fs::weakly_canonical(c0, ec).string();
    if (ec || c.empty() || !fs::is_directory(c, ec)) continue;
    bool ok = true;
    for (const char* s : kSystem) ok = ok && c != s;
    for (const std::string& k : keep) ok = ok && !is_prefix_dir(c, k);
    if (ok && std::find(hide_.begin(), hide_.end(), c) == hide_.end()) hide_.push_back(c);
  }
  // Self-check: an interpreter under a private home (pyenv in /root) is not reachable by the
  // sandbox uid; say so now instead of failing every sample.
  const RunResult r = run_one(CodeSample{"x = 1", "assert x == 1", false, ""}, 0);
  if (r.status != RunStatus::kPassed)
    fail("--python {} ({}): a trivial program does not run in the sandbox: {}", opt_.python,
         python_exe_, r.detail);
}

std::string Sandbox::isolation() const {
  std::string s = ns_ ? "netns+mountns+pidns" : net_only_ ? "netns" : "none";
  if (root_) s += "+uid";
  return s;
}

RunResult Sandbox::run_one(const CodeSample& sample, int slot) const {
  const auto t0 = std::chrono::steady_clock::now();
  RunResult res;
  std::string tmpl = (fs::path(opt_.tmp_base) / "dllmq-sbx-XXXXXX").string();
  if (!mkdtemp(tmpl.data()))
    fail("{}: cannot create a sandbox directory: {}", opt_.tmp_base, std::strerror(errno));
  const fs::path dir = tmpl;
  write_file(dir / "runner.py", kSandboxRunnerPy);
  write_file(dir / "payload.json", json_text(nlohmann::json{{"code", sample.code},
                                                            {"test", sample.test},
                                                            {"sanitize", sample.sanitize},
                                                            {"entry_point", sample.entry_point},
                                                            {"timeout", opt_.timeout_s}}));
  // Per process and worker, so concurrent dllmq runs do not share RLIMIT_NPROC accounting.
  const uid_t uid =
      kSandboxUidBase + static_cast<uid_t>(getpid() % 256) * 64 + static_cast<uid_t>(slot % 64);
  if (root_) {
    chmod(dir.c_str(), 0700);
    for (const char* f : {"", "runner.py", "payload.json"})
      if (lchown((dir / f).c_str(), uid, uid) != 0) fail("{}: chown failed", dir.string());
  }

  // Everything the child needs is prepared here: after fork only async-signal-safe calls.
  const std::string dir_s = dir.string();
  std::vector<std::string> env_s = {
      "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir_s,    "TMPDIR=/tmp",      "LANG=C.UTF-8",
      "PYTHONDONTWRITEBYTECODE=1",         "PYTHONHASHSEED=0", "OMP_NUM_THREADS=1"};
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string py = python_exe_, flag = "-I", script = "runner.py";
  char* argv[] = {py.data(), flag.data(), script.data(), nullptr};
  std::vector<const char*> hide;
  for (const auto& h : hide_) hide.push_back(h.c_str());
  const bool ns = ns_, net_only = net_only_, drop = root_;
  const rlim_t cpu = static_cast<rlim_t>(std::ceil(opt_.timeout_s)) + 2;
  const rlim_t as = static_cast<rlim_t>(opt_.mem_mb) << 20,
               fsize = static_cast<rlim_t>(opt_.fsize_mb) << 20;
  const rlim_t nproc = static_cast<rlim_t>(opt_.nproc);

  int res_pipe[2], err_pipe[2];
  if (pipe2(res_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0)
    fail("sandbox: pipe failed");
  const pid_t outer = fork();
  if (outer < 0) fail("sandbox: fork failed: {}", std::strerror(errno));
  if (outer == 0) {
    // Outer child: own process group, namespaces, mounts; then the inner child becomes PID 1 of
    // the new PID namespace so that its death takes every descendant with it.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (dup2(res_pipe[1], 3) < 0 || dup2(err_pipe[1], 2) < 0) _exit(120);
    const int devnull = open("/dev/null", O_RDWR);
    dup2(devnull, 0);
    dup2(devnull, 1);
    if (chdir(dir_s.c_str()) != 0) _exit(121);
    if (ns) {
      if (unshare(kNsFlags) != 0) _exit(122);
      if (mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) _exit(123);
      // The cwd keeps pointing at the sample dir even when /tmp is covered below.
      const unsigned long ro = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
      for (const char* h : hide) mount("tmpfs", h, "tmpfs", ro, "size=4k,mode=755");
      for (const char* t : {"/tmp", "/var/tmp", "/dev/shm"})
        mount("tmpfs", t, "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=1777");
      // Put the sample dir back at its own path (python and programs use absolute paths).
      if (mkdir(dir_s.c_str(), 0700) == 0 &&
          mount(".", dir_s.c_str(), nullptr, MS_BIND, nullptr) == 0 && chdir(dir_s.c_str()) != 0)
        _exit(121);
    } else if (net_only) {
      unshare(CLONE_NEWNET);
    }
    const pid_t inner = fork();
    if (inner < 0) _exit(124);
    if (inner == 0) {
      const rlimit r_cpu{cpu, cpu}, r_as{as, as}, r_fs{fsize, fsize}, r_core{0, 0},
          r_nofile{256, 256};
      setrlimit(RLIMIT_CPU, &r_cpu);
      setrlimit(RLIMIT_AS, &r_as);
      setrlimit(RLIMIT_FSIZE, &r_fs);
      setrlimit(RLIMIT_CORE, &r_core);
      setrlimit(RLIMIT_NOFILE, &r_nofile);
      if (drop) {
        const rlimit r_np{nproc, nproc};
        setrlimit(RLIMIT_NPROC, &r_np);
        if (setgroups(0, nullptr) != 0 || setgid(uid) != 0 || setuid(uid) != 0) _exit(125);
      }
      // After setuid (a credential change clears it): when the outer child is killed on timeout,
      // this PID-namespace init dies too, and the kernel kills everything left inside.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      syscall(SYS_close_range, 4u, ~0u, 0u);
      execve(argv[0], argv, envp.data());
      _exit(126);
    }
    int st = 0;
    while (waitpid(inner, &st, 0) < 0 && errno == EINTR) {
    }
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  }
  setpgid(outer, outer);  // also here, so a kill right after fork finds the group
  close(res_pipe[1]);
  close(err_pipe[1]);

  std::string result_text, err_text;
  bool timed_out = false, reaped = false;
  int st = 0;
  // The program's own clock (HF code_eval's setitimer, in the runner) ends it after timeout_s;
  // this outer limit (code_eval joins for timeout + 1 s; +1 s more for our interpreter start) also
  // catches what a Python signal handler cannot interrupt.
  const auto deadline = t0 + std::chrono::duration<double>(opt_.timeout_s + kOuterGraceS);
  pollfd fds[2] = {{res_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[8192];
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    const int pr = poll(fds, 2, static_cast<int>(std::min<long long>(left.count(), 200)));
    if (pr < 0 && errno != EINTR) break;
    for (int k = 0; k < 2; ++k) {
      if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = read(fds[k].fd, buf, sizeof buf);
      if (n <= 0) {
        fds[k].fd = -1;
        --open_fds;
        continue;
      }
      std::string& dst = k == 0 ? result_text : err_text;
      dst.append(buf, n);
      if (dst.size() > 65536) dst.erase(0, dst.size() - 16384);  // keep the tail only
    }
    // Without a PID namespace a stray grandchild may hold the pipes open: stop once the outer
    // child has exited and kill what is left of its group.
    if (!ns_ && waitpid(outer, &st, WNOHANG) == outer) {
      reaped = true;
      kill(-outer, SIGKILL);
      break;
    }
  }
  if (timed_out) kill(-outer, SIGKILL);
  if (!reaped)
    while (waitpid(outer, &st, 0) < 0 && errno == EINTR) {
    }
  const int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  close(res_pipe[0]);
  close(err_pipe[0]);
  std::error_code ec;
  fs::remove_all(dir, ec);
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  if (timed_out) {
    res.status = RunStatus::kTimeout;
    res.detail =
        fmt::format("timeout after {:.1f} s (process tree killed)", opt_.timeout_s + kOuterGraceS);
    return res;
  }
  // The runner writes exactly one JSON object; anything else means python itself died.
  nlohmann::json j = parse_json_or_discarded(result_text);
  if (!j.is_discarded() && j.is_object() && j.contains("status")) {
    res.status = j["status"] == "passed"    ? RunStatus::kPassed
                 : j["status"] == "timeout" ? RunStatus::kTimeout
                                            : RunStatus::kFailed;
    res.detail = j.contains("detail") && j["detail"].is_string() ? j["detail"].get<std::string>()
                                                                 : std::string();
    if (j.contains("program") && j["program"].is_string()) res.program = j["program"];
    return res;
  }
  res.status = RunStatus::kError;
  const std::string tail =
      err_text.size() > 600 ? err_text.substr(err_text.size() - 600) : err_text;
  if (code > 128)
    res.detail = fmt::format("killed by signal {} ({}){}{}", code - 128, strsignal(code - 128),
                             tail.empty() ? "" : ": ", tail);
  else if (code >= 120 && code <= 126 && tail.empty())
    res.detail = fmt::format("sandbox setup failed (code {}{})", code,
                             code == 126 ? ": python cannot be executed as the sandbox user" : "");
  else
    res.detail = fmt::format("exit code {}{}{}", code, tail.empty() ? "" : ": ", tail);
  return res;
}

std::vector<RunResult> Sandbox::run_all(const std::vector<CodeSample>& samples,
                                        const std::function<void(size_t)>& on_done) const {
  std::vector<RunResult> out(samples.size());
  std::atomic<size_t> next{0};
  std::exception_ptr first_error;
  std::mutex mu;
  auto work = [&](int slot) {
    for (size_t i; (i = next++) < samples.size();) {
      try {
        // "error" means no verdict (python could not start, or died from a signal we did not
        // send, e.g. under memory pressure): retry before reporting it.
        for (int attempt = 0; attempt < 3; ++attempt) {
          out[i] = run_one(samples[i], slot);
          if (out[i].status != RunStatus::kError) break;
          std::this_thread::sleep_for(std::chrono::milliseconds(200 * (attempt + 1)));
        }
      } catch (...) {
        std::lock_guard lock(mu);
        if (!first_error) first_error = std::current_exception();
        return;
      }
      if (on_done) on_done(i);
    }
  };
  const int n = std::max(1, opt_.workers);
  std::vector<std::thread> threads;
  for (int w = 0; w < n; ++w) threads.emplace_back(work, w);
  for (auto& t : threads) t.join();
  if (first_error) std::rethrow_exception(first_error);
  return out;
}

}  // namespace dllmq::eval
