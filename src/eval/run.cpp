#include "eval/run.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>

#include "eval/data.h"
#include "eval/progress.h"
#include "eval/report.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_limits.h"

namespace dllmq::eval {

namespace fs = std::filesystem;

std::pair<int, int> parse_shard(const std::string& s) {
  const size_t slash = s.find('/');
  try {
    if (slash != std::string::npos) {
      size_t a = 0, b = 0;
      const int i = std::stoi(s.substr(0, slash), &a), n = std::stoi(s.substr(slash + 1), &b);
      if (a == slash && b == s.size() - slash - 1 && n >= 1 && i >= 0 && i < n) return {i, n};
    }
  } catch (const std::exception&) {
  }
  fail("--shard {}: expected i/n with 0 <= i < n (e.g. 0/4)", s);
}

std::string samples_file_name(int shard, int num_shards) {
  return num_shards == 1 ? "samples.jsonl"
                         : fmt::format("samples.{}-of-{}.jsonl", shard, num_shards);
}

namespace {

std::string summary_stem(int shard, int num_shards) {
  return num_shards == 1 ? "summary" : fmt::format("summary.{}-of-{}", shard, num_shards);
}

// Config and summaries replace their previous version whole (util/atomic_file.h): a kill or a
// full disk leaves the old summary or the new one, never a torn file.
void write_text(const fs::path& p, const std::string& text) {
  write_file_atomic(p.string(), text);
}

// Appends one line with a single write() and syncs it, so a kill leaves at most one torn line.
class LineAppender {
 public:
  explicit LineAppender(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("{}: cannot open for appending", path);
  }
  ~LineAppender() { ::close(fd_); }
  // A failed write (a full disk) may leave part of the line: it is the torn last line that
  // read_samples drops on --resume, and the sample is redone.
  void append(const std::string& line) {
    const std::string buf = line + "\n";
    for (size_t off = 0; off < buf.size();) {
      const ssize_t n = ::write(fd_, buf.data() + off, buf.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        fail("{}: write failed: {} (finished samples are kept; rerun with --resume)", path_,
             std::strerror(errno));
      off += static_cast<size_t>(n);
    }
    if (::fdatasync(fd_) != 0)
      fail("{}: fdatasync failed: {} (rerun with --resume)", path_, std::strerror(errno));
  }

 private:
  std::string path_;
  int fd_ = -1;
};

nlohmann::json summary_from_samples(const std::string& task,
                                    const std::vector<std::string>& metrics,
                                    const std::vector<nlohmann::json>& rows) {
  std::vector<SampleScore> scores;
  std::vector<std::string> notes;
  double gen_s = 0, tokens = 0, nfe = 0, kvb = 0, kvk = 0, kvv = 0, kv16 = 0;
  for (const auto& r : rows) {
    scores.push_back(sample_from_json(r));
    gen_s += r.value("gen_s", 0.0);
    tokens += r.value("gen_tokens", 0);
    nfe += r.value("nfe", 0);
    kvb += r.value("kv_bytes", 0.0);
    kvk += r.value("kv_bytes_k", 0.0);
    kvv += r.value("kv_bytes_v", 0.0);
    kv16 += r.value("kv_bytes_fp16", 0.0);
  }
  nlohmann::json s = summarize(task, metrics, scores, notes);
  if (!rows.empty()) {
    s["mean_gen_s"] = gen_s / rows.size();
    s["mean_nfe"] = nfe / rows.size();
    s["tokens_per_s"] = gen_s > 0 ? tokens / gen_s : 0.0;
    if (kv16 > 0) {
      // Over all samples: bytes held / elements cached (an element is 2 bytes at fp16, K and V
      // each half of kv_bytes_fp16).
      s["mean_kv_bytes"] = kvb / rows.size();
      s["mean_kv_bytes_fp16"] = kv16 / rows.size();
      s["kv_bits_effective"] = 16.0 * kvb / kv16;
      if (kvk + kvv > 0) {
        s["kv_bits_effective_k"] = 32.0 * kvk / kv16;
        s["kv_bits_effective_v"] = 32.0 * kvv / kv16;
      }
    }
    if (rows.front().contains("kv_method")) s["kv_method"] = rows.front()["kv_method"];
  }
  return s;
}

// A sample record as run_eval writes it: the fields the summary reads have their types (a hand-
// edited or corrupted file is refused naming its line, never a type_error deep in a summary).
bool well_formed_sample(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("task_id") || !j["task_id"].is_string()) return false;
  for (const char* k : {"extracted", "gold", "status", "detail", "group", "kv_method"})
    if (j.contains(k) && !j[k].is_string()) return false;
  for (const char* k : {"gen_s", "score_s", "prompt_tokens", "gen_tokens", "nfe", "steps",
                        "kv_bytes", "kv_bytes_k", "kv_bytes_v", "kv_bytes_fp16", "doc"})
    if (j.contains(k) && !j[k].is_number()) return false;
  if (j.contains("correct") && !j["correct"].is_boolean()) return false;
  if (j.contains("metrics") && !j["metrics"].is_object()) return false;
  return true;
}

}  // namespace

std::vector<nlohmann::json> read_samples(const std::string& path, bool repair) {
  std::vector<nlohmann::json> rows;
  if (!fs::exists(path)) return rows;
  const std::string text = read_text_file(path);
  size_t good_end = 0, line_no = 0;
  for (size_t a = 0; a < text.size();) {
    size_t b = text.find('\n', a);
    const bool complete = b != std::string::npos;
    if (!complete) b = text.size();
    ++line_no;
    const std::string_view line(text.data() + a, b - a);
    auto j = parse_json_or_discarded(line);
    const bool ok = complete && !j.is_discarded() && well_formed_sample(j);
    if (!ok) {
      if (b + 1 < text.size())
        fail("{}:{}: corrupt sample record (not the last line)", path, line_no);
      break;  // torn final line from a kill: dropped, the sample is redone
    }
    rows.push_back(std::move(j));
    a = b + 1;
    good_end = a;
  }
  if (repair && good_end < text.size()) fs::resize_file(path, good_end);
  return rows;
}

nlohmann::json run_eval(const Task& task, const GenerateFn& gen, const RunOptions& opt,
                        const ScoreEnv& env) {
  if (opt.out_dir.empty()) fail("--out: a run directory is required for runs with generation");
  fs::create_directories(opt.out_dir);
  const fs::path dir = opt.out_dir;
  const std::string samples_path = (dir / samples_file_name(opt.shard, opt.num_shards)).string();
  nlohmann::json config = opt.config;
  config["task"] = task.name();
  config["metrics"] = task.metric_names();
  config["lm_eval_conventions"] = "v0.4.8";
  const fs::path config_path = dir / "config.json";
  if (fs::exists(config_path)) {
    const auto old = parse_json_or_discarded(read_text_file(config_path.string()));
    if (!opt.resume && fs::exists(samples_path) && fs::file_size(samples_path) > 0)
      fail(
          "{}: run directory already has samples; pass --resume to continue it or choose a new "
          "--out",
          opt.out_dir);
    if (opt.resume && !old.is_discarded()) {
      for (const auto& [k, v] : config.items())
        if (k != "limit" && old.contains(k) && old[k] != v)
          fail("{}: --resume with a different '{}' ({} before, {} now)", config_path.string(), k,
               json_text(old[k]), json_text(v));
      // Written only when not the default (an exact fp32 run has neither): absent on one side
      // means the default, so an approximate run never continues an exact one, or back.
      for (const char* k : {"dtype", "w8a8"}) {
        const nlohmann::json before = old.contains(k) ? old[k] : nlohmann::json("default");
        const nlohmann::json now = config.contains(k) ? config[k] : nlohmann::json("default");
        if (before != now)
          fail("{}: --resume with a different '{}' ({} before, {} now)", config_path.string(), k,
               json_text(before), json_text(now));
      }
    }
  }
  write_text(config_path, json_text(config, 2) + "\n");

  std::vector<nlohmann::json> rows = read_samples(samples_path, /*repair=*/true);
  std::set<std::string> done;
  for (const auto& r : rows) done.insert(r["task_id"].get<std::string>());

  const size_t n_docs = opt.limit ? std::min(opt.limit, task.size()) : task.size();
  std::vector<size_t> todo;
  size_t shard_total = 0;
  for (size_t i = 0; i < n_docs; ++i) {
    if (static_cast<int>(i % opt.num_shards) != opt.shard) continue;
    ++shard_total;
    if (!done.count(task.task_id(i))) todo.push_back(i);
  }
  const std::string head = task.metric_names().front();
  double correct = 0;
  for (const auto& r : rows) correct += r.value("correct", false) ? 1 : 0;
  size_t finished = rows.size();
  Progress bar(task.name(), shard_total);
  bar.update(finished, finished ? correct / finished : -1.0);

  LineAppender out(samples_path);
  ScoreEnv quiet = env;
  quiet.on_progress = nullptr;
  std::vector<std::string> notes;  // from every score() call of this session, each once
  for (size_t i : todo) {
    const std::string prompt = task.prompt(i);
    const GenOutput g = gen(i, prompt);
    const auto t0 = std::chrono::steady_clock::now();
    SampleScore s = task.score({i}, {g.text}, quiet).front();
    for (const std::string& n : task.notes())
      if (std::find(notes.begin(), notes.end(), n) == notes.end() && notes.size() < 20)
        notes.push_back(n);
    const double score_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    nlohmann::json j = sample_json(s);
    j["doc"] = i;
    j["prompt"] = prompt;
    j["response"] = g.text;
    j["correct"] = s.metrics[head].value_or(0.0) > 0.5;
    j["gen_s"] = g.time_s;
    j["score_s"] = score_s;
    j["prompt_tokens"] = g.prompt_tokens;
    j["gen_tokens"] = g.gen_tokens;
    j["nfe"] = g.nfe;
    j["steps"] = g.steps;
    j["kv_bytes"] = g.kv_bytes;
    j["kv_bytes_k"] = g.kv_bytes_k;
    j["kv_bytes_v"] = g.kv_bytes_v;
    j["kv_bytes_fp16"] = g.kv_bytes_fp16;
    if (!g.kv_method.empty()) j["kv_method"] = g.kv_method;
    out.append(json_text(j));
    correct += j["correct"].get<bool>() ? 1 : 0;
    ++finished;
    bar.update(finished, correct / finished);
    rows.push_back(std::move(j));
  }
  bar.finish();

  nlohmann::json summary = summary_from_samples(task.name(), task.metric_names(), rows);
  if (!notes.empty()) summary["notes"] = notes;
  summary["n_expected"] = shard_total;
  if (opt.num_shards > 1) summary["shard"] = fmt::format("{}/{}", opt.shard, opt.num_shards);
  for (const auto& [k, v] : opt.model_facts.items()) summary[k] = v;
  summary["config"] = config;
  const std::string stem = summary_stem(opt.shard, opt.num_shards);
  write_text(dir / (stem + ".json"), json_text(summary, 2) + "\n");
  write_text(dir / (stem + ".md"), summary_markdown(summary));
  return summary;
}

nlohmann::json merge_runs(const std::vector<std::string>& run_dirs, const std::string& out_dir) {
  if (run_dirs.empty()) fail("eval merge: give at least one run directory");
  std::string task;
  std::vector<std::string> metrics;
  nlohmann::json config;
  std::vector<nlohmann::json> rows;
  std::set<std::string> seen;
  size_t duplicates = 0;
  nlohmann::json model_facts = nlohmann::json::object();
  for (const std::string& d : run_dirs) {
    const fs::path cp = fs::path(d) / "config.json";
    if (!fs::exists(cp)) fail("{}: not a run directory (no config.json)", d);
    const auto c = parse_json_or_discarded(read_text_file(cp.string()));
    const bool metrics_ok = c.is_object() && c.contains("metrics") && c["metrics"].is_array() &&
                            std::all_of(c["metrics"].begin(), c["metrics"].end(),
                                        [](const nlohmann::json& m) { return m.is_string(); });
    if (c.is_discarded() || !c.is_object() || !c.contains("task") || !c["task"].is_string() ||
        !metrics_ok)
      fail("{}: unreadable config (needs a string 'task' and a list of metric names 'metrics')",
           cp.string());
    if (task.empty()) {
      task = c["task"];
      metrics = c["metrics"].get<std::vector<std::string>>();
      config = c;
    } else if (c["task"] != task) {
      fail("{}: task {} differs from {}", cp.string(), c["task"].get<std::string>(), task);
    }
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(d)) {
      const std::string name = e.path().filename().string();
      if (name.starts_with("samples") && name.ends_with(".jsonl")) files.push_back(e.path());
      // The model facts (weight bytes and format) of the shards' own summaries: the same model
      // wrote every shard, so the first one found stands for all.
      if (name.starts_with("summary") && name.ends_with(".json") && model_facts.empty()) {
        const auto sj = parse_json_or_discarded(read_text_file(e.path().string()));
        if (sj.is_object())
          for (const char* k : kModelFactKeys)
            if (sj.contains(k)) model_facts[k] = sj[k];
      }
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files)
      for (auto& r : read_samples(f.string(), false)) {
        if (!seen.insert(r["task_id"].get<std::string>()).second) {
          ++duplicates;
          continue;
        }
        rows.push_back(std::move(r));
      }
  }
  nlohmann::json summary = summary_from_samples(task, metrics, rows);
  summary["duplicates_dropped"] = duplicates;
  for (const auto& [k, v] : model_facts.items()) summary[k] = v;
  summary["config"] = config;
  if (!out_dir.empty()) {
    fs::create_directories(out_dir);
    std::string all;
    for (const auto& r : rows) all += json_text(r) + "\n";
    write_text(fs::path(out_dir) / "samples.merged.jsonl", all);
    write_text(fs::path(out_dir) / "summary.merged.json", json_text(summary, 2) + "\n");
    write_text(fs::path(out_dir) / "summary.merged.md", summary_markdown(summary));
  }
  return summary;
}

}  // namespace dllmq::eval
