// Tokenizer behaviour beyond the golden ids: chat templates, UTF-8 repair, model directories,
// threads, and the error messages for bad files.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/regex.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace dllmq {

std::string shared_data_dir();  // test_tokenizer_golden.cpp

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kDir = DLLMQ_TEST_DATA "/tokenizer";
const std::string kSynth = kDir + "/synth_tiny.tokenizer.json";

std::string read_file(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A fresh directory under the system temp dir, removed at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("dllmq_tok_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& content) const {
    std::ofstream(path / name, std::ios::binary) << content;
    return (path / name).string();
  }
};

// Runs `fn`, expecting a dllmq::Error whose message contains every piece of `parts`.
template <typename Fn>
void expect_error(Fn&& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "' in: " << msg;
  }
}

std::string qwen_rank_file() {
  return shared_data_dir() + "/tokenizers/qwen/qwen.tiktoken";
}

// ---- chat templates
// ------------------------------------------------------------------------------

TEST(ChatTemplate, MatchesReferenceStrings) {
  // Reference §1.4 and §2.4 verbatim.
  EXPECT_EQ(render_chat(ChatFormat::kLLaDA, "What is 2+2?"),
            "<|startoftext|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render_chat(ChatFormat::kQwen, "What is 2+2?"),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is "
            "2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplate, Conversations) {
  // Several turns (the server's chat completions), written out from the Jinja templates: LLaDA
  // trims each content and puts the BOS once; Qwen keeps contents as they are and adds its
  // default system turn only when the first message is not a system one.
  const std::vector<ChatMessage> conv = {
      {"user", " Hi "}, {"assistant", "Hello!"}, {"user", "2+2?"}};
  EXPECT_EQ(render_chat(ChatFormat::kLLaDA, conv),
            "<|startoftext|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render_chat(ChatFormat::kQwen, conv),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\n Hi <|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<ChatMessage> sys = {{"system", "Be brief."}, {"user", "Hi"}};
  EXPECT_EQ(render_chat(ChatFormat::kQwen, sys),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(render_chat(ChatFormat::kLLaDA, sys),
            render_chat(ChatFormat::kLLaDA, "Hi", "Be brief."));
}

TEST(ChatTemplate, MatchesJinjaRenderings) {
  // chat_golden.json: the models' Jinja templates rendered with jinja2 as transformers does.
  std::ifstream f(kDir + "/chat_golden.json");
  const json j = json::parse(f);
  ASSERT_GE(j["cases"].size(), 8u);
  for (const auto& c : j["cases"]) {
    const std::string user = c["user"];
    std::optional<std::string> system;
    if (!c["system"].is_null()) system = c["system"].get<std::string>();
    std::optional<std::string_view> sys_view;
    if (system) sys_view = *system;
    EXPECT_EQ(render_chat(ChatFormat::kLLaDA, user, sys_view), c["llada"].get<std::string>())
        << json(user);
    EXPECT_EQ(render_chat(ChatFormat::kQwen, user, sys_view), c["qwen"].get<std::string>())
        << json(user);
  }
}

TEST(ChatTemplate, FormatFromArchAndTokenizer) {
  EXPECT_EQ(chat_format_for(Arch::kLLaDA), ChatFormat::kLLaDA);
  EXPECT_EQ(chat_format_for(Arch::kDream), ChatFormat::kQwen);
  auto synth = load_tokenizer_json(kSynth);
  EXPECT_EQ(chat_format_for(*synth), ChatFormat::kLLaDA);
  auto dream = load_tokenizer_for_model(kDir + "/dream_files");
  ASSERT_TRUE(dream);
  EXPECT_EQ(chat_format_for(*dream), ChatFormat::kQwen);
  auto plain = load_tokenizer_json(kDir + "/digits_invert.tokenizer.json");
  EXPECT_FALSE(chat_format_for(*plain).has_value());
}

TEST(ChatTemplate, EncodesWithSingleBos) {
  auto tok = load_tokenizer_json(kSynth);
  const auto ids = tok->encode(render_chat(ChatFormat::kLLaDA, "Hi"));
  ASSERT_GE(ids.size(), 6u);
  EXPECT_EQ(ids[0], *tok->token_to_id("<|startoftext|>"));
  EXPECT_EQ(ids[1], *tok->token_to_id("<|start_header_id|>"));
  EXPECT_EQ(std::count(ids.begin(), ids.end(), ids[0]), 1);
  EXPECT_EQ(ids[ids.size() - 2], *tok->token_to_id("<|end_header_id|>"));
}

// ---- encode / decode behaviour
// -------------------------------------------------------------------

TEST(Tokenizer, SynthTinyBasics) {
  auto tok = load_tokenizer_json(kSynth);
  EXPECT_EQ(tok->vocab_size(), 512u);
  EXPECT_EQ(tok->token_to_id("<|mdm_mask|>"), 508);
  EXPECT_EQ(tok->id_to_token(511), "<|eot_id|>");
  EXPECT_EQ(tok->id_to_token(220), "Ġ");
  EXPECT_EQ(tok->token_to_id("Ġ"), 220);
  EXPECT_TRUE(tok->is_special(506));
  EXPECT_FALSE(tok->is_special(40));
  EXPECT_FALSE(tok->id_to_token(100000).has_value());
  EXPECT_TRUE(tok->encode("").empty());
  // Specials are atomic, or plain text when not allowed.
  EXPECT_EQ(tok->encode("<|eot_id|>"), std::vector<int32_t>{511});
  const auto plain = tok->encode("<|eot_id|>", /*allow_special=*/false);
  EXPECT_GT(plain.size(), 1u);
  EXPECT_EQ(tok->decode(plain), "<|eot_id|>");
  // Single digits (the synth pattern's \p{N}).
  const auto digits = tok->encode("2024");
  EXPECT_EQ(digits.size(), 4u);
}

TEST(Tokenizer, DecodeSkipsSpecialsAndUnknownIds) {
  auto tok = load_tokenizer_json(kSynth);
  std::vector<int32_t> ids = tok->encode("<|startoftext|>Hello<|eot_id|>");
  EXPECT_EQ(tok->decode(ids), "<|startoftext|>Hello<|eot_id|>");
  EXPECT_EQ(tok->decode(ids, /*skip_special=*/true), "Hello");
  ids.push_back(99999);
  EXPECT_EQ(tok->decode(ids, true), "Hello");
}

TEST(Tokenizer, DecodeOfSplitCharacterIsReplaced) {
  auto tok = load_tokenizer_json(kSynth);
  const auto ids = tok->encode("é");  // two byte-level tokens: 0xC3 0xA9
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(tok->decode(std::span(ids).first(1)), "\xEF\xBF\xBD");
  EXPECT_EQ(tok->decode(std::span(ids).last(1)), "\xEF\xBF\xBD");
  EXPECT_EQ(tok->decode(ids), "é");
  // HF decodes each run between added tokens on its own: the special splits the character.
  const std::vector<int32_t> split{ids[0], 511, ids[1]};
  EXPECT_EQ(tok->decode(split), "\xEF\xBF\xBD<|eot_id|>\xEF\xBF\xBD");
}

TEST(Tokenizer, InvalidUtf8InputIsReplacedFirst) {
  auto tok = load_tokenizer_json(kSynth);
  EXPECT_EQ(tok->encode("a\xff"
                        "b"),
            tok->encode("a\xEF\xBF\xBD"
                        "b"));
  EXPECT_EQ(tok->decode(tok->encode("a\xff"
                                    "b")),
            "a\xEF\xBF\xBD"
            "b");
}

TEST(Tokenizer, ConcurrentEncodeIsConsistent) {
  auto tok = load_tokenizer_json(kDir + "/llama3_style.tokenizer.json");
  const std::string text = read_file(kDir + "/corpus.json");
  const auto want = tok->encode(text);
  std::vector<std::vector<int32_t>> got(4);
  std::vector<std::thread> th;
  for (int i = 0; i < 4; ++i) th.emplace_back([&, i] { got[i] = tok->encode(text); });
  for (auto& t : th) t.join();
  for (auto& g : got) EXPECT_EQ(g, want);
}

TEST(Tokenizer, LongPiecesUseTheHeapPath) {
  // Pieces longer than the linear-scan limit must merge exactly like short ones.
  auto tok = load_tokenizer_json(kSynth);
  const std::string run(300, '=');
  const auto ids = tok->encode(run);
  EXPECT_EQ(tok->decode(ids), run);
  std::string joined;
  for (int i = 0; i < 30; ++i) {
    const auto piece = tok->encode(std::string(10, '='));
    joined += tok->decode(piece);
  }
  EXPECT_EQ(joined, run);
}

TEST(Tokenizer, QwenTiktokenReferenceExamples) {
  if (!fs::exists(qwen_rank_file()))
    GTEST_SKIP() << "Qwen rank file not found at " << qwen_rank_file();
  auto tok = load_tiktoken(qwen_rank_file(), qwen_special_tokens());
  // Reference §2.4 / §6.
  EXPECT_EQ(tok->encode("Hello world"), (std::vector<int32_t>{9707, 1879}));
  EXPECT_EQ(tok->encode(" Hello world"), (std::vector<int32_t>{21927, 1879}));
  EXPECT_EQ(tok->token_to_id("<|mask|>"), 151666);
  EXPECT_EQ(tok->token_to_id("<|im_end|>"), 151645);
  EXPECT_EQ(tok->token_to_id("ĠHello"), 21927);
  EXPECT_EQ(tok->id_to_token(21927), "ĠHello");
  EXPECT_EQ(tok->vocab_size(), 151667u);
  const auto chat = tok->encode(render_chat(ChatFormat::kQwen, "Hi"));
  EXPECT_EQ(chat.front(), 151644);
  EXPECT_EQ(chat.back(), 198);  // "\n" after "assistant"
}

TEST(Tokenizer, ModelDirectories) {
  const std::string models = DLLMQ_SOURCE_DIR "/models/dllmq-synth-tiny";
  if (fs::exists(models + "/tokenizer.json")) {
    auto tok = load_tokenizer_for_model(models);
    ASSERT_TRUE(tok);
    EXPECT_EQ(tok->token_to_id("<|mdm_mask|>"), 508);
  }
  TempDir d;
  EXPECT_EQ(load_tokenizer_for_model(d.path.string()), nullptr);
  const std::string msg = missing_tokenizer_message(d.path.string());
  for (const char* part : {"tokenizer.json", "vocab.json", "merges.txt", "--prompt-ids"})
    EXPECT_NE(msg.find(part), std::string::npos) << msg;
  // tokenizer_config.json tokens missing from tokenizer.json are added (as transformers does).
  fs::copy_file(kSynth, d.path / "tokenizer.json");
  d.write("tokenizer_config.json",
          R"({"added_tokens_decoder": {"512": {"content": "<|extra|>", "special": true}}})");
  auto tok = load_tokenizer_for_model(d.path.string());
  EXPECT_EQ(tok->token_to_id("<|extra|>"), 512);
  EXPECT_EQ(tok->encode("a<|extra|>"), (std::vector<int32_t>{64, 512}));
}

TEST(Utf8, LossyMatchesPythonReplace) {
  // bytes.decode("utf-8", "replace") == Rust from_utf8_lossy: one U+FFFD per maximal invalid
  // subpart.
  const std::string R = "\xEF\xBF\xBD";
  EXPECT_EQ(utf8_lossy("\xe2\x82("), R + "(");
  EXPECT_EQ(utf8_lossy("\xf0\x9f\x98"), R);
  EXPECT_EQ(utf8_lossy("\xed\xa0\x80"), R + R + R);
  EXPECT_EQ(utf8_lossy("\xc0\xaf"), R + R);
  EXPECT_EQ(utf8_lossy("\xf4\x90\x80\x80"), R + R + R + R);
  EXPECT_EQ(utf8_lossy("a\x80\x80"
                       "b"),
            "a" + R + R + "b");
  EXPECT_EQ(utf8_lossy("héllo 😀"), "héllo 😀");
  EXPECT_TRUE(utf8_is_valid("héllo 😀"));
  EXPECT_FALSE(utf8_is_valid("\xc3"));
}

TEST(ByteLevel, Alphabet) {
  EXPECT_EQ(byte_level_encode(" Hello\n"), "ĠHelloĊ");
  EXPECT_EQ(byte_level_decode("ĠHelloĊ"), " Hello\n");
  EXPECT_FALSE(byte_level_decode("a b").has_value());  // plain space is not in the alphabet
  for (int b = 0; b < 256; ++b)
    EXPECT_EQ(char_to_byte(byte_to_char(static_cast<unsigned char>(b))), b);
}

TEST(Regex, WhitespaceMatchesUnicodeWhiteSpace) {
  Regex re(R"(\s+)", "test");
  std::vector<std::pair<size_t, size_t>> m;
  re.find_all(
      "a\xc2\x85"
      "b",
      [&](size_t b, size_t e) { m.emplace_back(b, e); });  // U+0085 NEL
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0], std::make_pair(size_t{1}, size_t{3}));
  EXPECT_EQ(
      translate_pattern(R"([^\s\p{L}])"),
      R"([^\x{09}-\x{0D}\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\p{L}])");
}

// ---- errors
// --------------------------------------------------------------------------------------

TEST(TokenizerErrors, MissingAndMalformedJson) {
  TempDir d;
  expect_error([&] { load_tokenizer_json((d.path / "nope.json").string()); },
               {"nope.json", "cannot open"});
  const std::string full = read_file(kSynth);
  const std::string p = d.write("tokenizer.json", full.substr(0, full.size() / 2));
  expect_error([&] { load_tokenizer_json(p); }, {p, "malformed JSON", "truncated"});
  const std::string q = d.write("arr.json", "[1, 2]");
  expect_error([&] { load_tokenizer_json(q); }, {q, "top level"});
}

json synth_json() {
  return json::parse(read_file(kSynth));
}

TEST(TokenizerErrors, UnsupportedModelTypes) {
  TempDir d;
  for (const char* type : {"Unigram", "WordPiece", "WordLevel"}) {
    json j = synth_json();
    j["model"]["type"] = type;
    const std::string p = d.write(std::string(type) + ".json", j.dump());
    expect_error([&] { load_tokenizer_json(p); },
                 {p, "model.type", std::string("'") + type + "'", "byte-level BPE"});
  }
}

TEST(TokenizerErrors, BadModelFields) {
  TempDir d;
  json j = synth_json();
  j["model"]["merges"][3] = json::array({"a", "NOT_IN_VOCAB"});
  std::string p = d.write("m1.json", j.dump());
  expect_error([&] { load_tokenizer_json(p); },
               {p, "merges[3]", "'NOT_IN_VOCAB' is not in the vocab"});
  j = synth_json();
  j["model"]["merges"][5] = "a b c";
  p = d.write("m2.json", j.dump());
  expect_error([&] { load_tokenizer_json(p); }, {p, "merges[5]", "one space"});
  j = synth_json();
  j["model"]["merges"][0] = 7;
  p = d.write("m3.json", j.dump());
  expect_error([&] { load_tokenizer_json(p); }, {p, "merges[0]"});
  j = synth_json();
  j["model"]["vocab"]["x"] = "seven";
  p = d.write("v.json", j.dump());
  expect_error([&] { load_tokenizer_json(p); }, {p, "vocab entry 'x'"});
  j = synth_json();
  j["model"].erase("merges");
  p = d.write("nm.json", j.dump());
  expect_error([&] { load_tokenizer_json(p); }, {p, "missing \"merges\""});
  j = synth_json();
  j["added_tokens"][1].erase("id");
  p = d.write("a.json", j.dump());
  expect_error([&] { load_tokenizer_json(p); }, {p, "added_tokens[1]", "\"id\""});
}

TEST(TokenizerErrors, UnsupportedPipelineParts) {
  TempDir d;
  json j = synth_json();
  j["normalizer"] = {{"type", "Lowercase"}};
  std::string p = d.write("n.json", j.dump());
  expect_error([&] { load_tokenizer_json(p); }, {p, "normalizer", "'Lowercase'"});
  j = synth_json();
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}};
  p = d.write("pt.json", j.dump());
  expect_error([&] { load_tokenizer_json(p); }, {p, "pre_tokenizer", "'Metaspace'"});
  j = synth_json();
  j["pre_tokenizer"]["pretokenizers"].erase(1);  // drop ByteLevel
  p = d.write("nobl.json", j.dump());
  expect_error([&] { load_tokenizer_json(p); }, {p, "no ByteLevel"});
  j = synth_json();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  p = d.write("re.json", j.dump());
  expect_error([&] { load_tokenizer_json(p); }, {p, "pretokenizers[0]", "cannot compile regex"});
  j = synth_json();
  j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways";
  p = d.write("beh.json", j.dump());
  expect_error([&] { load_tokenizer_json(p); }, {p, "behavior", "'Sideways'"});
  j = synth_json();
  j["decoder"] = {{"type", "Metaspace"}};
  p = d.write("dec.json", j.dump());
  expect_error([&] { load_tokenizer_json(p); }, {p, "decoder", "Metaspace"});
}

