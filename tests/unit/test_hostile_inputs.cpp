// Hostile inputs, second round (issue 28), the library-level checks; the end-to-end ones are in
// tests/python/test_hostile_inputs.py. Each test is written from a defect class's description.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include "calib/pairs.h"
#include "decode/generate.h"
#include "eval/gsm8k_answer.h"
#include "eval/math_answer.h"
#include "eval/regex.h"
#include "io/generation_config.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "util/error.h"
#include "util/json_limits.h"

namespace dllmq {
namespace {

std::string nested(size_t depth, const std::string& inner = "1") {
  return std::string(depth, '[') + inner + std::string(depth, ']');
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// ---- class 1: nesting ----------------------------------------------------------------------

TEST(JsonLimits, DepthFoundWithoutRecursion) {
  const std::string deep = "{\"a\": " + nested(100000) + "}";
  EXPECT_EQ(json_depth_exceeded_at(deep, kMaxRequestJsonDepth), 6u + kMaxRequestJsonDepth - 1);
  EXPECT_EQ(json_depth_exceeded_at(nested(32), 32), std::string_view::npos);
  EXPECT_EQ(json_depth_exceeded_at(nested(33), 32), 32u);
  // Brackets inside strings, escaped quotes and escaped backslashes are text.
  EXPECT_EQ(json_depth_exceeded_at(R"(["[[[[", "\"[[[[", "\\", "x"])", 1), std::string_view::npos);
  EXPECT_EQ(json_depth_exceeded_at(R"(["\\"[[])", 2), 6u);  // the string ended at \\"
}

TEST(JsonLimits, DeepFilesAreErrorsNamingTheFile) {
  const std::string deep = nested(100000);
  EXPECT_NE(error_of([&] {
              (void)parse_json_bounded(deep, "x.json");
            }).find("x.json: JSON nested deeper"),
            std::string::npos);
  EXPECT_TRUE(parse_json_or_discarded(deep).is_discarded());
  // Every file parser that reads JSON refuses it with its own file named, not by crashing.
  const std::string field = "{\"d_model\": " + deep + "}";
  EXPECT_NE(
      error_of([&] { (void)parse_model_config(field, "m/config.json"); }).find("m/config.json"),
      std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)parse_generation_defaults(field, "m/generation_config.json");
            }).find("m/generation_config.json"),
            std::string::npos);
  EXPECT_NE(
      error_of([&] { (void)parse_safetensors_index(field, "m/index.json"); }).find("m/index.json"),
      std::string::npos);
}

TEST(JsonLimits, BriefValuesInMessages) {
  const nlohmann::json big = std::string(1 << 20, 'x');
  const std::string b = json_brief(big, 100);
  EXPECT_LT(b.size(), 140u);
  EXPECT_NE(b.find("bytes)"), std::string::npos);
  // A cut never splits a UTF-8 character.
  const nlohmann::json utf = std::string(300, 'a') + "\xc3\xa9\xc3\xa9\xc3\xa9";
  for (size_t n = 300; n < 310; ++n) {
    const std::string s = json_brief(utf, n);
    EXPECT_NO_THROW((void)nlohmann::json(s).dump()) << n;
  }
}

// ---- class 4: ranges that hold in the arithmetic ---------------------------------------------

TEST(NumericRanges, EndsAcceptedOutsideRefused) {
  ModelConfig cfg;
  cfg.arch = Arch::kLLaDA;
  cfg.vocab_size = 512;
  cfg.mask_id = 508;
  cfg.eos_id = 507;
  const std::vector<int32_t> prompt = {1, 2};
  auto opts = [] {
    GenerateOptions o;
    o.gen_length = 32;
    o.block_length = 32;
    o.steps = 32;
    return o;
  };
  struct Case {
    const char* flag;
    double GenerateOptions::*field;
    double ok_lo, ok_hi, bad_lo, bad_hi;
  };
  const Case cases[] = {
      {"--temperature", &GenerateOptions::temperature, 1e-6, 1e6, 1e-7, 1.01e6},
      {"--alg-temp", &GenerateOptions::alg_temp, 1e-6, 1e6, 5e-310, 1e300},
      {"--cfg-scale", &GenerateOptions::cfg_scale, 0, 1000, -1e-300, 1e300},
      {"--eps", &GenerateOptions::eps, 1e-12, 0.999, 1e-300, 1},
  };
  for (const Case& c : cases) {
    for (double v : {c.ok_lo, c.ok_hi, 0.5}) {
      GenerateOptions o = opts();
      o.*c.field = v;
      if (c.field == &GenerateOptions::eps && v == 0.5) continue;
      EXPECT_NO_THROW(check_generate_options(o, cfg, prompt)) << c.flag << " " << v;
    }
    for (double v : {c.bad_lo, c.bad_hi, std::nan(""), double(INFINITY)}) {
      GenerateOptions o = opts();
      o.*c.field = v;
      EXPECT_NE(error_of([&] { check_generate_options(o, cfg, prompt); }).find(c.flag),
                std::string::npos)
          << c.flag << " " << v;
    }
  }
  // The arithmetic at the ends: the quotients the samplers form stay finite for any float logit.
  const double big = 3.4e38;
  EXPECT_TRUE(std::isfinite(big / 1e-6));                         // Dream: logits / temperature
  EXPECT_TRUE(std::isfinite(1.0 / 1e-6));                         // confidence / alg_temp
  EXPECT_TRUE(std::isfinite(1e6 * std::log(-std::log(1e-300))));  // LLaDA: T * gumbel noise
  EXPECT_TRUE(std::isfinite(float(1000.0 + 1.0) * 3e35f));        // cfg: (s + 1)(cond - un)
}

// ---- class 5: linear scoring ---------------------------------------------------------------

// Runs f in a child process; fails when it has not finished after `limit_s` (a quadratic path
// on 50 MB would run for hours: the test must fail, not hang).
template <typename F>
void finishes_within(double limit_s, F&& f) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    f();
    _exit(0);
  }
  const auto t0 = std::chrono::steady_clock::now();
  int st = 0;
  while (waitpid(pid, &st, WNOHANG) == 0) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > limit_s) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      FAIL() << "not finished after " << limit_s << " s";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  std::printf("  finished in %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

std::string repeat(const std::string& unit, size_t n) {
  std::string s;
  s.reserve(n + unit.size());
  while (s.size() < n) s += unit;
  s.resize(n);
  return s;
}

void score_both_ways(const std::string& r) {
  (void)eval::gsm8k_match(eval::gsm8k_strict_extract(r), "#### 28");
  (void)eval::gsm8k_match(eval::gsm8k_flexible_extract(r), "#### 28");
  const std::string e = eval::minerva_extract(r);
  (void)eval::math_string_equiv(e, std::string("28"));
}

TEST(EvalScale, FiftyMegabyteResponseScored) {
  // Prose with numbers, invalid UTF-8 and multi-byte text, many lines: 50 MB.
  const std::string r =
      repeat(
          "Mia has 23 marbles, buys 14 more and gives 9 away: 23 + 14 - 9 = 28 \xe2\x82\xac.\n"
          "\xff\xfe broken \xe2\x82 bytes $x$ \\boxed{28} \\text{ok} \\frac12\n",
          50u << 20) +
      "\n#### 28\nFinal Answer: The final answer is $28$. I hope it is correct.";
  finishes_within(240, [&] {
    if (eval::gsm8k_strict_extract(r) != "28") _exit(3);
    if (eval::minerva_extract(r) != "28") _exit(4);
    score_both_ways(r);
  });
}

TEST(EvalScale, AdversarialLinesScoredInLinearTime) {
  // One long line each: prefixes without their suffix, braces and dollars that never close.
  const size_t n = 5u << 20;
  const std::string fa = "Final Answer: The final answer is ";
  for (const std::string& r :
       {repeat(fa + "x", n), fa + repeat("\\text{", n) + ". I hope it is correct.\n}",
        fa + repeat("\\boxed{", n) + ". I hope it is correct.\n}",
        fa + "$" + repeat("a", n) + ". I hope it is correct.\n$", repeat("1,2.", n),
        fa + repeat("frac", n) + ". I hope it is correct."})
    finishes_within(120, [&] { score_both_ways(r); });
}

// The regex wrapper's fragments reproduce PCRE2_MATCH_INVALID_UTF (which it no longer uses, as
// that mode re-validates the subject on every call): the same matches on random subjects with
// invalid bytes, newlines and multi-byte characters.
std::vector<std::pair<size_t, size_t>> reference_find_all(const std::string& pattern,
                                                          const std::string& s) {
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_compile_context* cc = pcre2_compile_context_create(nullptr);
  pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, cc);
  pcre2_compile_context_free(cc);
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
  std::vector<std::pair<size_t, size_t>> out;
  size_t pos = 0;
  auto next_char = [&](size_t i) {
    ++i;
    while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
    return i;
  };
  while (pos <= s.size()) {
    const int rc =
        pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), pos, 0, md, nullptr);
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    if (ov[0] == ov[1] && !out.empty() && out.back().second == ov[0]) {
      pos = next_char(ov[0]);
      continue;
    }
    pos = ov[1] > ov[0] ? ov[1] : next_char(ov[1]);
    out.emplace_back(ov[0], ov[1]);
  }
  pcre2_match_data_free(md);
  pcre2_code_free(code);
  return out;
}

