#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace dllmq {

namespace {

struct Tables {
  std::array<char32_t, 256> to_char{};
  std::array<int, 324> to_byte{};  // all alphabet code points are < 324
  Tables() {
    to_byte.fill(-1);
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      to_char[b] = printable(b) ? char32_t(b) : char32_t(256 + n++);
      to_byte[to_char[b]] = b;
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_to_char(unsigned char b) {
  return tables().to_char[b];
}

int char_to_byte(char32_t c) {
  return c < 324 ? tables().to_byte[c] : -1;
}

std::optional<std::string> byte_level_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (utf8_valid_len(s, i) == 0) return std::nullopt;
    const int b = char_to_byte(utf8_next(s, i));
    if (b < 0) return std::nullopt;
    out += static_cast<char>(b);
  }
  return out;
}

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) utf8_append(out, byte_to_char(b));
  return out;
}

}  // namespace dllmq
