#include "cli/plot_helper.h"

#include <spawn.h>
#include <sys/wait.h>

#include <filesystem>
#include <vector>

#include "cli/settings_names.h"
#include "util/atomic_file.h"
#include "util/error.h"

extern char** environ;

namespace dllmq::cli {

void draw_with_matplotlib(const std::string& script, const nlohmann::json& spec,
                          const std::string& png, const std::string& python) {
  const std::string helper = repo_path("tools/plot/" + script);
  if (helper.empty()) fail("{}: tools/plot/{} not found beside the binary", png, script);
  const std::string spec_path = png + ".spec.json";
  write_file_atomic(spec_path, spec.dump());
  std::vector<std::string> argv = {python, helper, spec_path, png};
  std::vector<char*> args;
  for (auto& s : argv) args.push_back(s.data());
  args.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, python.c_str(), nullptr, nullptr, args.data(), environ) != 0)
    fail("{}: cannot start {} to draw it", png, python);
  int st = 0;
  waitpid(pid, &st, 0);
  std::filesystem::remove(spec_path);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    fail(
        "{}: drawing failed ({} {}; needs matplotlib: apt-get install python3-matplotlib, "
        "or run scripts/setup.sh)",
        png, python, helper);
}

}  // namespace dllmq::cli
