// Crash-safe file replacement: the bytes go to a temporary file beside the target, are fsynced,
// and the temporary is renamed over the target (then the directory is fsynced). A kill or a
// full disk at any point leaves either the old file or the new one, never a torn one.
#pragma once

#include <string>
#include <string_view>

namespace dllmq {

// Throws dllmq::Error naming `path` (and the OS error) if any step fails; the temporary is
// removed on failure.
void write_file_atomic(const std::string& path, std::string_view bytes);

}  // namespace dllmq
