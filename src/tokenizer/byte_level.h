// GPT-2 byte-level alphabet: every byte maps to one printable code point, so byte strings can be
// stored as text in vocab.json / tokenizer.json (e.g. 0x20 ' ' -> U+0120 'Ġ').
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dllmq {

// The code point byte b is written as.
char32_t byte_to_char(unsigned char b);

// Inverse of byte_to_char, or -1 for a code point outside the alphabet.
int char_to_byte(char32_t c);

// "ĠHello" -> " Hello"; nullopt when a character is outside the alphabet (or s is not UTF-8).
std::optional<std::string> byte_level_decode(std::string_view s);

// " Hello" -> "ĠHello".
std::string byte_level_encode(std::string_view bytes);

}  // namespace dllmq
