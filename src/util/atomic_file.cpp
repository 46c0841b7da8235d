#include "util/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "util/error.h"

namespace dllmq {

namespace {

std::string dir_of(const std::string& path) {
  const std::filesystem::path p(path);
  return p.has_parent_path() ? p.parent_path().string() : std::string(".");
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  // A directory (or a name ending in '/') is no file to write: say so before anything is made,
  // rather than after the data, as a failed rename.
  if (path_.empty() || path_.back() == '/' || std::filesystem::is_directory(path_))
    fail("{}: is a directory, not a file name; give the file to write", path_);
  const std::string dir = dir_of(path_);
  // Built by appending: GCC 12 warns (-Wrestrict, a false positive, GCC PR 105651) on
  // `"literal" + std::string&&` once inlined.
  std::string name = ".";
  name += std::filesystem::path(path_).filename().string();
  name += ".tmpXXXXXX";
  tmp_ = (std::filesystem::path(dir) / name).string();
  const int fd = ::mkstemp(tmp_.data());
  if (fd < 0)
    fail("{}: cannot create a temporary file in {}: {}", path_, dir, std::strerror(errno));
  f_ = ::fdopen(fd, "wb");
  if (!f_) {
    const int e = errno;
    ::close(fd);
    ::unlink(tmp_.c_str());
    fail("{}: cannot open a stream: {}", path_, std::strerror(e));
  }
}

AtomicFile::~AtomicFile() {
  if (f_) {
    std::fclose(f_);
    ::unlink(tmp_.c_str());
  }
}

void AtomicFile::abandon(const char* what, int err) {
  if (f_) std::fclose(f_);
  f_ = nullptr;
  ::unlink(tmp_.c_str());
  fail("{}: {} failed: {} (the previous file, if any, is unchanged)", path_, what,
       std::strerror(err));
}

void AtomicFile::write(std::string_view bytes) {
  if (!f_) fail("{}: write after commit", path_);
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f_) != bytes.size())
    abandon("write", errno);
}

void AtomicFile::commit() {
  if (!f_) fail("{}: committed twice", path_);
  if (std::fflush(f_) != 0 || std::ferror(f_)) abandon("write", errno ? errno : EIO);
  const int fd = ::fileno(f_);
  if (::fchmod(fd, 0644) != 0) abandon("chmod", errno);
  if (::fsync(fd) != 0) abandon("fsync", errno);
  const int rc = std::fclose(f_);
  f_ = nullptr;
  if (rc != 0) {
    const int e = errno;
    ::unlink(tmp_.c_str());
    fail("{}: close failed: {} (the previous file, if any, is unchanged)", path_, std::strerror(e));
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp_.c_str());
    fail("{}: rename from {} failed: {}", path_, tmp_, std::strerror(e));
  }
  const int dfd = ::open(dir_of(path_).c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);  // best effort: the rename itself is durable once the directory is
    ::close(dfd);
  }
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  AtomicFile f(path);
  f.write(bytes);
  f.commit();
}

}  // namespace dllmq
