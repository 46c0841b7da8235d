#include "tokenizer/normalizer.h"

#include <cstdlib>

#include <utf8proc.h>

#include "util/error.h"

namespace dllmq {

std::string normalize(Normalizer n, std::string_view text) {
  // ASCII is invariant under all four forms.
  bool ascii = true;
  for (unsigned char c : text)
    if (c >= 0x80) {
      ascii = false;
      break;
    }
  if (ascii) return std::string(text);
  int opts = UTF8PROC_STABLE;
  switch (n) {
    case Normalizer::kNFC:
      opts |= UTF8PROC_COMPOSE;
      break;
    case Normalizer::kNFD:
      opts |= UTF8PROC_DECOMPOSE;
      break;
    case Normalizer::kNFKC:
      opts |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case Normalizer::kNFKD:
      opts |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t r = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                          static_cast<utf8proc_ssize_t>(text.size()), &out,
                                          static_cast<utf8proc_option_t>(opts));
  if (r < 0) fail("unicode normalization failed: {}", utf8proc_errmsg(r));
  std::string s(reinterpret_cast<char*>(out), static_cast<size_t>(r));
  std::free(out);
  return s;
}

}  // namespace dllmq
