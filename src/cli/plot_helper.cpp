#include "cli/plot_helper.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

#include <filesystem>
#include <vector>

#include "cli/settings_names.h"
#include "util/atomic_file.h"
#include "util/error.h"

extern char** environ;

namespace dllmq::cli {

void draw_with_matplotlib(const std::string& script, const nlohmann::json& spec,
                          const std::string& png, const std::string& python) {
  namespace fs = std::filesystem;
  // The image goes exactly to `png`, or the command fails: matplotlib appends ".png" to a name
  // without an extension and `calib-report --png DIR` wrote DIR.png while saying "wrote DIR".
  // So it draws into a temporary ending in .png beside the target, renamed onto `png` when done
  // (also what keeps a killed run from leaving half an image).
  if (png.empty() || png.back() == '/' || fs::is_directory(png))
    fail("{}: is a directory, not an image file name (e.g. {}/plot.png)", png,
         png.empty() ? "." : png);
  const fs::path target(png);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::is_directory(dir)) fail("{}: directory {} does not exist", png, dir.string());
  static std::atomic<int> serial{0};
  const std::string tmp_png =
      (dir / fmt::format(".{}.{}-{}.tmp.png", target.filename().string(), ::getpid(), serial++))
          .string();
  const std::string helper = repo_path("tools/plot/" + script);
  if (helper.empty()) fail("{}: tools/plot/{} not found beside the binary", png, script);
  const std::string spec_path = tmp_png + ".spec.json";
  write_file_atomic(spec_path, spec.dump());
  std::vector<std::string> argv = {python, helper, spec_path, tmp_png};
  std::vector<char*> args;
  for (auto& s : argv) args.push_back(s.data());
  args.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, python.c_str(), nullptr, nullptr, args.data(), environ) != 0)
    fail("{}: cannot start {} to draw it", png, python);
  int st = 0;
  waitpid(pid, &st, 0);
  std::filesystem::remove(spec_path);
  std::error_code ec;
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !fs::is_regular_file(tmp_png)) {
    fs::remove(tmp_png, ec);
    fail(
        "{}: drawing failed ({} {}; needs matplotlib: apt-get install python3-matplotlib, "
        "or run scripts/setup.sh)",
        png, python, helper);
  }
  if (std::rename(tmp_png.c_str(), png.c_str()) != 0) {
    const int e = errno;
    fs::remove(tmp_png, ec);
    fail("{}: cannot move the drawn image there: {}", png, std::strerror(e));
  }
}

}  // namespace dllmq::cli
