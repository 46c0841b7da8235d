// dllmq tokenize: text -> ids (and pieces), ids -> text, and an encode-throughput benchmark.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/model_names.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/error.h"
#include "util/json_limits.h"

namespace dllmq::cli {

namespace {

namespace fs = std::filesystem;

struct TokenizeArgs {
  std::string model, tokenizer, text, text_file, ids, bench, system;
  bool json = false, no_special = false, skip_special = false, chat = false, ids_only = false,
       no_cache = false;
  // Whether --text / --ids were given: the empty string is valid text (no ids) and an empty
  // --ids list decodes to empty text, so emptiness cannot mean "absent".
  bool has_text = false, has_ids = false;
  int repeat = 3;
};

// FILE: a directory (model dir), tokenizer.json, *.tiktoken (Qwen pattern + Dream specials) or
// vocab.json (merges.txt beside it).
std::unique_ptr<Tokenizer> open_tokenizer(const TokenizeArgs& a) {
  if (!a.model.empty() && !a.tokenizer.empty())
    fail("tokenize: give either -m/--model or --tokenizer, not both");
  if (a.model.empty() && a.tokenizer.empty())
    fail("tokenize: needs -m/--model DIR or --tokenizer FILE");
  if (!a.model.empty()) {
    auto t = load_tokenizer_for_model(a.model);
    if (!t) fail("{}", missing_tokenizer_message(a.model));
    return t;
  }
  const fs::path p(a.tokenizer);
  if (fs::is_directory(p)) {
    auto t = load_tokenizer_for_model(a.tokenizer);
    if (!t) fail("{}", missing_tokenizer_message(a.tokenizer));
    return t;
  }
  if (!fs::exists(p)) fail("{}: no such file", a.tokenizer);
  if (p.extension() == ".tiktoken") return load_tiktoken(a.tokenizer, qwen_special_tokens());
  if (p.filename() == "vocab.json")
    return load_vocab_merges(a.tokenizer, (p.parent_path() / "merges.txt").string());
  return load_tokenizer_json(a.tokenizer);
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("{}: cannot open file", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Encodes FILE single-threaded, line by line and as one string, `repeat` timed passes each after
// one warm-up pass; reports the best pass of each.
void run_bench(const Tokenizer& tok, const TokenizeArgs& a) {
  const std::string data = read_all(a.bench);
  std::vector<std::string_view> lines;
  for (size_t i = 0; i < data.size();) {
    size_t j = data.find('\n', i);
    j = j == std::string::npos ? data.size() : j + 1;
    lines.push_back(std::string_view(data).substr(i, j - i));
    i = j;
  }
  auto time_best = [&](auto&& pass, size_t& n_tokens) {
    n_tokens = pass();  // warm-up
    double best = 1e300;
    for (int r = 0; r < std::max(1, a.repeat); ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      pass();
      best = std::min(best,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
  };
  size_t n_lines_tokens = 0, n_whole_tokens = 0;
  const double t_lines = time_best(
      [&] {
        size_t n = 0;
        for (auto l : lines) n += tok.encode(l).size();
        return n;
      },
      n_lines_tokens);
  const double t_whole = time_best([&] { return tok.encode(data).size(); }, n_whole_tokens);
  const double mb = data.size() / 1e6;
  if (a.json) {
    std::puts(nlohmann::json{{"file", a.bench},
                             {"tokenizer", tok.source()},
                             {"bytes", data.size()},
                             {"lines", lines.size()},
                             {"cache", !a.no_cache},
                             {"repeat", a.repeat},
                             {"lines_tokens", n_lines_tokens},
                             {"lines_seconds", t_lines},
                             {"lines_mb_per_s", mb / t_lines},
                             {"whole_tokens", n_whole_tokens},
                             {"whole_seconds", t_whole},
                             {"whole_mb_per_s", mb / t_whole}}
                  .dump()
                  .c_str());
    return;
  }
  fmt::print("tokenizer  {}\nfile       {} ({} bytes, {} lines)\n", tok.source(), a.bench,
             data.size(), lines.size());
  fmt::print("by line    {:.2f} MB/s ({} tokens, best of {} single-thread passes: {:.3f} s){}\n",
             mb / t_lines, n_lines_tokens, a.repeat, t_lines, a.no_cache ? ", word cache off" : "");
  fmt::print("whole file {:.2f} MB/s ({} tokens, best of {} single-thread passes: {:.3f} s){}\n",
             mb / t_whole, n_whole_tokens, a.repeat, t_whole, a.no_cache ? ", word cache off" : "");
}

void run(const TokenizeArgs& a) {
  const auto tok = open_tokenizer(a);
  if (a.no_cache) tok->set_cache_enabled(false);
  if (!a.bench.empty()) return run_bench(*tok, a);
  if (a.has_ids) {
    const auto ids = a.ids.empty() ? std::vector<int32_t>{} : parse_id_list(a.ids, "--ids");
    const std::string text = tok->decode(ids, a.skip_special);
    if (a.json)
      std::puts(nlohmann::json{{"ids", ids}, {"text", text}}.dump().c_str());
    else
      std::fwrite(text.data(), 1, text.size(), stdout), std::puts("");
    return;
  }
  const int n_inputs = a.has_text + !a.text_file.empty();
  if (n_inputs != 1) fail("tokenize: give exactly one of --text, --file, --ids or --bench");
  std::string text = a.has_text ? a.text : read_all(a.text_file);
  if (a.chat) {
    auto fmt_ = chat_format_for(*tok);
    if (!fmt_)
      fail(
          "{}: --chat: tokenizer has neither LLaDA (<|start_header_id|>) nor Qwen (<|im_start|>) "
          "chat tokens",
          tok->source());
    text = render_chat(*fmt_, text,
                       a.system.empty() ? std::nullopt : std::optional<std::string_view>(a.system));
  }
  const auto ids = tok->encode(text, !a.no_special);
  if (a.ids_only) {
    fmt::print("{}\n", fmt::join(ids, ","));
    return;
  }
  std::vector<std::string> tokens, pieces;
  for (int32_t id : ids) {
    tokens.push_back(tok->id_to_token(id).value_or(""));
    pieces.push_back(utf8_lossy(tok->token_bytes(id).value_or("")));
  }
  if (a.json) {
    nlohmann::json j{
        {"ids", ids}, {"tokens", tokens}, {"pieces", pieces}, {"n_tokens", ids.size()}};
    if (a.chat) j["text"] = text;
    std::puts(json_text(j).c_str());
    return;
  }
  fmt::print("{}\n", fmt::join(ids, ","));
  std::vector<std::string> quoted;
  for (auto& p : pieces) quoted.push_back(nlohmann::json(p).dump());
  fmt::print("{} tokens: {}\n", ids.size(), fmt::join(quoted, " "));
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("tokenize", "Text -> token ids (and back) with a model's tokenizer");
  auto a = std::make_shared<TokenizeArgs>();
  cmd->add_option("-m,--model", a->model,
                  "model directory (tokenizer.json, vocab.json+merges.txt or *.tiktoken)")
      ->transform(model_name_transform());
  cmd->add_option(
      "--tokenizer", a->tokenizer,
      "tokenizer file instead of a model: tokenizer.json, vocab.json (merges.txt beside it) or a "
      ".tiktoken rank file (Qwen2 pattern and Dream specials)");
  auto* text_opt = cmd->add_option("--text", a->text, "text to encode (may be empty: no ids)");
  cmd->add_option("--file", a->text_file, "encode the contents of this file");
  auto* ids_opt = cmd->add_option("--ids", a->ids, "decode these comma-separated ids instead");
  cmd->add_flag("--skip-special", a->skip_special, "with --ids: drop special tokens");
  cmd->add_flag("--no-special", a->no_special, "encode special-token strings as plain text");
  cmd->add_flag("--chat", a->chat, "wrap the text in the model's chat template first");
  cmd->add_option("--system", a->system, "with --chat: system message");
  cmd->add_flag("--json", a->json, "print one JSON object");
  cmd->add_flag("--ids-only", a->ids_only, "print only the comma-separated ids");
  cmd->add_option("--bench", a->bench,
                  "measure single-thread encode MB/s over this file (line by line)");
  cmd->add_flag("--no-cache", a->no_cache,
                "with --bench: disable the per-word cache (raw BPE speed)");
  cmd->add_option("--repeat", a->repeat, "with --bench: timed passes (best is reported)");
  cmd->callback([a, text_opt, ids_opt] {
    a->has_text = text_opt->count() > 0;
    a->has_ids = ids_opt->count() > 0;
    run(*a);
  });
}

}  // namespace dllmq::cli
