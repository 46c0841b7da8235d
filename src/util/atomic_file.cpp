#include "util/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "util/error.h"

namespace dllmq {

void write_file_atomic(const std::string& path, std::string_view bytes) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmp = (dir / ("." + target.filename().string() + ".tmpXXXXXX")).string();
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0)
    fail("{}: cannot create a temporary file in {}: {}", path, dir.string(), std::strerror(errno));
  auto cleanup_fail = [&](const char* what) {
    const int e = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    fail("{}: {} failed: {}", path, what, std::strerror(e));
  };
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      cleanup_fail("write");
    }
    done += size_t(w);
  }
  if (::fchmod(fd, 0644) != 0) cleanup_fail("chmod");
  if (::fsync(fd) != 0) cleanup_fail("fsync");
  if (::close(fd) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    fail("{}: close failed: {}", path, std::strerror(e));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    fail("{}: rename from {} failed: {}", path, tmp, std::strerror(e));
  }
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);  // best effort: the rename itself is durable once the directory is
    ::close(dfd);
  }
}

}  // namespace dllmq
