#include "serve/answer_text.h"

#include <algorithm>

namespace dllmq::serve {

namespace {

// Bytes at the end of `s` that start a UTF-8 character whose continuation bytes are missing.
size_t unfinished_utf8(const std::string& s) {
  for (size_t back = 1; back <= std::min<size_t>(4, s.size()); ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
    return len > back ? back : 0;
  }
  return 0;
}

}  // namespace

AnswerText::AnswerText(const settings::TextCodec& codec, int eos_id, std::vector<std::string> stop)
    : codec_(codec), eos_(eos_id), stop_(std::move(stop)) {}

int AnswerText::answer_tokens(std::span<const int32_t> ids) const {
  int n = 0;
  while (n < int(ids.size()) && ids[n] != eos_ && ids[n] != codec_.eot_id()) ++n;
  return n;
}

std::string AnswerText::delta(std::span<const int32_t> ids, bool final) {
  if (stopped_) return "";
  const bool eos = answer_tokens(ids) < int(ids.size());
  std::string full = codec_.answer_text(ids);
  size_t cut = std::string::npos;
  for (const std::string& s : stop_) cut = std::min(cut, full.find(s));
  size_t end = full.size();
  if (cut != std::string::npos) {
    end = cut;
    stopped_ = true;
  } else if (eos) {
    stopped_ = true;  // nothing after EOS belongs to the answer
  } else if (!final) {
    size_t hold = unfinished_utf8(full);
    for (const std::string& s : stop_)
      for (size_t k = std::min(s.size() - 1, full.size()); k > hold; --k)
        if (full.compare(full.size() - k, k, s, 0, k) == 0) {
          hold = k;
          break;
        }
    end = full.size() - hold;
  }
  if (end <= sent_.size() || full.compare(0, sent_.size(), sent_) != 0) return "";
  std::string d = full.substr(sent_.size(), end - sent_.size());
  sent_ += d;
  return d;
}

}  // namespace dllmq::serve
