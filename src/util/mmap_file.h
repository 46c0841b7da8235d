// Read-only memory map of a whole file. Weights are used in place from the mapping, so a
// checkpoint costs page cache, not a private copy.
//
// A mapped file that is truncated or rewritten in place while in use (cp over a checkpoint, a
// download restarting) would otherwise surface as SIGBUS or as silently different weights. Two
// guards: check_unchanged() compares the file's size and modification time with those at
// mapping time (Model::forward calls it before each forward), and a SIGBUS inside any mapping
// ends the process with an error naming the file (status 1) instead of a crash, for a
// truncation that races with the check.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <string>

namespace dllmq {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Throws dllmq::Error naming the file when it no longer has the size and modification time
  // it had when mapped.
  void check_unchanged() const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;  // kept open: fstat sees the mapped inode even after a rename over the path
  timespec mtime_{};
  int slot_ = -1;  // entry in the SIGBUS handler's table of mappings
};

// Drops the resident pages wholly inside [p, p + n) of a read-only private file mapping (a
// MappedFile's): they leave the process's resident set, and a later read pages them in again
// from the file (same bytes). For weights that were copied elsewhere (packed at load). Pages
// shared with bytes outside the range are kept.
void release_mapped_pages(const void* p, size_t n);

}  // namespace dllmq