TEST(EvalScale, InvalidUtf8MatchesAsPcre2InvalidUtfMode) {
  const std::vector<std::string> patterns = {R"((-?[$0-9.,]{2,})|(-?[0-9]+))",
                                             R"(#### (\-?[0-9\.\,]+))",
                                             R"(\.$)",
                                             "^a|b$",
                                             "(?m)^a|b$",
                                             R"(\bab\b)",
                                             R"((?<=a)b)",
                                             ".",
                                             "",
                                             "a*",
                                             R"((.*?)(\$)(.*?)(\$)(.*))",
                                             R"((\\text\{)(.*?)(\}))",
                                             R"((frac)([^{])(.))",
                                             "(?s).*#### "};
  const std::vector<std::string> atoms = {"a",       "b",        "1",    "2",        ",",
                                          ".",       "$",        " ",    "\n",       "####",
                                          "\\text{", "}",        "frac", "\xc3\xa9", "\xe2\x82\xac",
                                          "\xff",    "\xe2\x82", "\x80", "\xc3"};
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::string s;
    const int len = rng() % 24;
    for (int i = 0; i < len; ++i) s += atoms[rng() % atoms.size()];
    for (const auto& p : patterns) {
      const eval::Regex re(p);
      std::vector<std::pair<size_t, size_t>> got;
      for (const auto& m : re.find_all(s)) got.emplace_back(m.begin, m.end);
      EXPECT_EQ(got, reference_find_all(p, s)) << "pattern " << p << " subject '" << s << "'";
    }
  }
}

