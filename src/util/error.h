// Error type for boundary failures (files, flags, formats). Messages name the file/field and
// what was expected; invariants inside the engine use assert instead.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace dllmq {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace dllmq
