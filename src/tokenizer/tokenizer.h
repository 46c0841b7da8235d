// Text <-> token ids for LLaDA (HF tokenizer.json, byte-level BPE) and Dream (Qwen2: tiktoken rank
// file or vocab.json + merges.txt). Encoding matches `tokenizers` encode(add_special_tokens=False)
// and tiktoken encode(allowed_special="all"); decoding matches their decode().
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dllmq {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special =
      true;  // skipped by decode(skip_special=true); not matched when allow_special=false
  bool lstrip = false;       // the match swallows whitespace on its left
  bool rstrip = false;       // ... and on its right
  bool normalized = false;   // matched after normalization instead of on the raw text
  bool single_word = false;  // only matched when not inside a word
};

// Token ids index dense tables (id -> bytes, id -> added token), so a file's ids are bounded
// where they are read: an id of 2^31 - 1 in a 100-byte file would otherwise allocate tens of GB.
// Real vocabularies have ids below 2^18; 2^24 leaves room. Model (BPE) ids must moreover be
// dense, below the number of entries + kTokenIdSlack, so the id -> bytes table stays
// proportional to the file (fuzz_vocab_merges: one id of 9.6M in a 12 KB file took seconds).
constexpr int64_t kMaxTokenId = (int64_t(1) << 24) - 1;
constexpr int64_t kTokenIdSlack = 1 << 16;

struct TokenizerSpec;  // internal: built by the loaders (tokenizer/tokenizer_spec.h)

class Tokenizer {
 public:
  explicit Tokenizer(std::unique_ptr<TokenizerSpec> spec);
  ~Tokenizer();

  // Invalid UTF-8 in `text` is first replaced by U+FFFD (one per maximal invalid subpart).
  // allow_special=false treats special added tokens as plain text (HF split_special_tokens,
  // tiktoken encode_ordinary). No BOS/EOS is added.
  std::vector<int32_t> encode(std::string_view text, bool allow_special = true) const;
  // Unknown ids are skipped (as HF does); invalid UTF-8 becomes U+FFFD like the reference decoders.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // Token strings use the byte-level alphabet (" Hello" is "ĠHello"); added tokens are their
  // content.
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(int32_t id) const;
  // Raw bytes one id decodes to (added tokens: their UTF-8 content).
  std::optional<std::string> token_bytes(int32_t id) const;
  bool is_special(int32_t id) const;
  const std::vector<AddedToken>& added_tokens() const;
  // One past the largest id (model or added).
  size_t vocab_size() const;
  // Turns the per-word cache off (benchmarking raw BPE speed); not thread-safe against encode().
  void set_cache_enabled(bool on);
  // The file(s) it was loaded from, for messages.
  const std::string& source() const;

 private:
  std::unique_ptr<TokenizerSpec> s_;
};

// HF tokenizer.json (model type BPE with a ByteLevel pre-tokenizer).
std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& path);
// tiktoken rank file (`base64(bytes) rank` per line), Qwen2 pattern, plus `specials`.
std::unique_ptr<Tokenizer> load_tiktoken(const std::string& path,
                                         const std::vector<AddedToken>& specials);
// GPT-2-style vocab.json + merges.txt, with the Qwen2 pipeline (NFC, Qwen2 pattern, byte-level).
std::unique_ptr<Tokenizer> load_vocab_merges(const std::string& vocab_path,
                                             const std::string& merges_path,
                                             const std::vector<AddedToken>& added = {});

// The same loaders on file contents already in memory (fuzzing, tests); the path arguments only
// name the inputs in errors.
std::unique_ptr<Tokenizer> load_tokenizer_json_text(const std::string& text,
                                                    const std::string& path,
                                                    const std::vector<AddedToken>& extra = {});
std::unique_ptr<Tokenizer> load_tiktoken_text(const std::string& text, const std::string& path,
                                              const std::vector<AddedToken>& specials);
std::unique_ptr<Tokenizer> load_vocab_merges_text(const std::string& vocab_text,
                                                  const std::string& merges_text,
                                                  const std::string& vocab_path,
                                                  const std::string& merges_path,
                                                  const std::vector<AddedToken>& added = {});

// Dream / Qwen2.5 specials 151643..151666 (<|endoftext|> ... <|mask|>).
std::vector<AddedToken> qwen_special_tokens();

// Tokenizer of a model directory: tokenizer.json, else vocab.json + merges.txt, else *.tiktoken
// (with the Qwen specials); added tokens in tokenizer_config.json are merged in. nullptr if none.
std::unique_ptr<Tokenizer> load_tokenizer_for_model(const std::string& dir);
// Error text for text input to a model without tokenizer files (names the files looked for).
std::string missing_tokenizer_message(const std::string& dir);

}  // namespace dllmq