TEST(EvalScale, OneStartPerLineFindsTheSameMatches) {
  const std::vector<std::pair<std::string, std::string>> patterns = {
      {R"((.*?)(\$)(.*?)(\$)(.*))", ""},
      {R"((\\text\{)(.*?)(\}))", "\\text{"},
      {R"((\\boxed\{)(.*)(\}))", "\\boxed{"},
      {R"(Final Answer: The final answer is(.*?). I hope it is correct.)",
       "Final Answer: The final answer is"}};
  const std::vector<std::string> atoms = {"$",
                                          "x",
                                          "}",
                                          "\n",
                                          "\\text{",
                                          "\\boxed{",
                                          "\xff",
                                          "\xc3\xa9",
                                          "Final Answer: The final answer is",
                                          ". I hope it is correct.",
                                          " "};
  std::mt19937 rng(11);
  for (int trial = 0; trial < 400; ++trial) {
    std::string s;
    const int len = rng() % 16;
    for (int i = 0; i < len; ++i) s += atoms[rng() % atoms.size()];
    for (const auto& [p, prefix] : patterns) {
      const eval::Regex plain(p), per_line(p, prefix);
      std::vector<std::pair<size_t, size_t>> a, b;
      for (const auto& m : plain.find_all(s)) a.emplace_back(m.begin, m.end);
      for (const auto& m : per_line.find_all(s)) b.emplace_back(m.begin, m.end);
      EXPECT_EQ(a, b) << "pattern " << p << " subject '" << s << "'";
      EXPECT_EQ(plain.sub(s, "<\\2>"), per_line.sub(s, "<\\2>"));
    }
  }
}

// ---- class 7: errors with a location -------------------------------------------------------

TEST(PairLocations, EmptyAnswerNamesFileAndLine) {
  const std::string path = ::testing::TempDir() + "/pairs_empty_answer.jsonl";
  for (const char* bad : {R"({"prompt_ids": [1, 2], "answer_ids": []})",
                          R"({"prompt": "What is 1 + 1?", "answer": ""})"}) {
    std::ofstream(path) << R"({"prompt_ids": [1, 2], "answer_ids": [3]})"
                        << "\n\n"
                        << bad << "\n";
    PairTokenizer tok;
    tok.prompt = [](const std::string& s) { return std::vector<int32_t>(s.size(), 5); };
    tok.answer = tok.prompt;
    const std::string msg = error_of([&] { (void)read_calib_pairs(path, tok, 512, 0, nullptr); });
    EXPECT_NE(msg.find(path + ":3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("answer is empty"), std::string::npos) << msg;
  }
}

// ---- class 9: model files that contradict each other ------------------------------------------

TEST(ModelFiles, GenerationConfigMaskIdMustAgree) {
  ModelConfig cfg;
  cfg.arch = Arch::kDream;
  cfg.vocab_size = 512;
  cfg.mask_id = 510;
  GenerationDefaults d = parse_generation_defaults(R"({"mask_token_id": 509})", "g.json");
  std::string msg = error_of([&] { check_generation_ids(d, cfg, "/m"); });
  EXPECT_NE(msg.find("/m/generation_config.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("/m/config.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("509"), std::string::npos) << msg;
  EXPECT_NE(msg.find("510"), std::string::npos) << msg;
  d.mask_token_id = 600;
  msg = error_of([&] { check_generation_ids(d, cfg, "/m"); });
  EXPECT_NE(msg.find("outside the vocabulary"), std::string::npos) << msg;
  d.mask_token_id = 510;
  EXPECT_NO_THROW(check_generation_ids(d, cfg, "/m"));
  d.mask_token_id.reset();
  EXPECT_NO_THROW(check_generation_ids(d, cfg, "/m"));
  for (const char* bad : {R"({"mask_token_id": "510"})", R"({"mask_token_id": -1})",
                          R"({"mask_token_id": 1.5})", R"({"mask_token_id": [510]})"})
    EXPECT_NE(
        error_of([&] { (void)parse_generation_defaults(bad, "g.json"); }).find("mask_token_id"),
        std::string::npos)
        << bad;
}

}  // namespace
}  // namespace dllmq
