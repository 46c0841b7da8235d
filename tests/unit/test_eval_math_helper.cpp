// MathHelper (src/eval/math_equiv_client.cpp) against a stand-in helper script speaking the
// protocol of tools/eval/math_equiv.py, so that the process handling (one long-lived process per
// worker, kill + restart on a hang or a crash, the phase in progress scored 0) is tested without
// sympy. The real scorer is compared with lm-eval in tests/python/test_lmeval_parity.py.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "eval/math_equiv_client.h"

namespace dllmq::eval {
namespace {

namespace fs = std::filesystem;

// equiv = 1 iff response == solution; verify = 1 iff the response contains "v";
// "HANG..." ignores SIGALRM and sleeps in the phase it names, "CRASH" aborts; each helper
// process counts itself in a file so that the test sees how many were started.
const char* kFakeHelper = R"PY(
import json, os, signal, sys, time
with open(os.environ["FAKE_COUNT"], "a") as f:
    f.write("x")
if os.environ.get("FAKE_NOT_READY"):
    print(json.dumps({"ready": False, "error": "ModuleNotFoundError: No module named 'sympy'"}), flush=True)
    sys.exit(3)
print(json.dumps({"ready": True, "versions": {"sympy": "0"}, "pin_mismatch": ["sympy 0 (pinned 1.14.0)"]}), flush=True)
for line in sys.stdin:
    r = json.loads(line)
    for ph in r["phases"]:
        if r["response"] == "HANG_" + ph:
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
            time.sleep(3600)
        if r["response"] == "CRASH":
            os.abort()
        if ph == "equiv":
            out = {"id": r["id"], "phase": ph, "pred": r["response"], "gold": r["solution"],
                   "value": int(r["response"] == r["solution"])}
        else:
            out = {"id": r["id"], "phase": ph, "value": int("v" in r["response"])}
        print(json.dumps(out), flush=True)
)PY";

class MathHelperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
    dir_ = fs::temp_directory_path() / ("dllmq-mathhelper-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    script_ = (dir_ / "fake_helper.py").string();
    std::ofstream(script_) << kFakeHelper;
    count_ = (dir_ / "count").string();
    setenv("FAKE_COUNT", count_.c_str(), 1);
    unsetenv("FAKE_NOT_READY");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  size_t started() const {
    std::ifstream f(count_);
    std::string s;
    std::getline(f, s);
    return s.size();
  }
  fs::path dir_;
  std::string script_, count_;
};

TEST_F(MathHelperTest, OneProcessPerWorkerServesEveryRequest) {
  MathHelper h("/usr/bin/python3", script_, 2);
  std::string why;
  ASSERT_TRUE(h.ready(&why)) << why;
  EXPECT_EQ(h.pin_mismatch().size(), 1u);
  std::vector<MathRequest> reqs;
  for (int i = 0; i < 200; ++i) reqs.push_back({i % 3 ? "a" : "va", i % 2 ? "a" : "va"});
  const auto v = h.judge(reqs);
  ASSERT_EQ(v.size(), reqs.size());
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_TRUE(v[i].exact_match && v[i].math_verify) << i;
    EXPECT_EQ(*v[i].exact_match, reqs[i].response == reqs[i].solution) << i;
    EXPECT_EQ(*v[i].math_verify, reqs[i].response.find('v') != std::string::npos) << i;
    EXPECT_TRUE(v[i].normalized);
    EXPECT_EQ(v[i].pred, reqs[i].response);
    EXPECT_TRUE(v[i].error.empty()) << v[i].error;
  }
  // A second batch (a generation run scores sample by sample) reuses the same processes.
  for (int k = 0; k < 5; ++k) EXPECT_TRUE(*h.judge({{"x", "x"}})[0].exact_match);
  EXPECT_EQ(started(), 2u);
  EXPECT_EQ(h.restarts(), 0u);
}

TEST_F(MathHelperTest, HangAndCrashScoreZeroAndTheHelperIsReplaced) {
  MathHelper h("/usr/bin/python3", script_, 1);
  h.phase_timeout_s = 2.0;
  std::string why;
  ASSERT_TRUE(h.ready(&why)) << why;
  const auto v = h.judge({{"va", "va"},
                          {"HANG_equiv", "HANG_equiv"},
                          {"CRASH", "CRASH"},
                          {"HANG_verify", "HANG_verify"},
                          {"va", "va"}});
  ASSERT_EQ(v.size(), 5u);
  EXPECT_TRUE(*v[0].exact_match && *v[0].math_verify);
  // the hang in equiv: equiv 0; verify runs on the restarted helper (no "v": 0 as well)
  EXPECT_FALSE(*v[1].exact_match);
  ASSERT_TRUE(v[1].math_verify.has_value());
  EXPECT_NE(v[1].error.find("no answer"), std::string::npos) << v[1].error;
  // a crash kills both phases in turn (each on a fresh helper)
  EXPECT_FALSE(*v[2].exact_match);
  EXPECT_FALSE(*v[2].math_verify);
  EXPECT_NE(v[2].error.find("signal"), std::string::npos) << v[2].error;
  // a hang in verify keeps the equiv verdict
  EXPECT_TRUE(*v[3].exact_match);
  EXPECT_FALSE(*v[3].math_verify);
  EXPECT_TRUE(*v[4].exact_match && *v[4].math_verify);
  EXPECT_TRUE(v[4].error.empty());
  EXPECT_EQ(h.restarts(), 4u);
  EXPECT_EQ(started(), 5u);
}

TEST_F(MathHelperTest, MissingEnvironmentIsReported) {
  setenv("FAKE_NOT_READY", "1", 1);
  MathHelper h("/usr/bin/python3", script_, 2);
  std::string why;
  EXPECT_FALSE(h.ready(&why));
  EXPECT_NE(why.find("sympy"), std::string::npos) << why;
  unsetenv("FAKE_NOT_READY");
  MathHelper none((dir_ / "no-such-python").string(), script_, 1);
  EXPECT_FALSE(none.ready(&why));
  EXPECT_NE(why.find("no-such-python"), std::string::npos) << why;
  MathHelper noscript("/usr/bin/python3", (dir_ / "missing.py").string(), 1);
  EXPECT_FALSE(noscript.ready(&why));
  EXPECT_NE(why.find("not found"), std::string::npos) << why;
}

}  // namespace
}  // namespace dllmq::eval
