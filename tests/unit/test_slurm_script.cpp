// Slurm job scripts (src/launch/slurm_script.h) and the parsers of Slurm's command output
// (src/launch/slurm_commands.h): array ranges, dependencies, pass-through options, templates,
// and the rendered script run by bash itself as an array task.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "launch/slurm_commands.h"
#include "launch/slurm_script.h"
#include "test_util.h"

namespace dllmq::launch {
namespace {

namespace fs = std::filesystem;
using test_util::expect_error;

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = 0; (at = s.find(what, at)) != std::string::npos; at += what.size()) ++n;
  return n;
}

JobSpec three_shards() {
  JobSpec job;
  job.name = "dllmq-cell";
  job.log = "/runs/g/synth/kv=fp16/slurm-%A_%a.log";
  job.workdir = "/home/me/project dir";
  for (int i : {0, 2, 3})
    job.commands[i] = {"/opt/dllmq", "eval",    "--out",   "/runs/g/synth/kv=fp16",
                       "--threads",  kTaskCpus, "--shard", fmt::format("{}/4", i)};
  return job;
}

TEST(SlurmScript, ArrayRanges) {
  EXPECT_EQ(array_ranges({0}), "0");
  EXPECT_EQ(array_ranges({0, 1, 2}), "0-2");
  EXPECT_EQ(array_ranges({5, 0, 2, 1, 7, 8, 2}), "0-2,5,7-8");
  EXPECT_EQ(array_ranges({}), "");
}

TEST(SlurmScript, AfterokDependency) {
  EXPECT_EQ(afterok_dependency({}), "");
  EXPECT_EQ(afterok_dependency({"12_0"}), "afterok:12_0");
  EXPECT_EQ(afterok_dependency({"12_0", "12_3", "14"}), "afterok:12_0:12_3:14");
}

TEST(SlurmScript, DirectivesAndPassThroughOptions) {
  SbatchOptions opt;
  opt.partition = "cpu";
  opt.account = "proj42";
  opt.time = "04:00:00";
  opt.mem = "32G";
  opt.cpus_per_task = 16;
  opt.extra = {"--qos=long", "#SBATCH --constraint=avx512"};
  const std::string s = render_job_script(three_shards(), opt);
  EXPECT_TRUE(s.starts_with("#!/bin/bash\n#SBATCH --job-name=dllmq-cell\n")) << s;
  for (const char* line :
       {"#SBATCH --output=/runs/g/synth/kv=fp16/slurm-%A_%a.log\n", "#SBATCH --array=0,2-3\n",
        "#SBATCH --partition=cpu\n", "#SBATCH --account=proj42\n", "#SBATCH --time=04:00:00\n",
        "#SBATCH --mem=32G\n", "#SBATCH --cpus-per-task=16\n", "#SBATCH --qos=long\n",
        "#SBATCH --constraint=avx512\n"})
    EXPECT_EQ(count(s, line), 1u) << line << "\n" << s;
  // Every directive precedes the first command (sbatch stops reading them there).
  EXPECT_LT(s.rfind("#SBATCH"), s.find("\ncd "));
  EXPECT_NE(s.find("cd '/home/me/project dir' || exit 1\n"), std::string::npos) << s;
  // One case branch per submitted shard, none for the finished shard 1.
  EXPECT_NE(s.find("  0) set -- /opt/dllmq eval"), std::string::npos);
  EXPECT_EQ(s.find("  1) set --"), std::string::npos);
  EXPECT_NE(s.find("--shard 3/4 ;;"), std::string::npos);
  EXPECT_EQ(count(s, "--threads \"${SLURM_CPUS_PER_TASK:-1}\""), 3u) << s;

  // Options left unset are not written (Slurm's defaults apply).
  const std::string plain = render_job_script(three_shards(), SbatchOptions{});
  for (const char* flag : {"--partition", "--account", "--time", "--mem", "--cpus-per-task"})
    EXPECT_EQ(plain.find(fmt::format("#SBATCH {}", flag)), std::string::npos) << flag;
}

TEST(SlurmScript, PlainJobHasNoArray) {
  JobSpec job;
  job.name = "merge";
  job.log = "/runs/g/slurm/logs/merge-%j.log";
  job.array = false;
  job.commands[0] = {"/opt/dllmq", "grid", "--collect"};
  const std::string s = render_job_script(job, SbatchOptions{});
  EXPECT_EQ(s.find("--array"), std::string::npos);
  EXPECT_EQ(s.find("case "), std::string::npos);
  EXPECT_NE(s.find("set -- /opt/dllmq grid --collect\n"), std::string::npos) << s;
}

TEST(SlurmScript, UserTemplate) {
  const std::string tmpl = "#!/bin/bash\n{{sbatch}}module load gcc/13\ncd {{workdir}}\n{{command}}";
  const std::string s = render_job_script(three_shards(), SbatchOptions{}, tmpl, "my.tmpl");
  EXPECT_NE(s.find("#SBATCH --array=0,2-3\nmodule load gcc/13\ncd '/home/me/project dir'\n"),
            std::string::npos)
      << s;
  expect_error([&] { render_job_script(three_shards(), {}, "#!/bin/bash\n{{sbatch}}", "my.tmpl"); },
               {"my.tmpl", "{{command}}"});
  expect_error([&] { render_job_script(three_shards(), {}, "{{command}}", "my.tmpl"); },
               {"my.tmpl", "{{sbatch}}"});
  // A value that holds a placeholder's text is not expanded again.
  JobSpec job = three_shards();
  job.commands[0].push_back("{{sbatch}}");
  const std::string s2 = render_job_script(job, SbatchOptions{});
  EXPECT_NE(s2.find("'{{sbatch}}'"), std::string::npos) << s2;
}

