// Crash-safe writes (util/atomic_file.h) and mapped files that change under the mapping
// (util/mmap_file.h), issue 16. The full-disk case mounts a small tmpfs, which needs root (CI
// and the developer machines run as root); elsewhere it is skipped with the reason.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "test_util.h"
#include "util/atomic_file.h"
#include "util/mmap_file.h"

namespace dllmq {
namespace {

namespace fs = std::filesystem;
using test_util::expect_error;
using test_util::read_bytes;
using test_util::TempDir;
using test_util::write_bytes;

size_t entries(const fs::path& dir) {
  return size_t(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

TEST(AtomicFile, ReplacesWholeAndLeavesNoTemporary) {
  TempDir d;
  write_bytes(d.file("r.json"), "old");
  write_file_atomic(d.file("r.json"), "new contents");
  EXPECT_EQ(read_bytes(d.file("r.json")), "new contents");
  EXPECT_EQ(entries(d.path()), 1u);
  EXPECT_EQ(fs::status(d.file("r.json")).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                fs::perms::others_read);
}

TEST(AtomicFile, AbandonedWriteKeepsOldFile) {
  TempDir d;
  write_bytes(d.file("r.json"), "old");
  {
    AtomicFile f(d.file("r.json"));
    f.write("half of the new");
  }  // destroyed without commit, as when an error unwinds
  EXPECT_EQ(read_bytes(d.file("r.json")), "old");
  EXPECT_EQ(entries(d.path()), 1u);
}

TEST(AtomicFile, MissingDirectoryNamesPath) {
  TempDir d;
  expect_error([&] { write_file_atomic(d.file("no/such/r.json"), "x"); },
               {"no/such/r.json", "cannot create a temporary file"});
}

// A tmpfs of 64 KiB: a 1 MiB write fails with ENOSPC (at write, flush or fsync), the error
// names the file, the previous version is intact and no temporary is left behind.
TEST(AtomicFile, FullDiskKeepsOldFile) {
  TempDir d;
  const std::string mnt = d.file("small");
  fs::create_directories(mnt);
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=64k") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root): " << std::strerror(errno);
  const std::string target = mnt + "/summary.json";
  write_bytes(target, "previous summary");
  const std::string big(1 << 20, 'x');
  expect_error([&] { write_file_atomic(target, big); },
               {target, "No space left on device", "previous file, if any, is unchanged"});
  EXPECT_EQ(read_bytes(target), "previous summary");
  EXPECT_EQ(entries(mnt), 1u);
  write_file_atomic(target, "fits");  // space is back once the temporary is gone
  EXPECT_EQ(read_bytes(target), "fits");
  ::umount(mnt.c_str());
}

TEST(MappedFile, DetectsTruncationAndRewrite) {
  TempDir d;
  const std::string p = d.file("w.bin");
  write_bytes(p, std::string(8192, 'a'));
  {
    MappedFile m(p);
    m.check_unchanged();
    fs::resize_file(p, 4096);  // truncated in place, as `cp` over it starts with
    expect_error([&] { m.check_unchanged(); },
                 {p, "changed size while in use (8192 bytes when loaded, 4096 now)"});
  }
  write_bytes(p, std::string(8192, 'a'));
  {
    MappedFile m(p);
    ::usleep(20000);                         // a distinct modification time even on coarse clocks
    write_bytes(p, std::string(8192, 'b'));  // same size, new contents
    expect_error([&] { m.check_unchanged(); }, {p, "modified while in use"});
  }
  {
    // Replaced by rename: the mapping keeps the old inode, whose contents stay valid.
    MappedFile m(p);
    write_bytes(d.file("new.bin"), std::string(100, 'c'));
    fs::rename(d.file("new.bin"), p);
    m.check_unchanged();
    EXPECT_EQ(m.data()[8191], 'b');
  }
}

// A read past the new end of a truncated mapping raises SIGBUS; the handler turns it into an
// error naming the file and exit status 1 (a death test runs it in a child process).
TEST(MappedFileDeathTest, SigbusNamesTheFile) {
  TempDir d;
  const std::string p = d.file("shard.safetensors");
  write_bytes(p, std::string(1 << 16, 'a'));
  EXPECT_EXIT(
      {
        MappedFile m(p);
        fs::resize_file(p, 0);
        volatile uint8_t x = m.data()[1 << 15];
        (void)x;
      },
      ::testing::ExitedWithCode(1), "shard.safetensors: the file was truncated or rewritten");
}

}  // namespace
}  // namespace dllmq
