// Run bookkeeping (torn-line recovery, shards, merge) and the code sandbox, without benchmark data.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "eval/report.h"
#include "eval/run.h"
#include "eval/sandbox.h"
#include "util/error.h"

namespace dllmq::eval {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  const fs::path d =
      fs::temp_directory_path() / fmt::format("dllmq_test_eval_run_{}", getpid()) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

TEST(EvalRun, ParseShard) {
  EXPECT_EQ(parse_shard("0/1"), std::make_pair(0, 1));
  EXPECT_EQ(parse_shard("3/4"), std::make_pair(3, 4));
  for (const char* bad : {"4/4", "-1/2", "1", "a/b", "1/0", "1/2x"})
    EXPECT_THROW(parse_shard(bad), Error) << bad;
  EXPECT_EQ(samples_file_name(0, 1), "samples.jsonl");
  EXPECT_EQ(samples_file_name(1, 4), "samples.1-of-4.jsonl");
}

TEST(EvalRun, TornLastLineIsDroppedAndCutOff) {
  const fs::path d = temp_dir("torn");
  const fs::path f = d / "samples.jsonl";
  write(f, "{\"task_id\": \"0\"}\n{\"task_id\": \"1\"}\n{\"task_id\": \"2\", \"pro");
  EXPECT_EQ(read_samples(f.string(), false).size(), 2u);
  EXPECT_GT(fs::file_size(f), 36u);  // not repaired without `repair`
  EXPECT_EQ(read_samples(f.string(), true).size(), 2u);
  EXPECT_EQ(fs::file_size(f), 34u);  // cut back to the last complete line
  // A complete line without its newline is also treated as torn (the write was cut).
  write(f, "{\"task_id\": \"0\"}\n{\"task_id\": \"1\"}");
  EXPECT_EQ(read_samples(f.string(), true).size(), 1u);
  // Corruption anywhere else is an error naming the line.
  write(f, "{\"task_id\": \"0\"}\ngarbage\n{\"task_id\": \"1\"}\n");
  try {
    read_samples(f.string(), true);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(":2:"), std::string::npos) << e.what();
  }
}

// Fields the summary reads with their types (issue 16): a record whose task_id is a number or
// whose "correct" is a string used to throw nlohmann's type_error ("internal error").
TEST(EvalRun, ReadSamplesChecksFieldTypes) {
  const fs::path d = temp_dir("types");
  const fs::path f = d / "samples.jsonl";
  for (const char* bad :
       {R"({"task_id": 0})", R"({"task_id": "0", "correct": "yes"})",
        R"({"task_id": "0", "gen_s": "1"})", R"({"task_id": "0", "metrics": 1})"}) {
    write(f, std::string(bad) + "\n{\"task_id\": \"1\"}\n");
    try {
      read_samples(f.string(), false);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("samples.jsonl:1: corrupt sample record"),
                std::string::npos)
          << e.what();
    }
  }
  write(d / "config.json", R"({"task": 7, "metrics": []})");
  try {
    merge_runs({d.string()}, "");
    ADD_FAILURE() << "accepted a config whose task is not a string";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unreadable config"), std::string::npos) << e.what();
  }
}

TEST(EvalRun, MergeCountsDuplicatesOnce) {
  const fs::path d = temp_dir("merge");
  write(d / "config.json", R"({"task": "gsm8k", "metrics": ["strict_match", "flexible_extract"]})");
  write(d / "samples.0-of-2.jsonl",
        "{\"task_id\": \"0\", \"metrics\": {\"strict_match\": 1, \"flexible_extract\": 1}}\n"
        "{\"task_id\": \"2\", \"metrics\": {\"strict_match\": 0, \"flexible_extract\": 1}}\n");
  write(d / "samples.1-of-2.jsonl",
        "{\"task_id\": \"1\", \"metrics\": {\"strict_match\": 1, \"flexible_extract\": 0}}\n"
        "{\"task_id\": \"2\", \"metrics\": {\"strict_match\": 0, \"flexible_extract\": 1}}\n");
  const auto s = merge_runs({d.string()}, "");
  EXPECT_EQ(s["n"], 3);
  EXPECT_EQ(s["duplicates_dropped"], 1);
  EXPECT_NEAR(s["strict_match"].get<double>(), 2.0 / 3, 1e-12);
  EXPECT_NEAR(s["flexible_extract"].get<double>(), 2.0 / 3, 1e-12);
}

// The sandbox needs python3; skip where there is none.
TEST(EvalSandbox, VerdictsAndIsolation) {
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  SandboxOptions o;
  o.python = "/usr/bin/python3";
  o.timeout_s = 2.0;
  o.workers = 2;
  const Sandbox sb(o);
  const std::vector<CodeSample> samples = {
      {"def f(x):\n    return x + 1", "assert f(1) == 2", false, ""},
      {"def f(x):\n    return x", "assert f(1) == 2", false, ""},
      {"while True:\n    pass", "", false, ""},
      {"def f(:", "", false, ""},
      {"import ctypes\nctypes.string_at(0)", "", false, ""},  // SIGSEGV
      {"Here:\ndef f(x):\n    return x + 1\nprint('done')", "assert f(1) == 2", true, "f"},
  };
  const auto r = sb.run_all(samples);
  ASSERT_EQ(r.size(), samples.size());
  EXPECT_EQ(r[0].status, RunStatus::kPassed) << r[0].detail;
  EXPECT_EQ(r[1].status, RunStatus::kFailed);
  EXPECT_NE(r[1].detail.find("assert f(1) == 2"), std::string::npos) << r[1].detail;
  EXPECT_EQ(r[2].status, RunStatus::kTimeout);
  EXPECT_EQ(r[3].status,
            RunStatus::kFailed);  // SyntaxError counts as a failed sample, as code_eval
  EXPECT_NE(r[3].detail.find("SyntaxError"), std::string::npos) << r[3].detail;
  EXPECT_EQ(r[4].status, RunStatus::kError) << r[4].detail;  // no verdict: killed by a signal
  EXPECT_NE(r[4].detail.find("signal 11"), std::string::npos) << r[4].detail;
  EXPECT_EQ(r[5].status, RunStatus::kPassed) << r[5].detail << "\n" << r[5].program;  // sanitizer
  EXPECT_EQ(r[5].program, "def f(x):\n    return x + 1");
  if (geteuid() == 0) {
    EXPECT_NE(sb.isolation().find("netns"), std::string::npos) << sb.isolation();
  }
}

}  // namespace
}  // namespace dllmq::eval
