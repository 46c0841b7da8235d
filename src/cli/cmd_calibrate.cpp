// dllmq calibrate: builds a calibration artifact for a quantized KV store from prompt/answer
// pairs (METHODS.md §2-4):
//   --trajectory ar      one full forward over the pair, every token revealed (KVQuant's own);
//                        for dllm-kvq followed by one dual-cache step per answer block
//   --trajectory trace   teacher-forced reveal replay through the real block driver and cache
//                        policy (ranked by the reference token's probability, --rank)
//   --trajectory random  the same schedule with a uniformly random reveal order
//   --method kvquant     thresholds and codebooks from the rows the steps read
//   --method dllm-kvq    channel scores, layer sensitivities, budget split, fp16 K channels
#include <chrono>
#include <cmath>

#include <fmt/core.h>

#include "cache/dense_kv_store.h"
#include "calib/fisher.h"
#include "calib/kvquant_calibrator.h"
#include "calib/pairs.h"
#include "calib/state_dump.h"
#include "calib/trace_calibrator.h"
#include "calib/trajectory_stats.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/model_names.h"
#include "cli/settings_names.h"
#include "decode/teacher.h"
#include "eval/calib_pairs.h"
#include "io/calib_artifact.h"
#include "util/error.h"
#include "util/memory.h"

