// Unicode normalizers a tokenizer.json may name (utf8proc); others are rejected when loading.
#pragma once

#include <string>
#include <string_view>

namespace dllmq {

enum class Normalizer { kNFC, kNFD, kNFKC, kNFKD };

// Returns nothing useful for invalid UTF-8: callers pass valid text only.
std::string normalize(Normalizer n, std::string_view text);

}  // namespace dllmq
