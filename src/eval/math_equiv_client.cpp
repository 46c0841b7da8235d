#include "eval/math_equiv_client.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "eval/data.h"

namespace dllmq::eval {

namespace fs = std::filesystem;

std::string default_math_equiv_helper() {
  if (const char* e = std::getenv("DLLMQ_MATH_EQUIV"); e && *e) return e;
  return std::string(DLLMQ_SOURCE_DIR) + "/tools/eval/math_equiv.py";
}

namespace {

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string fmt_name(const char* stem, int w) {
  return std::string(stem) + std::to_string(w) + ".jsonl";
}

std::string strip_newline(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  if (const size_t p = s.rfind('\n'); p != std::string::npos)
    s = s.substr(p + 1);  // last line only
  return s;
}

}  // namespace

std::optional<std::vector<bool>> sympy_equiv(
    const std::vector<std::pair<std::string, std::string>>& pairs, const std::string& helper,
    const std::string& python, int workers, std::string* why) {
  if (helper.empty() || !fs::exists(helper)) {
    if (why) *why = "helper not found: " + helper;
    return std::nullopt;
  }
  char tmpl[] = "/tmp/dllmq-sympy-XXXXXX";
  if (!mkdtemp(tmpl)) {
    if (why) *why = "cannot create a temp dir";
    return std::nullopt;
  }
  const fs::path dir = tmpl;
  const std::string check = quote(python) + " " + quote(helper) + " --check > " +
                            quote((dir / "check").string()) + " 2>&1";
  if (std::system(check.c_str()) != 0) {
    if (why) *why = strip_newline(read_text_file((dir / "check").string()));
    fs::remove_all(dir);
    return std::nullopt;
  }
  const int n = std::max(1, std::min<int>(workers, static_cast<int>(pairs.size())));
  std::vector<std::thread> threads;
  std::vector<int> rc(n, 0);
  for (int w = 0; w < n; ++w) {
    std::ofstream in(dir / fmt_name("in", w));
    for (size_t i = w; i < pairs.size(); i += n)
      in << nlohmann::json{{"a", pairs[i].first}, {"b", pairs[i].second}}.dump(
                -1, ' ', false, nlohmann::json::error_handler_t::replace)
         << "\n";
  }
  for (int w = 0; w < n; ++w)
    threads.emplace_back([&, w] {
      const std::string cmd = quote(python) + " " + quote(helper) + " < " +
                              quote((dir / fmt_name("in", w)).string()) + " > " +
                              quote((dir / fmt_name("out", w)).string());
      rc[w] = std::system(cmd.c_str());
    });
  for (auto& t : threads) t.join();
  std::vector<bool> out(pairs.size(), false);
  for (int w = 0; w < n; ++w) {
    const auto rows = rc[w] == 0 ? read_jsonl((dir / fmt_name("out", w)).string())
                                 : std::vector<nlohmann::json>{};
    size_t k = 0;
    for (size_t i = w; i < pairs.size(); i += n, ++k) {
      if (k >= rows.size()) {
        if (why) *why = "helper output incomplete";
        fs::remove_all(dir);
        return std::nullopt;
      }
      out[i] = rows[k].value("equiv", false);
    }
  }
  fs::remove_all(dir);
  return out;
}

}  // namespace dllmq::eval