TEST(TokenizerErrors, BadRankFile) {
  TempDir d;
  std::string good;
  for (int b = 0; b < 256; ++b) {
    static const char* kB64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    good +=
        std::string{kB64[b >> 2], kB64[(b & 3) << 4], '=', '='} + " " + std::to_string(b) + "\n";
  }
  auto tok = load_tiktoken(d.write("ok.tiktoken", good + "aGk= 256\n"), {});
  EXPECT_EQ(tok->encode("hi"), std::vector<int32_t>{256});
  std::string p = d.write("b64.tiktoken", good + "a*k= 256\n");
  expect_error([&] { load_tiktoken(p, {}); }, {p + ":257", "not valid base64"});
  p = d.write("rank.tiktoken", "QQ== 0\nQg== x1\n");
  expect_error([&] { load_tiktoken(p, {}); }, {p + ":2", "rank field 'x1'"});
  p = d.write("nosp.tiktoken", "QQ==\n");
  expect_error([&] { load_tiktoken(p, {}); }, {p + ":1", "expected 'base64 rank'"});
  p = d.write("dup.tiktoken", "QQ== 0\nQg== 0\n");
  expect_error([&] { load_tiktoken(p, {}); }, {p + ":2", "duplicate rank 0"});
  p = d.write("short.tiktoken", "QQ== 0\n");
  expect_error([&] { load_tiktoken(p, {}); }, {p, "all 256 bytes"});
  p = d.write("empty.tiktoken", "");
  expect_error([&] { load_tiktoken(p, {}); }, {p, "no ranks"});
  AddedToken clash;
  clash.content = "<x>";
  clash.id = 3;
  p = d.write("clash.tiktoken", good);
  expect_error([&] { load_tiktoken(p, {clash}); }, {p, "'<x>'", "collides"});
}

TEST(TokenizerErrors, BadMergesTxt) {
  TempDir d;
  const std::string vocab = d.write("vocab.json", R"({"a": 0, "b": 1, "ab": 2})");
  auto ok = load_vocab_merges(vocab, d.write("merges.txt", "#version: 0.2\na b\n"));
  EXPECT_EQ(ok->encode("ab"), std::vector<int32_t>{2});
  std::string m = d.write("m1.txt", "#version: 0.2\na b\nab\n");
  expect_error([&] { load_vocab_merges(vocab, m); }, {m + ":3", "two tokens"});
  m = d.write("m2.txt", "a c\n");
  expect_error([&] { load_vocab_merges(vocab, m); }, {m + ":1", "'c' is not in the vocab"});
  const std::string bad_vocab = d.write("bad_vocab.json", R"({"a": 0, "b": )");
  expect_error([&] { load_vocab_merges(bad_vocab, m); }, {bad_vocab, "malformed JSON"});
}

}  // namespace
}  // namespace dllmq
