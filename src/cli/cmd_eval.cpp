// dllmq eval: benchmark scoring with lm-eval v0.4.8 conventions (docs/eval.md).
//   score only:       dllmq eval --task T --data PATH --responses FILE.jsonl [--chat] [--json]
//   with generation:  dllmq eval --task T --data PATH -m DIR [generation flags] --out RUN_DIR
//                                [--limit N] [--shard i/n] [--resume]
//   merge shards:     dllmq eval merge RUN_DIR... [--out DIR] [--json]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/model_names.h"
#include "cli/settings_names.h"
#include "decode/generate.h"
#include "eval/data.h"
#include "eval/math_equiv_client.h"
#include "eval/progress.h"
#include "eval/report.h"
#include "eval/run.h"
#include "eval/score_only.h"
#include "eval/task.h"
#include "model/weights.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_limits.h"

namespace dllmq::cli {

namespace {

using namespace dllmq::eval;

// The system interpreter: programs run as an unprivileged uid that cannot enter /root (pyenv).
std::string default_python() {
  return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

struct EvalArgs {
  std::string task, data, responses, subset, train, details, python = default_python(), math_equiv,
                                                             eval_python;
  bool chat = false, json = false, no_stop = false, no_sympy = false;
  int workers = 2;
  double timeout = 3.0;  // HF code_eval's (lm-eval's) timeout per program
  double math_phase_timeout = 60.0;
  size_t mem_mb = 4096;
  // generation runs
  std::string model, out, shard = "0/1", system, fake_responses, show_prompt;
  size_t limit = 0;
  bool resume = false;
  int fake_delay_ms = 0;
  GenerateFlags gen;
  // merge
  std::vector<std::string> merge_dirs;
  std::string merge_out;
};

SandboxOptions sandbox_options(const EvalArgs& a) {
  SandboxOptions o;
  o.python = a.python;
  o.timeout_s = a.timeout;
  o.mem_mb = a.mem_mb;
  o.workers = a.workers;
  // Hide the inputs from the programs: the data, the responses and the run directory.
  for (const std::string& p : {a.data, a.responses, a.out, a.model})
    if (!p.empty())
      o.hide.push_back(
          std::filesystem::is_directory(p) ? p : std::filesystem::path(p).parent_path().string());
  return o;
}

bool is_code_task(const std::string& t) {
  return t == "humaneval" || t == "mbpp";
}

void print_summary(const nlohmann::json& s, bool json) {
  if (json) {
    std::puts(json_text(s).c_str());
    return;
  }
  std::fputs(summary_markdown(s).c_str(), stdout);
}

void score_only(const EvalArgs& a, const Task& task, const ScoreEnv& env_in) {
  ScoreEnv env = env_in;
  std::unique_ptr<Progress> p;
  std::mutex mu;  // code tasks report from the sandbox worker threads
  env.on_progress = [&](size_t done, size_t total) {
    std::lock_guard lock(mu);
    if (!p) p = std::make_unique<Progress>(task.name(), total);
    p->update(done);
  };
  const ScoredRun run = score_responses(task, a.responses, env);
  if (p) p->finish();
  if (!a.details.empty()) {
    std::string text;
    for (const auto& s : run.samples) text += json_text(sample_json(s)) + "\n";
    write_file_atomic(a.details, text);
  }
  print_summary(run.summary, a.json);
}

// Test double for the generation path: answers from a responses file, optionally slowly.
GenerateFn fake_generator(const EvalArgs& a, const Task& task) {
  auto answers = std::make_shared<std::map<size_t, std::string>>();
  const auto rows = read_jsonl(a.fake_responses);
  for (size_t k = 0; k < rows.size(); ++k) {
    const auto i = task.find(task_id_string(rows[k]["task_id"], a.fake_responses, k + 1));
    if (i) (*answers)[*i] = rows[k].value("response", "");
  }
  const int delay = a.fake_delay_ms;
  return [answers, delay](size_t doc, const std::string&) {
    if (delay > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    GenOutput g;
    const auto it = answers->find(doc);
    g.text = it == answers->end() ? "" : it->second;
    g.time_s = delay / 1000.0;
    return g;
  };
}

void generation_run(const EvalArgs& a, const Task& task, const ScoreEnv& env) {
  RunOptions ro;
  ro.out_dir = a.out;
  ro.limit = a.limit;
  std::tie(ro.shard, ro.num_shards) = parse_shard(a.shard);
  ro.resume = a.resume;
  ro.config = {{"data", a.data}, {"chat", a.chat}, {"subset", a.subset}, {"limit", a.limit}};
  std::unique_ptr<Model> model;
  std::unique_ptr<TextCodec> codec;
  GenerateFn gen;
  if (!a.fake_responses.empty()) {
    ro.config["generator"] = "fake:" + a.fake_responses;
    gen = fake_generator(a, task);
  } else {
    apply_threads(a.gen.threads);
    model = Model::load(a.model, resolve_compute_dtype(a.gen));  // packed once, for its kernels
    apply_compute_flags(a.gen, *model);
    if (a.gen.dtype != "fp32") ro.config["dtype"] = a.gen.dtype;  // fp32 runs keep their config
    // An approximation: never resumed into an exact run, or back (the kernel may differ between
    // machines: the VNNI kernel and its twin give the same bits).
    if (a.gen.w8a8) ro.config["w8a8"] = true;
    codec = std::make_unique<TextCodec>(*model);
    const GenerateOptions opt = resolve_generate_flags(a.gen, a.model);
    ro.config["model"] = a.model;
    ro.config["generation"] = describe(opt, model->config());
    ro.config["system"] = a.system;
    // What the weights cost, beside the KV bytes (the grid's weights x KV table adds the two).
    ro.model_facts = model_weight_facts(*model);
    fmt::print(stderr, "dllmq eval: {} | {}{}\n", a.model, describe(opt, model->config()),
               describe_w8a8(*model));
    Model* m = model.get();
    TextCodec* c = codec.get();
    // Instruct models: the whole lm-eval context (shots included) is one user turn.
    gen = [m, c, opt, chat = a.chat, system = a.system](size_t, const std::string& prompt) {
      const std::vector<int32_t> ids = c->prompt_ids(prompt, chat, system);
      const GenerateResult r = generate(*m, ids, opt);
      GenOutput g;
      g.text = c->answer_text(r.tokens);
      g.prompt_tokens = static_cast<int>(ids.size());
      g.gen_tokens = 0;
      for (int32_t t : r.tokens) {
        if (t == m->config().eos_id || t == c->eot_id()) break;
        ++g.gen_tokens;
      }
      g.nfe = r.nfe;
      g.steps = r.steps;
      g.time_s = r.time_s;
      g.kv_bytes = r.kv_bytes;
      g.kv_bytes_k = r.kv_bytes_k;
      g.kv_bytes_v = r.kv_bytes_v;
      g.kv_bytes_fp16 = r.kv_bytes_fp16;
      g.kv_method = r.kv_method;
      return g;
    };
  }
  const nlohmann::json summary = run_eval(task, gen, ro, env);
  print_summary(summary, a.json);
}

// The MATH scorer's interpreter: --eval-python, else $DLLMQ_EVAL_PYTHON, else the project's
// .venv-eval (made by scripts/setup.sh) found beside the binary or in the source tree.
std::string eval_python(const EvalArgs& a) {
  if (!a.eval_python.empty()) return a.eval_python;
  if (const char* e = std::getenv("DLLMQ_EVAL_PYTHON"); e && *e) return e;
  return repo_path(".venv-eval/bin/python");
}

// Starts the MATH helper (lm-eval's sympy exact_match and math_verify) for this run, or says
// loudly why those metrics will be null.
void setup_math_scorer(const EvalArgs& a, ScoreEnv& env) {
  if (a.no_sympy) {
    env.math_off = "--no-sympy given";
    return;
  }
  const std::string py = eval_python(a);
  std::string why;
  if (py.empty()) {
    why = "no Python environment for MATH scoring (.venv-eval/ not found beside the binary or in " +
          std::string(DLLMQ_SOURCE_DIR) + ")";
  } else {
    std::string script = a.math_equiv;
    if (script.empty() && !std::getenv("DLLMQ_MATH_EQUIV"))
      script = repo_path("tools/eval/math_equiv.py");
    if (script.empty()) script = default_math_equiv_helper();
    auto helper = std::make_shared<MathHelper>(py, script, a.workers);
    helper->phase_timeout_s = a.math_phase_timeout;
    if (helper->ready(&why)) {
      env.math = std::move(helper);
      return;
    }
  }
  env.math_off = why + "; " + kMathEnvHint;
  fmt::print(stderr,
             "dllmq eval: WARNING: MATH exact_match and math_verify will not be computed: {}\n",
             env.math_off);
}

// `--task synth` is the embedded model's own task: its test set, the embedded model and its chat
// format are the defaults, and a run directory is named when none is given.
EvalArgs with_synth_defaults(EvalArgs a) {
  if (a.task != "synth") return a;
  if (a.data.empty()) a.data = repo_path("data/synth/test.jsonl");
  if (a.responses.empty() && a.model.empty() && a.fake_responses.empty())
    a.model = default_model_dir();
  if (!a.model.empty() && a.out.empty())
    a.out = fmt::format("runs/synth-{}-{}", a.gen.cache,
                        std::chrono::system_clock::now().time_since_epoch().count());
  a.chat = true;  // the task's prompts are user turns of the chat template
  return a;
}

void run_eval(const EvalArgs& args) {
  const EvalArgs a = with_synth_defaults(args);
  if (a.task.empty()) fail("--task is required (gsm8k, math, humaneval, mbpp, synth)");
  if (a.data.empty()) fail("--data is required (the task's data file)");
  if (!a.show_prompt.empty()) {
    TaskOptions topt;
    topt.chat = a.chat;
    topt.subset = a.subset;
    topt.train_path = a.train;
    const auto task = make_task(a.task, a.data, topt);
    const auto i = task->find(a.show_prompt);
    if (!i) fail("--show-prompt {}: no such task_id in {}", a.show_prompt, a.data);
    const std::string p = task->prompt(*i);
    std::fwrite(p.data(), 1, p.size(), stdout);
    return;
  }
  const bool score = !a.responses.empty();
  const bool gen = !a.model.empty() || !a.fake_responses.empty();
  if (score == gen)
    fail("give either --responses FILE (score only) or -m DIR --out RUN_DIR (generate and score)");
  if (a.workers < 1) fail("--workers {}: must be at least 1", a.workers);
  if (a.timeout <= 0) fail("--timeout {}: must be positive", a.timeout);
  TaskOptions topt;
  topt.chat = a.chat;
  topt.subset = a.subset;
  topt.train_path = a.train;
  topt.apply_stop = !a.no_stop;
  const auto task = make_task(a.task, a.data, topt);
  std::unique_ptr<Sandbox> sandbox;
  ScoreEnv env;
  env.workers = a.workers;
  if (is_code_task(a.task)) {
    sandbox = std::make_unique<Sandbox>(sandbox_options(a));
    env.sandbox = sandbox.get();
    if (!a.json) fmt::print(stderr, "dllmq eval: sandbox isolation {}\n", sandbox->isolation());
  }
  if (a.task == "math") setup_math_scorer(a, env);
  if (score)
    score_only(a, *task, env);
  else
    generation_run(a, *task, env);
}

}  // namespace

void register_eval(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "eval",
      "Score benchmark responses (gsm8k, math, humaneval, mbpp), optionally generating them");
  auto a = std::make_shared<EvalArgs>();
  cmd->add_option("--task", a->task, "gsm8k | math | humaneval | mbpp");
  cmd->add_option("--data", a->data,
                  "task data file (math: file or directory holding test.jsonl, math500/)");
  cmd->add_option("--responses", a->responses, "score only: JSONL of {task_id, response}");
  cmd->add_flag("--chat", a->chat,
                "instruct model: chat template for prompts, Fast-dLLM code post-processing");
  cmd->add_flag("--json", a->json, "print one JSON object");
  cmd->add_option("--subset", a->subset, "math: math500");
  cmd->add_option("--train", a->train,
                  "gsm8k: few-shot source (default: train.jsonl beside --data)");
  cmd->add_option("--show-prompt", a->show_prompt,
                  "print the plain-text prompt of this task_id and exit");
  cmd->add_option("--details", a->details, "score only: write per-sample results as JSONL");
  cmd->add_flag("--no-stop", a->no_stop, "do not cut responses at the task's stop strings");
  cmd->add_option("--workers", a->workers,
                  "parallel sandboxed programs / MATH helper processes (default 2)");
  cmd->add_option("--timeout", a->timeout,
                  "seconds per program, as HF code_eval's timeout (default 3, lm-eval's)");
  cmd->add_option("--mem-mb", a->mem_mb, "address-space limit per program in MiB (default 4096)");
  cmd->add_option("--python", a->python,
                  "python3 that runs code samples in the sandbox (default /usr/bin/python3)");
  cmd->add_option("--eval-python", a->eval_python,
                  "math: Python with sympy, antlr4 4.11, math-verify (default $DLLMQ_EVAL_PYTHON, "
                  "else .venv-eval/bin/python of the project)");
  cmd->add_flag("--no-sympy", a->no_sympy,
                "math: skip lm-eval's exact_match and math_verify (null); string_equiv only");
  cmd->add_option("--math-equiv", a->math_equiv, "math: path of tools/eval/math_equiv.py");
  cmd->add_option("--math-phase-timeout", a->math_phase_timeout,
                  "math: seconds before a helper that does not answer is killed (default 60)")
      ->group("");
  cmd->add_option(
         "-m,--model", a->model,
         "generate with this model directory or short name (" + embedded_model_names() + ")")
      ->transform(model_name_transform());
  cmd->add_option("--out", a->out, "run directory (samples JSONL, config, summary)");
  cmd->add_option("--limit", a->limit, "only the first N documents");
  cmd->add_option("--shard", a->shard, "i/n: documents with index % n == i");
  cmd->add_flag("--resume", a->resume, "continue the run in --out, skipping finished samples");
  cmd->add_option("--system", a->system, "system message for --chat");
  cmd->add_option("--fake-responses", a->fake_responses,
                  "testing: 'generate' by looking answers up in a JSONL")
      ->group("");
  cmd->add_option("--fake-delay-ms", a->fake_delay_ms, "testing: delay per fake generation")
      ->group("");
  add_generate_flags(cmd, a->gen);

  auto* merge =
      cmd->add_subcommand("merge", "Combine the shard files of run directories into one summary");
  merge->add_option("dirs", a->merge_dirs, "run directories")->required();
  merge->add_option("--out", a->merge_out,
                    "write samples.merged.jsonl and summary.merged.{json,md} here");
  merge->add_flag("--json", a->json, "print one JSON object");
  merge->callback([a] { print_summary(merge_runs(a->merge_dirs, a->merge_out), a->json); });
  cmd->require_subcommand(0, 1);
  cmd->callback([a, merge] {
    if (merge->parsed()) return;
    run_eval(*a);
  });
}

}  // namespace dllmq::cli
