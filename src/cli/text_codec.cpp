#include "cli/text_codec.h"

#include "util/error.h"

namespace dllmq {
class Tokenizer {};
}  // namespace dllmq

namespace dllmq::cli {

TextCodec::TextCodec(const Model& m) : m_(m) { eot_ = m.config().eot_id; }
TextCodec::~TextCodec() = default;

std::vector<int32_t> TextCodec::prompt_ids(const std::string&, bool, const std::string&) const {
  fail("{}: text prompts need a tokenizer (tokenizer.json); use --prompt-ids", m_.dir());
}

std::string TextCodec::answer_text(std::span<const int32_t>) const { return ""; }
std::string TextCodec::piece(int32_t id) const { return "[" + std::to_string(id) + "]"; }

}  // namespace dllmq::cli
