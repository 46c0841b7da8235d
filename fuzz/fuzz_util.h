// Shared by the harnesses. The property every harness checks: a parser either accepts its input
// or rejects it with dllmq::Error (the message that names the file and field). Any other
// exception (a JSON type_error, std::out_of_range, std::bad_alloc) escapes the harness and
// terminates it, which libFuzzer reports as a crash, like ASan and UBSan findings.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.h"

namespace fuzz {

// Runs f; dllmq::Error is the accepted way to refuse an input.
template <typename F>
void accept_or_reject(F&& f) {
  try {
    f();
  } catch (const dllmq::Error&) {
  }
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Splits `text` at each occurrence of `sep` (inputs that carry several files or a file and the
// text to encode); always returns `parts` pieces, the missing ones empty.
inline std::vector<std::string> split(std::string_view text, std::string_view sep, size_t parts) {
  std::vector<std::string> out;
  while (out.size() + 1 < parts) {
    const size_t p = text.find(sep);
    if (p == std::string_view::npos) break;
    out.emplace_back(text.substr(0, p));
    text.remove_prefix(p + sep.size());
  }
  out.emplace_back(text);
  out.resize(parts);
  return out;
}

// A private scratch directory for harnesses whose parser takes a path; removed at exit.
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string t = std::string(base && *base ? base : "/tmp") + "/dllmq-fuzz-XXXXXX";
    if (!::mkdtemp(t.data())) std::abort();
    return t;
  }();
  return dir;
}

inline std::string write_scratch(const std::string& name, std::string_view bytes) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
  return path;
}

// A file of the repository (seed data the harness builds fixed objects from).
inline std::string repo_file(const std::string& rel) {
  return std::string(DLLMQ_SOURCE_DIR) + "/" + rel;
}

}  // namespace fuzz
