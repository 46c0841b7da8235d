// Text side of the CLI: prompt text -> ids (BOS / chat template per model), answer ids -> text.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/model.h"
#include "tokenizer/chat_template.h"

namespace dllmq {
class Tokenizer;
}

namespace dllmq::settings {

class TextCodec {
 public:
  explicit TextCodec(const Model& m) : TextCodec(m.dir(), m.config()) {}
  // From a model directory and its config alone (no weights: the server's request fuzzer).
  TextCodec(std::string model_dir, const ModelConfig& cfg);
  ~TextCodec();

  bool available() const { return tok_ != nullptr; }
  // Throws naming the missing tokenizer file when the model directory has none.
  std::vector<int32_t> prompt_ids(const std::string& text, bool chat,
                                  const std::string& system) const;
  // A conversation in the model's chat template (the server's chat completions).
  std::vector<int32_t> chat_ids(std::span<const ChatMessage> messages) const;
  // Plain text -> ids with no BOS and no template (answers of calibration pairs).
  std::vector<int32_t> text_ids(const std::string& text) const;
  // Generated ids up to the first EOS/EoT, decoded without special tokens ("" without tokenizer).
  std::string answer_text(std::span<const int32_t> gen) const;
  // One printable piece per id for the --show-steps canvas.
  std::string piece(int32_t id) const;
  int eot_id() const { return eot_; }

 private:
  std::string dir_;
  ModelConfig cfg_;
  std::unique_ptr<Tokenizer> tok_;
  int eot_ = -1;
};

}  // namespace dllmq::settings
