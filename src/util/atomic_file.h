// Crash-safe file replacement: the bytes go to a temporary file beside the target, are fsynced,
// and the temporary is renamed over the target (then the directory is fsynced). A kill or a
// full disk at any point leaves either the old file or the new one, never a torn one.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace dllmq {

// Throws dllmq::Error naming `path` (and the OS error) if any step fails; the temporary is
// removed on failure.
void write_file_atomic(const std::string& path, std::string_view bytes);

// The same for files written bit by bit (state dumps, traces): write through stream(), then
// commit(). Destroyed without commit() (an error, a kill unwinding), the temporary is removed
// and `path` is untouched.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  std::FILE* stream() { return f_; }
  void write(std::string_view bytes);
  // Flushes, fsyncs, renames over the target and fsyncs the directory; throws naming the path
  // (a full disk shows up here at the latest).
  void commit();
  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void abandon(const char* what, int err);
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
};

}  // namespace dllmq