namespace dllmq::cli {

namespace {

struct CalibArgs {
  std::string model;
  std::string data;
  std::string method = "kvquant";
  std::string trajectory = "ar";
  std::optional<int> bits, bits_k, bits_v;
  double outlier_percent = 1.0;
  int sink = 1;
  size_t limit = 0;
  int reservoir_rows = 2048;
  uint64_t seed = 0;
  bool chat = false;
  std::string system;
  std::string out;
  int threads = 0;
  GenerateFlags gen;  // the decoding configuration TRACE replays (cache, lengths, schedule)
  // dllm-kvq: the base codec its channels are scored with (--kv-base, --kv-base-calib).
  std::string kv_base = "kivi", kv_base_calib;
  std::string rank = "reference";
  double budget = 0.05, budget_floor = 0.25, budget_cap = 4.0;
  bool no_sensitivity = false;
  int sensitivity_pairs = 0;
  std::string score_weight = "none";
  std::string fisher;  // --fisher: diffusion | none (default diffusion for kvquant)
  std::string task;    // --task: --data holds the task's records, converted (eval/calib_pairs.h)
  eval::PairSourceOptions source;
  std::string dump_states, stats;
};

// Sends one forward's per-layer tensors to two observers (kvquant ar with --stats/--dump-states).
struct TeeObserver final : LayerObserver {
  LayerObserver *a, *b;
  TeeObserver(LayerObserver* x, LayerObserver* y) : a(x), b(y) {}
  void on_forward(const ForwardArgs& f) override { a->on_forward(f), b->on_forward(f); }
  void on_kv(int l, int p, int n, const float* k, const float* v) override {
    a->on_kv(l, p, n, k, v), b->on_kv(l, p, n, k, v);
  }
  void on_query(int l, int p, int n, const float* q) override {
    a->on_query(l, p, n, q), b->on_query(l, p, n, q);
  }
  void on_layer(int l, int p, int n, const float* k, const float* v, const float* o) override {
    a->on_layer(l, p, n, k, v, o), b->on_layer(l, p, n, k, v, o);
  }
};

// --stats: what the calibration's trajectory read, per layer and region.
void save_stats(const CalibArgs& a, const TraceCalibrator& tc, const std::string& cache) {
  if (a.stats.empty()) return;
  write_trajectory_stats(a.stats, tc,
                         {{"trajectory", a.trajectory},
                          {"method", a.method},
                          {"cache", cache},
                          {"data", a.data},
                          {"rank", a.rank}});
  fmt::print(stderr, "dllmq calibrate: trajectory statistics -> {}\n", a.stats);
}

// dLLM-KVQ under `ar`: one full forward over prompt + target writes every row, then one
// dual-cache step per answer block reads the rest as held (every token revealed).
void ar_states(Model& m, const std::vector<int32_t>& ids, int P, int block, TraceCalibrator& tc) {
  const ModelConfig& cfg = m.config();
  const int N = int(ids.size());
  DenseKvStore store({cfg.n_layers, cfg.n_kv_heads, cfg.head_dim}, DType::kF32, m.rope());
  store.reset(N);
  m.reserve_positions(N);
  ForwardArgs f;
  f.ids = ids;
  f.store = &store;
  f.write = {0, N};
  f.active = {P, std::min(N, P + block)};
  f.observer = &tc;
  m.forward(f, nullptr);
  std::vector<float> logits;
  for (int s = P; s < N; s += block) {
    const int e = std::min(N, s + block);
    ForwardArgs g;
    g.ids = std::span<const int32_t>(ids).subspan(s, e - s);
    g.pos0 = s;
    g.store = &store;
    g.cached = {{0, s}, {e, N}};
    g.active = {s, e};
    g.logits = {std::max(s - cfg.logits_shift, s), e};
    g.observer = &tc;
    logits.resize(size_t(g.logits.size()) * cfg.vocab_size);
    m.forward(g, logits.data());
    tc.after_forward(m, g, logits.data());
  }
}

KvQuantCalibOptions kvq_options(const CalibArgs& a) {
  KvQuantCalibOptions o;
  o.fisher = a.fisher == "diffusion";
  o.bits_k = a.bits_k.value_or(a.bits.value_or(4));
  o.bits_v = a.bits_v.value_or(a.bits.value_or(4));
  o.outlier_percent = a.outlier_percent;
  o.sink = a.sink;
  o.reservoir_rows = a.reservoir_rows;
  o.seed = a.seed;
  return o;
}

void fill_provenance(CalibArtifact& art, const CalibArgs& a, const Model& m, size_t n_pairs,
                     int64_t tokens, const std::string& data_hash) {
  const ModelConfig& cfg = m.config();
  art.model_fingerprint = m.fingerprint();
  art.n_layers = cfg.n_layers;
  art.n_kv_heads = cfg.n_kv_heads;
  art.head_dim = cfg.head_dim;
  art.n_pairs = int64_t(n_pairs);
  art.n_tokens = tokens;
  art.data_hash = data_hash;
  art.extra["data"] = a.data;
  art.extra["seed"] = std::to_string(a.seed);
}

// TRACE / random trajectories (both methods) and dLLM-KVQ under ar.
void run_trace(const CalibArgs& a, Model& m, const std::vector<CalibPair>& pairs,
               const std::string& data_hash, const std::string& dir) {
  const ModelConfig& cfg = m.config();
  GenerateOptions go = resolve_generate_flags(a.gen, dir);
  if (go.cache == CacheMode::kNone && a.method == "dllm-kvq" && a.trajectory != "ar")
    fail(
        "--cache none with --method dllm-kvq: nothing is cached, so no channel can be scored; give "
        "--cache prefix or dual");
  TraceCalibOptions o;
  o.method = a.method;
  o.kvq = kvq_options(a);
  o.bits_k = a.bits_k.value_or(a.bits.value_or(2));
  o.bits_v = a.bits_v.value_or(a.bits.value_or(2));
  o.group = a.gen.kv_group;
  if (a.kv_base == "kvquant") {
    const CalibArtifact& c = o.base_codec.emplace(load_calib_artifact(a.kv_base_calib));
    check_calib_matches(c, a.kv_base_calib, m.fingerprint(), cfg.n_layers, cfg.n_kv_heads,
                        cfg.head_dim);
    if (c.method != "kvquant")
      fail("--kv-base-calib {}: a {} artifact, where a kvquant artifact is needed", a.kv_base_calib,
           c.method);
    if ((a.bits_k || a.bits) && o.bits_k != c.bits_k)
      fail("--kv-bits: --kv-base-calib {} codes K at {} bits, {} asked", a.kv_base_calib, c.bits_k,
           o.bits_k);
    if ((a.bits_v || a.bits) && o.bits_v != c.bits_v)
      fail("--kv-bits: --kv-base-calib {} codes V at {} bits, {} asked", a.kv_base_calib, c.bits_v,
           o.bits_v);
    o.bits_k = c.bits_k;
    o.bits_v = c.bits_v;
  }
  o.budget = a.budget;
  o.floor = a.budget_floor;
  o.cap = a.budget_cap;
  o.threshold = go.threshold;
  o.sensitivity = !a.no_sensitivity;
  o.sensitivity_pairs = a.sensitivity_pairs;
  o.score_weight = parse_score_weight(a.score_weight);
  o.fisher = a.method == "kvquant" && a.fisher == "diffusion";
  TraceCalibrator tc(cfg, m.rope(), o);
  std::unique_ptr<StateDump> dump;
  if (!a.dump_states.empty())
    tc.set_dump((dump = std::make_unique<StateDump>(a.dump_states)).get());
  const TeacherRank rank =
      a.trajectory == "random" ? TeacherRank::kRandom : parse_teacher_rank(a.rank);
  fmt::print(stderr, "dllmq calibrate: {} | {} {} (rank {}) | {} | {} pairs from {}\n", dir,
             a.method, a.trajectory, teacher_rank_name(rank), describe(go, cfg), pairs.size(),
             a.data);
  const auto t0 = std::chrono::steady_clock::now();
  int64_t tokens = 0, off_target = 0;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const CalibPair& p = pairs[i];
    const auto target = teacher_target(p.answer, go.gen_length, cfg.eos_id);
    const int P = int(p.prompt.size()), N = P + go.gen_length;
    if (cfg.max_seq > 0 && N > cfg.max_seq)
      fail("{}: pair {}: prompt {} + gen length {} exceeds the model's {} positions", p.where,
           i + 1, P, go.gen_length, cfg.max_seq);
    tc.begin_pair(N, P, target);
    if (dump) dump->pair(int(i), a.trajectory, p.prompt, N, target);
    if (a.trajectory == "ar") {
      std::vector<int32_t> ids = p.prompt;
      ids.insert(ids.end(), target.begin(), target.end());
      ar_states(m, ids, P, go.block_length, tc);
    } else {
      GenerateOptions g = go;
      g.kv = KvSpec{};  // the exact store: the trajectory the decoder itself would follow
      g.teacher = TeacherForcing{target, rank};
      g.observer = &tc;
      g.probe = &tc;
      g.seed = a.seed + i;
      StepCallback on_step;
      if (dump)
        on_step = [&](const StepInfo& s) { dump->step(s.step, s.block, s.revealed, s.canvas); };
      GenerateResult r;
      try {
        r = generate(m, p.prompt, g, on_step);
      } catch (const Error& e) {
        fail("{}: {}", p.where, e.what());  // e.g. an empty prompt for Dream: name the record
      }
      off_target += r.tokens != target;
    }
    tokens += N;
    if ((i + 1) % 16 == 0 || i + 1 == pairs.size())
      fmt::print(stderr, "  {} / {} pairs, {:.1f} s\n", i + 1, pairs.size(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (off_target > 0)
    fail(
        "calibrate: {} of {} trajectories did not end in the reference answer (a schedule that "
        "leaves masks, e.g. Dream block mode with one step per block)",
        off_target, pairs.size());
  CalibArtifact art = tc.finish();
  const double total_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (dump) dump->close();
  save_stats(a, tc, a.trajectory == "ar" ? "none" : cache_mode_name(go.cache));
  art.trajectory = a.trajectory;
  fill_provenance(art, a, m, pairs.size(), tokens, data_hash);
  art.extra["cache"] = cache_mode_name(go.cache);
  art.extra["gen_length"] = std::to_string(go.gen_length);
  art.extra["block_length"] = std::to_string(go.block_length);
  art.extra["schedule"] =
      go.threshold ? fmt::format("threshold {}", *go.threshold) : fmt::format("steps {}", go.steps);
  art.extra["rank"] = teacher_rank_name(rank);
  if (a.method == "dllm-kvq")
    art.extra["sensitivity_pairs"] =
        a.no_sensitivity ? "0"
                         : std::to_string(a.sensitivity_pairs > 0
                                              ? std::min<size_t>(a.sensitivity_pairs, pairs.size())
                                              : pairs.size());
  art.extra["rows_observed"] = std::to_string(tc.rows_observed());
  if (a.method == "kvquant") art.extra["reservoir_rows"] = std::to_string(a.reservoir_rows);
  save_calib_artifact(art, a.out);
  if (a.method == "dllm-kvq") {
    fmt::print(stderr, "  layer  mean KL   changed   fp16 channels\n");
    for (int l = 0; l < cfg.n_layers; ++l) {
      const auto& s = tc.sensitivity()[l];
      fmt::print(stderr, "  {:>5}  {:.3e}  {:>4}/{:<4}  {}\n", l, s.mean_kl(), s.changed, s.steps,
                 art.layers[l].k_fp16_channels.size());
    }
  }
  fmt::print(stderr,
             "dllmq calibrate: {} pairs ({} canvas tokens, {} rows read per layer) in {:.2f} s "
             "({:.1f} ms per pair), peak RSS {:.1f} MiB -> {}\n",
             pairs.size(), tokens, tc.rows_observed(), total_s,
             1e3 * total_s / double(pairs.size()), peak_rss_bytes() / 1048576.0, a.out);
}

void run(const CalibArgs& a) {
  if (a.method != "kvquant" && a.method != "dllm-kvq")
    fail("--method {}: expected kvquant or dllm-kvq", a.method);
  (void)parse_score_weight(a.score_weight);  // names the flag when unknown
  if (a.score_weight != "none" && a.method != "dllm-kvq")
    fail("--score-weight applies to --method dllm-kvq only");
  if (a.score_weight == "fisher" && a.trajectory == "ar")
    fail(
        "--score-weight fisher with --trajectory ar: the ar canvas has no masked position, so the "
        "masked-diffusion loss has no gradient there; use --trajectory trace or random");
  if (a.fisher != "diffusion" && a.fisher != "none")
    fail("--fisher {}: expected diffusion or none", a.fisher);
  if (a.fisher == "diffusion" && a.method != "kvquant")
    fail("--fisher applies to --method kvquant (dllm-kvq uses --score-weight fisher)");
  if (a.trajectory != "ar" && a.trajectory != "trace" && a.trajectory != "random")
    fail("--trajectory {}: expected ar, trace or random", a.trajectory);
  if (a.out.empty()) fail("--out FILE is required");
  apply_threads(a.threads);
  const std::string dir = a.model.empty() ? default_model_dir() : a.model;
  auto model = Model::load(dir);
  const ModelConfig& cfg = model->config();

  PairTokenizer tok;
  std::unique_ptr<TextCodec> codec = std::make_unique<TextCodec>(*model);
  // As its eval does, the synth task always puts the question in the chat template.
  const bool chat = a.chat || (!a.task.empty() && eval::task_forces_chat(a.task));
  if (codec->available()) {
    TextCodec* c = codec.get();
    tok.prompt = [c, chat, sys = a.system](const std::string& t) {
      return c->prompt_ids(t, chat, sys);
    };
    tok.answer = [c](const std::string& t) { return c->text_ids(t); };
  }
  std::string data_hash;
  std::vector<CalibPair> pairs;
  if (a.task.empty()) {
    pairs = read_calib_pairs(a.data, tok, cfg.vocab_size, a.limit, &data_hash);
  } else {
    eval::PairSourceOptions so = a.source;
    so.limit = a.limit;
    pairs = tokenize_text_pairs(eval::convert_records(a.task, a.data, so), tok, cfg.vocab_size,
                                &data_hash);
  }

  if (a.method == "dllm-kvq" || a.trajectory != "ar") {
    run_trace(a, *model, pairs, data_hash, dir);
    return;
  }
  const KvQuantCalibOptions o = kvq_options(a);
  KvQuantCalibrator cal(cfg, o);
  // --stats / --dump-states: an observing TraceCalibrator sees the same forwards.
  std::unique_ptr<TraceCalibrator> watch;
  std::unique_ptr<StateDump> dump;
  if (!a.stats.empty() || !a.dump_states.empty()) {
    TraceCalibOptions wo;
    wo.method = "observe";
    watch = std::make_unique<TraceCalibrator>(cfg, model->rope(), wo);
    if (!a.dump_states.empty())
      watch->set_dump((dump = std::make_unique<StateDump>(a.dump_states)).get());
  }
  TeeObserver tee(&cal, watch.get());
  PositionFisher fisher(cfg.n_layers, cfg.kv_dim());
  if (o.fisher) cal.set_position_fisher(&fisher);
  fmt::print(stderr,
             "dllmq calibrate: {} | kvquant ar | K {} / V {} bits | Fisher {} | {} pairs from {}\n",
             dir, o.bits_k, o.bits_v, a.fisher, pairs.size(), a.data);
  const auto t0 = std::chrono::steady_clock::now();
  int64_t tokens = 0;
  for (size_t i = 0; i < pairs.size(); ++i) {
    std::vector<int32_t> ids = pairs[i].prompt;
    ids.insert(ids.end(), pairs[i].answer.begin(), pairs[i].answer.end());
    if (int64_t(ids.size()) > cfg.max_seq && cfg.max_seq > 0)
      fail("{}: pair {} has {} tokens, the model takes at most {}", pairs[i].where, i + 1,
           ids.size(), cfg.max_seq);
    model->reserve_positions(int(ids.size()));
    const int P = int(pairs[i].prompt.size());
    if (watch) watch->begin_pair(int(ids.size()), P, pairs[i].answer);
    if (dump) dump->pair(int(i), a.trajectory, pairs[i].prompt, int(ids.size()), pairs[i].answer);
    if (o.fisher) {
      // The weights of this pair's rows: the masked-diffusion loss of a masked copy of it.
      KvGradSink to_dump;
      if (dump) to_dump = [&](const LayerKvGrad& g) { dump->grads(false, g); };
      try {
        fisher.compute(*model, pairs[i].prompt, pairs[i].answer, a.seed + i, to_dump);
      } catch (const Error& e) {
        fail("{}: {}", pairs[i].where, e.what());  // the record this pair came from
      }
      if (dump) dump->fisher(false, fisher.ids(), 0, {}, fisher.terms(), fisher.loss());
    }
    ForwardArgs f;
    f.ids = ids;
    f.observer = watch ? static_cast<LayerObserver*>(&tee) : &cal;
    model->forward(f, nullptr);
    tokens += int64_t(ids.size());
  }
  const double fwd_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CalibArtifact art = cal.finish();
  if (dump) dump->close();
  if (watch) save_stats(a, *watch, "none");
  const double total_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fill_provenance(art, a, *model, pairs.size(), tokens, data_hash);
  art.extra["reservoir_rows"] = std::to_string(a.reservoir_rows);
  art.extra["rows_observed"] = std::to_string(cal.rows_seen());
  save_calib_artifact(art, a.out);
  fmt::print(stderr,
             "dllmq calibrate: {} tokens ({} rows past the sink per layer) in {:.2f} s (forwards "
             "{:.2f} s, statistics {:.2f} s; {:.1f} ms per pair), peak RSS {:.1f} MiB -> {}\n",
             tokens, cal.rows_seen(), total_s, fwd_s, total_s - fwd_s,
             1e3 * total_s / double(pairs.size()), peak_rss_bytes() / 1048576.0, a.out);
}

}  // namespace

void register_calibrate(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "calibrate", "Calibrate a quantized KV store (KVQuant thresholds and codebooks) on pairs");
  auto a = std::make_shared<CalibArgs>();
  cmd->add_option("-m,--model", a->model,
                  "model directory or short name (" + embedded_model_names() +
                      "; default: the embedded model)")
      ->transform(model_name_transform());
  cmd->add_option("--data", a->data,
                  "JSONL pairs: {\"prompt\", \"answer\"} text or {\"prompt_ids\", \"answer_ids\"}; "
                  "with --task, that task's records")
      ->required();
  cmd->add_option("--task", a->task,
                  "gsm8k | math | mbpp | synth: --data holds the task's records, made into pairs "
                  "with its eval prompt (as `dllmq make-pairs`)");
  cmd->add_option("--shots", a->source.shots, "--task gsm8k: few-shot pool (default: --data)");
  cmd->add_option("--split", a->source.split, "--task mbpp: train | validation | test")
      ->capture_default_str();
  cmd->add_option("--score-weight", a->score_weight,
                  "dllm-kvq channel score: none (every query x cached row alike) | attention "
                  "(weighted by the step's attention probability of the row) | fisher (the "
                  "masked-diffusion loss gradient in place of the queries)")
      ->capture_default_str();
  cmd->add_option("--fisher", a->fisher,
                  "kvquant codebooks: diffusion (k-means weighted by the squared gradient of the "
                  "masked-diffusion loss, KVQuant's Fisher weighting; default) | none (\"noF\")");
  cmd->add_option("--dump-states", a->dump_states,
                  "write every observed state (forwards, rows read, queries, reveal steps) as "
                  "JSONL here (tiny models)");
  cmd->add_option("--stats", a->stats,
                  "write the per-layer, per-region K/V ranges the trajectory read (JSON) here");
  cmd->add_option("--method", a->method, "kvquant | dllm-kvq")->capture_default_str();
  cmd->add_option("--trajectory", a->trajectory,
                  "ar: full forward, every token revealed (KVQuant's own) | trace: "
                  "teacher-forced reveal replay through the decoder | random: same schedule, "
                  "random reveal order")
      ->capture_default_str();
  cmd->add_option("--rank", a->rank,
                  "trace: rank masked positions by the reference token's probability "
                  "(reference) or the model's max probability (confidence)")
      ->capture_default_str();
  cmd->add_option("--budget", a->budget, "dllm-kvq: share of all K channels kept at fp16")
      ->capture_default_str();
  cmd->add_option("--budget-floor", a->budget_floor,
                  "dllm-kvq: least per-layer share, x the uniform share")
      ->capture_default_str();
  cmd->add_option("--budget-cap", a->budget_cap,
                  "dllm-kvq: largest per-layer share, x the uniform share")
      ->capture_default_str();
  cmd->add_flag("--no-sensitivity", a->no_sensitivity,
                "dllm-kvq: skip the output-level pass (uniform layer shares)");
  cmd->add_option("--sensitivity-pairs", a->sensitivity_pairs,
                  "dllm-kvq: run the output-level pass (one extra forward per layer and cached "
                  "step) on the first N pairs only; 0 = every pair")
      ->capture_default_str();
  add_generate_flags(cmd, a->gen);
  cmd->add_option("--outlier-percent", a->outlier_percent,
                  "share of K/V values kept as sparse fp16 outliers (percentiles p/2, 100-p/2)")
      ->capture_default_str();
  cmd->add_option("--sink", a->sink, "leading canvas positions kept at fp16 (attention sink)")
      ->capture_default_str();
  cmd->add_option("--limit", a->limit, "first N pairs only (0 = all)")->capture_default_str();
  cmd->add_option("--reservoir-rows", a->reservoir_rows,
                  "token rows kept per layer for the statistics (bounded memory; exact below)")
      ->capture_default_str();

  cmd->add_flag("--chat", a->chat, "apply the model's chat template to text prompts");
  cmd->add_option("--system", a->system, "system message for --chat");
  cmd->add_option("--out", a->out, "artifact path (written to a temporary file and renamed)")
      ->required();
  cmd->callback([a] {
    if (a->fisher.empty()) a->fisher = a->method == "kvquant" ? "diffusion" : "none";
    a->seed = a->gen.seed;
    a->threads = a->gen.threads;
    // --kv-bits* name the bits to calibrate for, not the replay's store (which stays exact).
    a->bits = a->gen.kv_bits;
    a->bits_k = a->gen.kv_bits_k;
    a->bits_v = a->gen.kv_bits_v;
    a->gen.kv_bits.reset();
    a->gen.kv_bits_k.reset();
    a->gen.kv_bits_v.reset();
    // --kv-base* name the codec dllm-kvq's channels are scored with, not the replay's store.
    a->kv_base = a->gen.kv_base;
    a->kv_base_calib = a->gen.kv_base_calib;
    a->gen.kv_base = "kivi";
    a->gen.kv_base_calib.clear();
    if (a->kv_base != "kivi" && a->kv_base != "kvquant")
      fail("--kv-base '{}': accepted values are kivi and kvquant", a->kv_base);
    if (a->kv_base == "kvquant" && a->method != "dllm-kvq")
      fail("--kv-base kvquant is for --method dllm-kvq (the codec its channels are scored with)");
    if (a->kv_base == "kvquant" && a->kv_base_calib.empty())
      fail(
          "--kv-base kvquant needs --kv-base-calib FILE (a `dllmq calibrate --method kvquant` "
          "artifact)");
    if (a->kv_base != "kvquant" && !a->kv_base_calib.empty())
      fail("--kv-base-calib is for --kv-base kvquant only");
    if (a->gen.w8a8)
      fail(
          "calibrate replays decoding with the exact kernels (its gradients need them); --w8a8 "
          "applies to generate, eval, serve and bench");
    if (!a->gen.kv.empty() || !a->gen.calib.empty() || !a->gen.kv_channels.empty())
      fail(
          "calibrate replays decoding with the exact fp32 store; --kv, --calib and "
          "--kv-channels do not apply");
    run(*a);
  });
}

}  // namespace dllmq::cli
