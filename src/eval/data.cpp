#include "eval/data.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "util/error.h"
#include "util/json_limits.h"

namespace dllmq::eval {

std::string read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("{}: cannot open", path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

namespace {

std::string gunzip(const std::string& path) {
  std::ifstream probe(path);
  if (!probe) fail("{}: cannot open", path);
  // gzip(1) instead of a zlib dependency: only HumanEval ships compressed, and it is 45 KB.
  std::string cmd = "gzip -dc -- '";
  for (char c : path) cmd += c == '\'' ? std::string("'\\''") : std::string(1, c);
  cmd += "'";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) fail("{}: cannot run gzip to decompress it", path);
  std::string out;
  char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  if (pclose(p) != 0) fail("{}: gzip -dc failed (not a gzip file?)", path);
  return out;
}

}  // namespace

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  return parse_jsonl(path.ends_with(".gz") ? gunzip(path) : read_text_file(path), path);
}

std::vector<nlohmann::json> parse_jsonl(std::string_view text, const std::string& path) {
  std::vector<nlohmann::json> out;
  size_t line_no = 0;
  for (size_t a = 0; a < text.size();) {
    size_t b = text.find('\n', a);
    if (b == std::string::npos) b = text.size();
    ++line_no;
    const std::string_view line = text.substr(a, b - a);
    a = b + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    auto j = parse_json_or_discarded(line);
    if (j.is_discarded() || !j.is_object()) fail("{}:{}: not a JSON object", path, line_no);
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace dllmq::eval
