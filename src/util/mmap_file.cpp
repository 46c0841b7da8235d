#include "util/mmap_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "util/error.h"

namespace dllmq {

namespace {

// The SIGBUS handler's view of the live mappings: fixed storage, published with atomics, so the
// handler reads it without locks or allocation (async-signal-safe).
struct Region {
  std::atomic<uintptr_t> begin{0}, end{0};
  char path[512];
};
constexpr int kRegions = 256;
Region g_regions[kRegions];
std::mutex g_regions_mu;  // registration only; never taken by the handler
struct sigaction g_previous {};

void put(char*& p, const char* end, const char* s) {
  while (*s && p < end) *p++ = *s++;
}

void on_sigbus(int sig, siginfo_t* info, void* ctx) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(info->si_addr);
  for (const Region& r : g_regions) {
    const uintptr_t b = r.begin.load(std::memory_order_acquire);
    if (b != 0 && a >= b && a < r.end.load(std::memory_order_acquire)) {
      char msg[1024];
      char* p = msg;
      const char* end = msg + sizeof msg - 1;
      put(p, end, "dllmq: error: ");
      put(p, end, r.path);
      put(p, end,
          ": the file was truncated or rewritten while dllmq was reading it (memory-mapped "
          "weights are used in place); rerun once the file is complete\n");
      (void)!::write(2, msg, size_t(p - msg));
      ::_exit(1);
    }
  }
  // Not one of ours: hand it to whoever handled SIGBUS before (or the default action).
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction) return g_previous.sa_sigaction(sig, info, ctx);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    return g_previous.sa_handler(sig);
  }
  ::signal(SIGBUS, SIG_DFL);
  ::raise(SIGBUS);
}

int register_region(const uint8_t* data, size_t size, const std::string& path) {
  static std::once_flag installed;
  std::call_once(installed, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, &g_previous);
  });
  std::lock_guard lock(g_regions_mu);
  for (int i = 0; i < kRegions; ++i) {
    Region& r = g_regions[i];
    if (r.begin.load(std::memory_order_relaxed) != 0) continue;
    std::strncpy(r.path, path.c_str(), sizeof r.path - 1);
    r.path[sizeof r.path - 1] = '\0';
    r.end.store(reinterpret_cast<uintptr_t>(data) + size, std::memory_order_release);
    r.begin.store(reinterpret_cast<uintptr_t>(data), std::memory_order_release);
    return i;
  }
  return -1;  // table full: that mapping just lacks the friendly message
}

void unregister_region(int slot) {
  if (slot < 0) return;
  std::lock_guard lock(g_regions_mu);
  g_regions[slot].begin.store(0, std::memory_order_release);
  g_regions[slot].end.store(0, std::memory_order_release);
}

}  // namespace

MappedFile::MappedFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    int e = errno;
    ::close(fd_);
    fail("{}: cannot stat: {}", path, std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    fail("{}: not a regular file", path);
  }
  size_ = static_cast<size_t>(st.st_size);
  mtime_ = st.st_mtim;
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd_);
      fail("{}: mmap failed: {}", path, std::strerror(e));
    }
    data_ = static_cast<const uint8_t*>(p);
    slot_ = register_region(data_, size_, path_);
  }
}

MappedFile::~MappedFile() {
  unregister_region(slot_);
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
}

void release_mapped_pages(const void* p, size_t n) {
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t b = (uintptr_t(p) + page - 1) / page * page, e = (uintptr_t(p) + n) / page * page;
  if (e > b) ::madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
}

void MappedFile::check_unchanged() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail("{}: cannot stat: {}", path_, std::strerror(errno));
  if (size_t(st.st_size) != size_)
    fail(
        "{}: the file changed size while in use ({} bytes when loaded, {} now); dllmq reads "
        "weights in place from the file, so it cannot go on with it",
        path_, size_, st.st_size);
  if (st.st_mtim.tv_sec != mtime_.tv_sec || st.st_mtim.tv_nsec != mtime_.tv_nsec)
    fail(
        "{}: the file was modified while in use (same size, new modification time); dllmq reads "
        "weights in place from the file, so it cannot go on with it",
        path_);
}

}  // namespace dllmq