TEST(SlurmScript, RejectsInjectedLines) {
  SbatchOptions opt;
  opt.partition = "cpu\nrm -rf /";
  expect_error([&] { render_job_script(three_shards(), opt); }, {"--partition", "one line"});
  SbatchOptions extra;
  extra.extra = {"qos=long"};
  expect_error([&] { render_job_script(three_shards(), extra); }, {"--sbatch-line", "qos=long"});
}

TEST(SlurmScript, TaskThreadsReplaceTheConfigs) {
  using V = std::vector<std::string>;
  EXPECT_EQ(with_task_threads({"dllmq", "eval", "--threads", "1", "--json"}),
            (V{"dllmq", "eval", "--json", "--threads", kTaskCpus}));
  EXPECT_EQ(with_task_threads({"dllmq", "calibrate", "--threads=4"}),
            (V{"dllmq", "calibrate", "--threads", kTaskCpus}));
  EXPECT_EQ(with_task_threads({"dllmq", "eval"}), (V{"dllmq", "eval", "--threads", kTaskCpus}));
}

// The rendered script, run by bash as array task 2 of a job with 3 CPUs: the command gets its
// arguments unchanged (quoting), the thread count from SLURM_CPUS_PER_TASK, and the log ends
// with the exit record.
TEST(SlurmScript, RunsTheTasksCommandInBash) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("dllmq_test_slurm_{}", getpid());
  fs::create_directories(dir);
  JobSpec job;
  job.name = "t";
  job.log = (dir / "log").string();
  job.workdir = dir.string();
  job.commands[1] = {"/bin/sh", "-c", "echo wrong; exit 9"};
  job.commands[2] = {"/usr/bin/printf", "[%s]", "it's", "a b", "$HOME", "--threads", kTaskCpus};
  const fs::path script = dir / "job.sbatch";
  std::ofstream(script) << render_job_script(job, SbatchOptions{});
  const std::string cmd = fmt::format(
      "SLURM_ARRAY_TASK_ID=2 SLURM_CPUS_PER_TASK=3 bash {} 2>/dev/null", script.string());
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[256];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int st = pclose(p);
  EXPECT_EQ(out, "[it's][a b][$HOME][--threads][3]dllmq-task-exit: 0\n");
  EXPECT_EQ(WEXITSTATUS(st), 0);
  const std::string cmd1 =
      fmt::format("SLURM_ARRAY_TASK_ID=1 bash {} >/dev/null 2>&1", script.string());
  EXPECT_EQ(WEXITSTATUS(std::system(cmd1.c_str())), 9);
  const std::string cmd7 =
      fmt::format("SLURM_ARRAY_TASK_ID=7 bash {} >/dev/null 2>&1", script.string());
  EXPECT_EQ(WEXITSTATUS(std::system(cmd7.c_str())), 2);  // no such task
  fs::remove_all(dir);
}

TEST(SlurmCommands, ExpandArrayIds) {
  using V = std::vector<std::string>;
  EXPECT_EQ(expand_array_id("12"), (V{"12"}));
  EXPECT_EQ(expand_array_id("12_3"), (V{"12_3"}));
  EXPECT_EQ(expand_array_id("12_[0-2,5]"), (V{"12_0", "12_1", "12_2", "12_5"}));
  EXPECT_EQ(expand_array_id("12_[4-5%1]"), (V{"12_4", "12_5"}));
}

TEST(SlurmCommands, ParseSqueueAndSacct) {
  const auto q = parse_squeue(
      "7_0|COMPLETED|None\n7_1|RUNNING|None\n9_[0-1]|PENDING|Dependency\n10|CANCELLED|"
      "DependencyNeverSatisfied\n");
  ASSERT_EQ(q.size(), 5u);
  EXPECT_EQ(q.at("7_1").state, "RUNNING");
  EXPECT_EQ(q.at("7_1").reason, "");
  EXPECT_EQ(q.at("9_1").reason, "Dependency");
  EXPECT_EQ(q.at("10").reason, "DependencyNeverSatisfied");
  const auto a = parse_sacct("7_0|COMPLETED|0:0\n7_1|FAILED|1:0\n7_2|CANCELLED by 0|0:15\n");
  EXPECT_EQ(a.at("7_1").state, "FAILED");
  EXPECT_EQ(a.at("7_1").exit_code, "1:0");
  EXPECT_EQ(a.at("7_2").state, "CANCELLED");
  EXPECT_TRUE(is_active("PENDING"));
  EXPECT_TRUE(is_active("RUNNING"));
  EXPECT_FALSE(is_active("FAILED"));
  EXPECT_FALSE(is_active("COMPLETED"));
}

TEST(SlurmCommands, MissingCommandIsNamed) {
  const char* old = std::getenv("PATH");
  const std::string saved = old ? old : "";
  setenv("PATH", "/nonexistent-dllmq-test", 1);
  expect_error(
      [] {
        require_commands({"sbatch", "squeue"}, "dllmq grid --launcher slurm");
      },
      {"dllmq grid --launcher slurm", "`sbatch`", "not on PATH"});
  setenv("PATH", saved.c_str(), 1);
  EXPECT_FALSE(find_on_path("sh").empty());
}

}  // namespace
}  // namespace dllmq::launch
