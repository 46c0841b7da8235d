// The answer's text as a request returns it: decoded up to EOS/EoT, cut before the first stop
// sequence. For streaming it hands out deltas of the completed blocks' text, holding back a tail
// that could still be the start of a stop sequence or is an unfinished UTF-8 character, so the
// concatenated deltas always equal the final text.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "settings/text_codec.h"

namespace dllmq::serve {

class AnswerText {
 public:
  AnswerText(const settings::TextCodec& codec, int eos_id, std::vector<std::string> stop);

  // Text of the generated ids `ids` (a completed prefix, or with `final` the whole generation)
  // that was not handed out yet.
  std::string delta(std::span<const int32_t> ids, bool final);
  // Everything handed out so far.
  const std::string& text() const { return sent_; }
  // The answer is over: a stop sequence or EOS/EoT was reached (finish_reason "stop").
  bool stopped() const { return stopped_; }
  // Answer tokens before EOS/EoT (usage.completion_tokens).
  int answer_tokens(std::span<const int32_t> ids) const;

 private:
  const settings::TextCodec& codec_;
  int eos_;
  std::vector<std::string> stop_;
  std::string sent_;
  bool stopped_ = false;
};

}  // namespace dllmq::serve
