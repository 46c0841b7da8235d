// UTF-8 helpers shared by the tokenizer: lossy validation (as Rust's String::from_utf8_lossy and
// Python's errors="replace", which agree: one U+FFFD per maximal invalid subpart) and code point
// access.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dllmq {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if the bytes there are not one.
size_t utf8_valid_len(std::string_view s, size_t i);

// True when s is entirely valid UTF-8.
bool utf8_is_valid(std::string_view s);

// s with every maximal invalid subpart replaced by U+FFFD.
std::string utf8_lossy(std::string_view s);

// Decode the code point starting at s[i] (s must be valid there); advances i.
char32_t utf8_next(std::string_view s, size_t& i);

void utf8_append(std::string& out, char32_t cp);

// Unicode White_Space (Rust's char::is_whitespace).
bool is_unicode_whitespace(char32_t c);

}  // namespace dllmq
