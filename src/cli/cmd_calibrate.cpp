// dllmq calibrate: builds a calibration artifact for a quantized KV store from prompt/answer
// pairs. Today: KVQuant's own calibration (--method kvquant --trajectory ar, one full forward
// over prompt+answer with every token revealed). TRACE trajectories and dLLM-KVQ channel
// selection are the next step (METHODS.md §3-4) and are refused with a message until then.
#include <chrono>
#include <cmath>

#include <fmt/core.h>

#include "calib/kvquant_calibrator.h"
#include "calib/pairs.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/generate_flags.h"
#include "cli/text_codec.h"
#include "io/calib_artifact.h"
#include "util/error.h"

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
};

void run(const CalibArgs& a) {
  if (a.method != "kvquant")
    fail("--method {}: only kvquant is calibrated so far (dllm-kvq channel selection comes with "
         "TRACE); give the dllm-kvq channels with --kv-channels meanwhile",
         a.method);
  if (a.trajectory != "ar")
    fail("--trajectory {}: only ar (KVQuant's full forward) is built so far; trace and random "
         "come with TRACE",
         a.trajectory);
  if (a.out.empty()) fail("--out FILE is required");
  apply_threads(a.threads);
  const std::string dir = a.model.empty() ? default_model_dir() : a.model;
  auto model = Model::load(dir);
  const ModelConfig& cfg = model->config();

  PairTokenizer tok;
  std::unique_ptr<TextCodec> codec = std::make_unique<TextCodec>(*model);
  if (codec->available()) {
    TextCodec* c = codec.get();
    tok.prompt = [c, chat = a.chat, sys = a.system](const std::string& t) {
      return c->prompt_ids(t, chat, sys);
    };
    tok.answer = [c](const std::string& t) { return c->text_ids(t); };
  }
  std::string data_hash;
  const auto pairs = read_calib_pairs(a.data, tok, cfg.vocab_size, a.limit, &data_hash);

  KvQuantCalibOptions o;
  o.bits_k = a.bits_k.value_or(a.bits.value_or(4));
  o.bits_v = a.bits_v.value_or(a.bits.value_or(4));
  o.outlier_percent = a.outlier_percent;
  o.sink = a.sink;
  o.reservoir_rows = a.reservoir_rows;
  o.seed = a.seed;
  KvQuantCalibrator cal(cfg, o);
  fmt::print(stderr, "dllmq calibrate: {} | kvquant ar | K {} / V {} bits | {} pairs from {}\n",
             dir, o.bits_k, o.bits_v, pairs.size(), a.data);
  const auto t0 = std::chrono::steady_clock::now();
  int64_t tokens = 0;
  for (size_t i = 0; i < pairs.size(); ++i) {
    std::vector<int32_t> ids = pairs[i].prompt;
    ids.insert(ids.end(), pairs[i].answer.begin(), pairs[i].answer.end());
    if (int64_t(ids.size()) > cfg.max_seq && cfg.max_seq > 0)
      fail("{}: pair {} has {} tokens, the model takes at most {}", a.data, i + 1, ids.size(),
           cfg.max_seq);
    model->reserve_positions(int(ids.size()));
    ForwardArgs f;
    f.ids = ids;
    f.observer = &cal;
    model->forward(f, nullptr);
    tokens += int64_t(ids.size());
  }
  const double fwd_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CalibArtifact art = cal.finish();
  const double total_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  art.model_fingerprint = model->fingerprint();
  art.n_layers = cfg.n_layers;
  art.n_kv_heads = cfg.n_kv_heads;
  art.head_dim = cfg.head_dim;
  art.n_pairs = int64_t(pairs.size());
  art.n_tokens = tokens;
  art.data_hash = data_hash;
  art.extra["data"] = a.data;
  art.extra["reservoir_rows"] = std::to_string(a.reservoir_rows);
  art.extra["rows_observed"] = std::to_string(cal.rows_seen());
  art.extra["seed"] = std::to_string(a.seed);
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
  cmd->add_option("-m,--model", a->model, "model directory (default: the embedded model)");
  cmd->add_option("--data", a->data,
                  "JSONL pairs: {\"prompt\", \"answer\"} text or {\"prompt_ids\", \"answer_ids\"}")
      ->required();
  cmd->add_option("--method", a->method, "kvquant (dllm-kvq comes with TRACE)")
      ->capture_default_str();
  cmd->add_option("--trajectory", a->trajectory,
                  "ar: one full forward over prompt+answer (KVQuant's own)")
      ->capture_default_str();
  cmd->add_option("--kv-bits", a->bits, "codebook bits for K and V: 2, 3, 4 or 8 (default 4)");
  cmd->add_option("--kv-bits-k", a->bits_k, "codebook bits for K only");
  cmd->add_option("--kv-bits-v", a->bits_v, "codebook bits for V only");
  cmd->add_option("--outlier-percent", a->outlier_percent,
                  "share of K/V values kept as sparse fp16 outliers (percentiles p/2, 100-p/2)")
      ->capture_default_str();
  cmd->add_option("--sink", a->sink, "leading canvas positions kept at fp16 (attention sink)")
      ->capture_default_str();
  cmd->add_option("--limit", a->limit, "first N pairs only (0 = all)")->capture_default_str();
  cmd->add_option("--reservoir-rows", a->reservoir_rows,
                  "token rows kept per layer for the statistics (bounded memory; exact below)")
      ->capture_default_str();
  cmd->add_option("--seed", a->seed, "reservoir sampling seed")->capture_default_str();
  cmd->add_flag("--chat", a->chat, "apply the model's chat template to text prompts");
  cmd->add_option("--system", a->system, "system message for --chat");
  cmd->add_option("--out", a->out, "artifact path (written to a temporary file and renamed)")
      ->required();
  cmd->add_option("--threads", a->threads, "OpenMP threads (0 = all cores)")->capture_default_str();
  cmd->callback([a] { run(*a); });
}

}  // namespace dllmq::cli
