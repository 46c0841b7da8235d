// Finding the tokenizer files of a model directory.
#include <filesystem>

#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace dllmq {

namespace fs = std::filesystem;

// load_hf.cpp
std::vector<AddedToken> read_added_tokens_decoder(const std::string& path);
std::unique_ptr<Tokenizer> load_tokenizer_json_extra(const std::string& path,
                                                     const std::vector<AddedToken>& extra);

namespace {

std::optional<fs::path> find_tiktoken(const fs::path& dir) {
  std::error_code ec;
  for (auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".tiktoken") return e.path();
  return std::nullopt;
}

// Adds tokenizer_config.json added tokens the tokenizer does not know yet (transformers does this).
std::vector<AddedToken> config_added(const fs::path& dir) {
  const fs::path cfg = dir / "tokenizer_config.json";
  if (!fs::exists(cfg)) return {};
  return read_added_tokens_decoder(cfg.string());
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer_for_model(const std::string& dir_s) {
  const fs::path dir(dir_s);
  if (fs::exists(dir / "tokenizer.json")) {
    return load_tokenizer_json_extra((dir / "tokenizer.json").string(), config_added(dir));
  }
  if (fs::exists(dir / "vocab.json") && fs::exists(dir / "merges.txt")) {
    std::vector<AddedToken> added = config_added(dir);
    auto tok =
        load_vocab_merges((dir / "vocab.json").string(), (dir / "merges.txt").string(), added);
    if (added.empty() && tok->vocab_size() == 151643)  // a bare Qwen2 vocabulary: Dream's specials
      return load_vocab_merges((dir / "vocab.json").string(), (dir / "merges.txt").string(),
                               qwen_special_tokens());
    return tok;
  }
  if (auto tk = find_tiktoken(dir)) return load_tiktoken(tk->string(), qwen_special_tokens());
  return nullptr;
}

std::string missing_tokenizer_message(const std::string& dir) {
  return fmt::format(
      "{}: no tokenizer files (looked for tokenizer.json, vocab.json + merges.txt, *.tiktoken); "
      "text input needs "
      "one of them, or pass token ids (--ids / --prompt-ids)",
      dir);
}

}  // namespace dllmq
