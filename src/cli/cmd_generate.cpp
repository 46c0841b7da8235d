// dllmq generate: prompt -> answer with diffusion decoding (block driver, Fast-dLLM caches).
#include <unistd.h>

#include <cstdio>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/model_names.h"
#include "cli/settings_names.h"
#include "decode/generate.h"
#include "util/error.h"
#include "util/memory.h"

namespace dllmq::cli {

namespace {

struct GenerateArgs {
  std::string model, prompt, prompt_ids, system;
  std::string teacher_ids, teacher_rank = "reference";
  bool chat = false, show_steps = false, json = false;
  GenerateFlags gen;
};

// Redraws the generated region: revealed tokens as text, masks as a shaded cell.
void draw_canvas(const TextCodec& codec, const StepInfo& s, int mask_id, bool tty) {
  std::string line;
  for (size_t p = s.prompt_length; p < s.canvas.size(); ++p) {
    const int32_t id = s.canvas[p];
    if (id == mask_id) {
      line += "\u2591";
    } else {
      std::string piece = codec.piece(id);
      for (char& c : piece)
        if (c == '\n') c = ' ';
      line += piece;
    }
  }
  if (tty)
    fmt::print(stderr, "\033[2J\033[H[step {:>4}  block {:>3}  +{} tokens]\n{}\n", s.step, s.block,
               s.revealed.size(), line);
  else
    fmt::print(stderr, "step {} block {} +{}: {}\n", s.step, s.block, s.revealed.size(), line);
}

void run_generate(const GenerateArgs& a) {
  apply_threads(a.gen.threads);
  const std::string dir = a.model.empty() ? default_model_dir() : a.model;
  auto model = Model::load(dir, resolve_compute_dtype(a.gen));  // packed once, for its kernels
  apply_compute_flags(a.gen, *model);
  const ModelConfig& cfg = model->config();
  TextCodec codec(*model);
  if (a.prompt.empty() == a.prompt_ids.empty())
    fail("give exactly one of --prompt TEXT and --prompt-ids IDS");
  std::vector<int32_t> prompt = a.prompt_ids.empty() ? codec.prompt_ids(a.prompt, a.chat, a.system)
                                                     : parse_id_list(a.prompt_ids, "--prompt-ids");
  GenerateOptions opt = resolve_generate_flags(a.gen, dir);
  opt.eot_id = codec.eot_id();
  if (!a.teacher_ids.empty()) {
    // TRACE's trajectory (METHODS.md §3), for inspection and tests: reveal the reference ids.
    const auto ref = parse_id_list(a.teacher_ids, "--teacher-ids");
    for (int32_t t : ref)
      if (t < 0 || t >= cfg.vocab_size)
        fail("--teacher-ids: id {} outside the vocabulary [0, {})", t, cfg.vocab_size);
    opt.teacher = TeacherForcing{teacher_target(ref, opt.gen_length, cfg.eos_id),
                                 parse_teacher_rank(a.teacher_rank)};
  }
  fmt::print(stderr, "dllmq: model {} | prompt {} tokens | {}{}\n", dir, prompt.size(),
             describe(opt, cfg), describe_w8a8(*model));

  const bool tty = isatty(STDERR_FILENO);
  size_t printed = 0;                                     // bytes of answer text already streamed
  nlohmann::json reveal_steps = nlohmann::json::array();  // positions revealed at each step
  nlohmann::json step_blocks = nlohmann::json::array();   // block index of each step
  int streamed_blocks = 0;
  auto on_step = [&](const StepInfo& s) {
    if (a.json) {
      reveal_steps.push_back(std::vector<int>(s.revealed.begin(), s.revealed.end()));
      step_blocks.push_back(s.block);
    }
    if (a.show_steps) draw_canvas(codec, s, cfg.mask_id, tty);
    if (a.json || a.show_steps || !codec.available()) return;
    // Stream the answer as blocks complete: print what the completed prefix decodes to.
    const int P = s.prompt_length, B = opt.block_length;
    int done = 0;
    while (P + (done + 1) * B <= int(s.canvas.size())) {
      bool full = true;
      for (int p = P + done * B; p < P + (done + 1) * B; ++p) full &= s.canvas[p] != cfg.mask_id;
      if (!full) break;
      ++done;
    }
    if (done <= streamed_blocks) return;
    streamed_blocks = done;
    const std::string text = codec.answer_text(s.canvas.subspan(P, size_t(done) * B));
    if (text.size() > printed) {
      std::fwrite(text.data() + printed, 1, text.size() - printed, stdout);
      std::fflush(stdout);
      printed = text.size();
    }
  };
  const GenerateResult r = generate(*model, prompt, opt, on_step);
  const std::string text = codec.answer_text(r.tokens);
  const double tps = r.time_s > 0 ? r.tokens.size() / r.time_s : 0.0;
  if (a.json) {
    nlohmann::json j = {{"tokens", r.tokens},
                        {"nfe", r.nfe},
                        {"steps", r.steps},
                        {"time_s", r.time_s},
                        {"tokens_per_s", tps},
                        {"kv_bytes", r.kv_bytes},
                        {"kv_bytes_k", r.kv_bytes_k},
                        {"kv_bytes_v", r.kv_bytes_v},
                        {"kv_bytes_fp16", r.kv_bytes_fp16},
                        {"kv_store", r.kv_store},
                        {"kv_method", r.kv_method},
                        {"kv_bits", r.kv_bits_k == r.kv_bits_v
                                        ? nlohmann::json(r.kv_bits_k)
                                        : nlohmann::json{{"k", r.kv_bits_k}, {"v", r.kv_bits_v}}},
                        {"kv_bits_effective_k", r.kv_bits_effective_k()},
                        {"kv_bits_effective_v", r.kv_bits_effective_v()},
                        {"prompt_tokens", prompt.size()},
                        {"peak_rss_bytes", peak_rss_bytes()}};
    j.update(model_weight_facts(*model));
    if (codec.available()) j["text"] = text;
    j["reveal_steps"] = std::move(reveal_steps);
    j["step_blocks"] = std::move(step_blocks);
    std::puts(j.dump().c_str());
    return;
  }
  if (!codec.available()) {
    std::string ids;
    for (size_t i = 0; i < r.tokens.size(); ++i)
      ids += fmt::format("{}{}", i ? "," : "", r.tokens[i]);
    std::puts(ids.c_str());
  } else {
    if (text.size() > printed) std::fwrite(text.data() + printed, 1, text.size() - printed, stdout);
    std::fputc('\n', stdout);
  }
  std::fflush(stdout);  // the answer before the stats line, also when both go to one pipe
  fmt::print(
      stderr,
      "dllmq: {} tokens in {:.2f} s ({:.1f} tokens/s), NFE {}, steps {}, KV {} {} bytes ({} at "
      "fp16; {:.2f} / {:.2f} effective bits K / V), peak RSS {:.1f} MiB\n",
      r.tokens.size(), r.time_s, tps, r.nfe, r.steps, r.kv_store, r.kv_bytes, r.kv_bytes_fp16,
      r.kv_bits_effective_k(), r.kv_bits_effective_v(), peak_rss_bytes() / 1048576.0);
}

}  // namespace

void register_generate(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "Generate an answer with diffusion decoding");
  auto a = std::make_shared<GenerateArgs>();
  cmd->add_option("-m,--model", a->model,
                  "model directory or short name (" + embedded_model_names() +
                      "; default: the embedded dllmq-synth-tiny)")
      ->transform(model_name_transform());
  cmd->add_option("-p,--prompt", a->prompt, "prompt text (tokenized with the model's tokenizer)");
  cmd->add_option("--prompt-ids", a->prompt_ids, "prompt token ids, used as given (no BOS added)");
  cmd->add_flag("--chat", a->chat, "wrap --prompt in the model's chat template");
  cmd->add_option("--system", a->system, "system message for --chat");
  cmd->add_flag("--show-steps", a->show_steps,
                "redraw the canvas on stderr as tokens are revealed");
  cmd->add_flag("--json", a->json, "print one JSON object");
  cmd->add_option("--teacher-ids", a->teacher_ids,
                  "TRACE trajectory: reveal these reference ids (padded with EOS to the gen "
                  "length) in the order the schedule and --teacher-rank choose");
  cmd->add_option("--teacher-rank", a->teacher_rank,
                  "with --teacher-ids: reference (probability of the reference token), "
                  "confidence (max probability) or random")
      ->capture_default_str();
  add_generate_flags(cmd, a->gen);
  cmd->callback([a] { run_generate(*a); });
}

}  // namespace dllmq::cli
