// Tokenizers against golden ids from the reference libraries
// (tools/tokenizer_golden/gen_golden.py): `tokenizers` for tokenizer.json / vocab.json+merges.txt,
// `tiktoken` for the Qwen rank file.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace dllmq {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kDir = DLLMQ_TEST_DATA "/tokenizer";

json read_json(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return json::parse(ss.str());
}

std::string hex_decode(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2)
    out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

// Corpus strings as raw bytes (invalid UTF-8 entries come as hex).
const std::vector<std::string>& corpus() {
  static const std::vector<std::string> c = [] {
    std::vector<std::string> v;
    const json j = read_json(kDir + "/corpus.json");
    for (auto& e : j["strings"])
      v.push_back(e.contains("hex") ? hex_decode(e["hex"].get<std::string>())
                                    : e["text"].get<std::string>());
    return v;
  }();
  return c;
}

}  // namespace

// Where ../shared/data is: $DLLMQ_SHARED_DATA, else beside the source tree.
std::string shared_data_dir() {
  if (const char* e = std::getenv("DLLMQ_SHARED_DATA")) return e;
  return DLLMQ_SOURCE_DIR "/../shared/data";
}

namespace {

std::unique_ptr<Tokenizer> load_for(const json& g) {
  const std::string kind = g["kind"], file = g["file"];
  if (kind == "tokenizer_json") return load_tokenizer_json(kDir + "/" + file);
  if (kind == "model_dir") return load_tokenizer_for_model(kDir + "/" + file);
  return load_tiktoken(shared_data_dir() + "/tokenizers/qwen/qwen.tiktoken", qwen_special_tokens());
}

class Golden : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string path = kDir + "/golden_" + GetParam() + ".json";
    g_ = read_json(path);
    if (g_["kind"] == "tiktoken") {
      const std::string rank_file = shared_data_dir() + "/tokenizers/qwen/qwen.tiktoken";
      if (!fs::exists(rank_file))
        GTEST_SKIP() << "Qwen rank file not found at " << rank_file
                     << " (set DLLMQ_SHARED_DATA to the shared/data directory to run this test)";
    }
    tok_ = load_for(g_);
    ASSERT_TRUE(tok_);
  }
  json g_;
  std::unique_ptr<Tokenizer> tok_;
};

TEST_P(Golden, EncodeMatchesReference) {
  const auto& enc = g_["encode"];
  ASSERT_EQ(enc.size(), corpus().size());
  ASSERT_GE(enc.size(), 1000u);
  int bad = 0;
  for (size_t i = 0; i < corpus().size(); ++i) {
    const auto want = enc[i].get<std::vector<int32_t>>();
    const auto got = tok_->encode(corpus()[i]);
    if (got != want && ++bad <= 5)
      ADD_FAILURE() << "string " << i << " "
                    << json(corpus()[i]).dump(-1, ' ', false, json::error_handler_t::replace)
                    << "\n  want " << fmt::format("{}", want) << "\n  got  "
                    << fmt::format("{}", got);
  }
  EXPECT_EQ(bad, 0) << "of " << corpus().size() << " strings";
}

TEST_P(Golden, EncodeWithoutSpecialsMatchesReference) {
  int bad = 0, n = 0;
  for (auto& [k, v] : g_["encode_ordinary"].items()) {
    const size_t i = std::stoul(k);
    const auto want = v.get<std::vector<int32_t>>();
    const auto got = tok_->encode(corpus()[i], /*allow_special=*/false);
    ++n;
    if (got != want && ++bad <= 5)
      ADD_FAILURE() << "string " << i << " "
                    << json(corpus()[i]).dump(-1, ' ', false, json::error_handler_t::replace)
                    << "\n  want " << fmt::format("{}", want) << "\n  got  "
                    << fmt::format("{}", got);
  }
  EXPECT_GT(n, 0);
  EXPECT_EQ(bad, 0) << "of " << n;
}

TEST_P(Golden, DecodeMatchesReference) {
  int bad = 0;
  for (auto& c : g_["decode"]) {
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    const bool skip = c["skip_special"];
    const std::string want = c["text"], got = tok_->decode(ids, skip);
    if (got != want && ++bad <= 5)
      ADD_FAILURE() << "ids " << fmt::format("{}", ids) << " skip_special=" << skip << "\n  want "
                    << json(want) << "\n  got  "
                    << json(got).dump(-1, ' ', false, json::error_handler_t::replace);
  }
  EXPECT_EQ(bad, 0) << "of " << g_["decode"].size();
}

// Pipelines that neither normalize nor drop text (the others are covered by
// DecodeMatchesReference).
class GoldenRoundTrip : public Golden {};

TEST_P(GoldenRoundTrip, DecodeInvertsEncodeOnValidText) {
  ASSERT_TRUE(g_["roundtrip"].get<bool>());
  int bad = 0;
  for (const std::string& s : corpus()) {
    const std::string back = tok_->decode(tok_->encode(s));
    // Only valid UTF-8 must round-trip; invalid bytes come back as U+FFFD (DecodeMatchesReference).
    if (back != s && utf8_is_valid(s) && ++bad <= 5) {
      ADD_FAILURE() << json(s).dump(-1, ' ', false, json::error_handler_t::replace) << " -> "
                    << json(back).dump(-1, ' ', false, json::error_handler_t::replace);
    }
  }
  EXPECT_EQ(bad, 0);
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, Golden,
                         ::testing::Values("synth_tiny", "qwen_split", "llama3_style", "gpt2_style",
                                           "digits_seq", "digits_invert", "dream_files",
                                           "qwen_tiktoken"));
INSTANTIATE_TEST_SUITE_P(Tokenizer, GoldenRoundTrip,
                         ::testing::Values("synth_tiny", "qwen_split", "llama3_style",
                                           "qwen_tiktoken"));

}  // namespace
}  // namespace dllmq
