#include "tokenizer/utf8.h"

namespace dllmq {

size_t utf8_valid_len(std::string_view s, size_t i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  const unsigned c = p[i];
  if (c < 0x80) return 1;
  auto cont = [&](size_t k) { return i + k < n && (p[i + k] & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (i + 1 >= n) return 0;
    const unsigned c1 = p[i + 1];
    // Second-byte ranges exclude overlongs (E0) and surrogates (ED).
    const bool ok1 = c == 0xE0   ? (c1 >= 0xA0 && c1 <= 0xBF)
                     : c == 0xED ? (c1 >= 0x80 && c1 <= 0x9F)
                                 : (c1 & 0xC0) == 0x80;
    if (!ok1) return 0;
    return cont(2) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (i + 1 >= n) return 0;
    const unsigned c1 = p[i + 1];
    const bool ok1 = c == 0xF0   ? (c1 >= 0x90 && c1 <= 0xBF)
                     : c == 0xF4 ? (c1 >= 0x80 && c1 <= 0x8F)
                                 : (c1 & 0xC0) == 0x80;
    if (!ok1) return 0;
    return cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

bool utf8_is_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    // ASCII fast path: 8 bytes at a time.
    while (i + 8 <= s.size()) {
      uint64_t w;
      __builtin_memcpy(&w, s.data() + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= s.size()) break;
    const size_t l = utf8_valid_len(s, i);
    if (l == 0) return false;
    i += l;
  }
  return true;
}

// Length of the maximal prefix of a valid sequence at s[i] (>= 1): the bytes one U+FFFD replaces.
static size_t invalid_subpart_len(std::string_view s, size_t i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const unsigned c = p[i];
  size_t need = 0;
  unsigned lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF)
    need = 1;
  else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 1;
  }
  size_t k = 1;
  if (i + k < s.size() && p[i + k] >= lo && p[i + k] <= hi) {
    ++k;
    while (k <= need && i + k < s.size() && (p[i + k] & 0xC0) == 0x80) ++k;
  }
  return k;
}

std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t l = utf8_valid_len(s, i);
    if (l) {
      out.append(s.data() + i, l);
      i += l;
    } else {
      out += "\xEF\xBF\xBD";
      i += invalid_subpart_len(s, i);
    }
  }
  return out;
}

char32_t utf8_next(std::string_view s, size_t& i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const unsigned c = p[i];
  if (c < 0x80) return p[i++];
  if (c < 0xE0) {
    char32_t r = ((c & 0x1F) << 6) | (p[i + 1] & 0x3F);
    i += 2;
    return r;
  }
  if (c < 0xF0) {
    char32_t r = ((c & 0x0F) << 12) | ((p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F);
    i += 3;
    return r;
  }
  char32_t r =
      ((c & 0x07) << 18) | ((p[i + 1] & 0x3F) << 12) | ((p[i + 2] & 0x3F) << 6) | (p[i + 3] & 0x3F);
  i += 4;
  return r;
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_unicode_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

}  // namespace dllmq
