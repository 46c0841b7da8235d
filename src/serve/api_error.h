// Errors the HTTP API answers with, in OpenAI's shape:
//   {"error": {"message": ..., "type": "invalid_request_error", "param": "max_tokens", "code":
//   null}}
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace dllmq::serve {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string param, const std::string& message,
           std::string type = "invalid_request_error")
      : std::runtime_error(message),
        status_(status),
        param_(std::move(param)),
        type_(std::move(type)) {}
  int status() const { return status_; }
  const std::string& param() const { return param_; }  // "" when no single field is at fault
  const std::string& type() const { return type_; }
  nlohmann::json body() const { return error_body(what(), type_, param_); }

  static nlohmann::json error_body(const std::string& message, const std::string& type,
                                   const std::string& param) {
    return {{"error",
             {{"message", message},
              {"type", type},
              {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)},
              {"code", nullptr}}}};
  }

 private:
  int status_;
  std::string param_, type_;
};

// A 400 naming the request field at fault.
template <typename... Args>
[[noreturn]] void bad_field(const std::string& field, fmt::format_string<Args...> f,
                            Args&&... args) {
  throw ApiError(400, field, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace dllmq::serve
