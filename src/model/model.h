// A loaded LLaDA or Dream model and its forward pass: f32 or bf16 projections (ComputeDType),
// f32 everything else, 16-bit weights in place.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cache/kv_store.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/moe.h"
#include "model/weights.h"
#include "ops/linear.h"
#include "ops/rope.h"

namespace dllmq {

// Sees the per-layer tensors of a forward (error tracing, calibration, tests).
class LayerObserver {
 public:
  virtual ~LayerObserver() = default;
  // Rows are the fresh rows of this forward, canvas positions [pos0, pos0 + n).
  // k_rot: [n, kv_dim] post-RoPE, v: [n, kv_dim], attn: [n, n_heads*hd] attention output.
  virtual void on_layer(int layer, int pos0, int n, const float* k_rot, const float* v,
                        const float* attn) = 0;
  // The same fresh rows before RoPE (k_pre: [n, kv_dim]), as a store receives them; called
  // before on_layer. Calibration of pre-RoPE stores (KVQuant) listens here.
  virtual void on_kv(int layer, int pos0, int n, const float* k_pre, const float* v) {}
  // Called once at the start of a forward with its arguments (which rows are cached, written).
  virtual void on_forward(const struct ForwardArgs& args) {}
  // The fresh rows' queries after RoPE, q_rot: [n, n_heads * hd]; called before on_layer.
  virtual void on_query(int layer, int pos0, int n, const float* q_rot) {}
};

struct ForwardArgs {
  std::span<const int32_t> ids;  // tokens of the rows computed now (contiguous canvas slice)
  int pos0 = 0;                  // canvas position of ids[0]
  KvStore* store = nullptr;
  std::vector<PosRange> cached;  // store rows attended to besides the fresh rows
  PosRange write;                // canvas rows whose fresh K/V are written to the store
  PosRange logits;               // canvas rows whose raw logits are computed (subset of fresh rows)
  // Rows of `logits` that need them, as ascending offsets from logits.begin (the decoder's still
  // masked positions): when not empty only these rows get the final norm and the LM head, each
  // into its own row of the output, and the output's other rows are left as they were. The LM
  // head is one product per row, so each computed row has the bits it has when every row is
  // computed (on the packed and AMX kernels). Empty: every row of `logits`.
  // The last layer's output projection and MLP run on these rows (or `logits`' rows) alone, and
  // the other rows' final hidden states are never computed (model/output_rows.h); every row when
  // the forward asks for no logits or an observer watches.
  std::vector<int> logit_rows;
  PosRange active;  // the decoder's active block (a label for observers; may be empty)
  LayerObserver* observer = nullptr;

  int n_logit_rows() const {
    return logit_rows.empty() ? logits.size() : static_cast<int>(logit_rows.size());
  }
};

// One canvas of a batched forward: its arguments and where its logits rows go
// ([args->logits.size(), vocab_size]).
struct CanvasForward {
  const ForwardArgs* args = nullptr;
  float* logits = nullptr;
};

// How forward_batch multiplies several canvases' rows by a weight matrix.
enum class BatchGemm {
  kAuto,       // kStacked where the check below passes, else kPerCanvas
  kPerCanvas,  // one GEMM per canvas, of the shape its batch-1 forward uses: exact by construction
  // The stacked rows of all canvases of 16 rows or more in fixed-shape tiles
  // (model/stacked_gemm.h): fewer, larger products (faster at the small row counts of cached
  // steps), exact only where the GEMM library gives each row the same bits whatever rows it is
  // stacked with; kAuto uses it only after checking that it does.
  kStacked,
};
BatchGemm parse_batch_gemm(const std::string& s);  // auto | per-canvas | stacked; throws otherwise
const char* batch_gemm_name(BatchGemm m);

// Runs a decoder's forwards. Model::forward by default; batched decoding puts a runner here that
// joins the forwards of several decoders into one Model::forward_batch (decode/batch.h).
class ForwardRunner {
 public:
  virtual ~ForwardRunner() = default;
  virtual void forward(const ForwardArgs& args, float* logits) = 0;
};

// Time and work of one kind of operation summed over forwards: wall and process CPU seconds
// (CPU / wall = cores busy), model FLOPs and bytes the operation must move at least (weights
// once per call, activations, K/V rows read), for roofline reports.
struct PhaseStat {
  double wall_s = 0.0;
  double cpu_s = 0.0;
  double flops = 0.0;
  double bytes = 0.0;
};

struct ForwardProfile {
  PhaseStat proj;   // the seven projections of every layer
  PhaseStat attn;   // attention over fresh and cached rows
  PhaseStat head;   // final norm + LM head on the rows that need logits
  PhaseStat other;  // embedding, norms, RoPE, residuals, SwiGLU, KV store writes
  int64_t forwards = 0;
  int64_t logit_rows = 0;  // rows of logits produced (what sampling reads)
  double wall_s() const { return proj.wall_s + attn.wall_s + head.wall_s + other.wall_s; }
  double cpu_s() const { return proj.cpu_s + attn.cpu_s + head.cpu_s + other.cpu_s; }
};

// The attention sources of one layer in canvas order: `cached[i]`'s source is `src[i]`, and the
// fresh rows (at pos0) go before the first cached range that starts after them. Softmax does not
// care; the order keeps the summation close to the references, which attend left to right.
template <typename Source>
void sources_in_canvas_order(const std::vector<PosRange>& cached, const std::vector<Source>& src,
                             const KvRowSource* fresh, int pos0,
                             std::vector<const KvRowSource*>& out) {
  out.clear();
  bool fresh_added = false;
  for (size_t i = 0; i < src.size(); ++i) {
    if (!fresh_added && cached[i].begin > pos0) {
      out.push_back(fresh);
      fresh_added = true;
    }
    out.push_back(&src[i]);
  }
  if (!fresh_added) out.push_back(fresh);
}

class Model {
 public:
  // Maps the checkpoint and packs every weight for the kernels of compute dtype `dt` (bf16 on AMX
  // tiles has its own layout; set_compute_dtype repacks what differs later), so a command that
  // knows its --dtype packs once.
  static std::unique_ptr<Model> load(const std::string& dir, ComputeDType dt = ComputeDType::kF32);

  const ModelConfig& config() const { return cfg_; }
  const ModelWeights& weights() const { return w_; }
  const Checkpoint& checkpoint() const { return *ckpt_; }
  const RopeTable& rope() const { return rope_; }
  const std::string& dir() const { return dir_; }
  // Identifies the checkpoint (geometry, tensor names/shapes/dtypes and sampled weight bytes) so
  // calibration artifacts can refuse another model. Hex string, computed once.
  const std::string& fingerprint() const;

  // Precision of the projections and LM head (default f32). Attention, norms, RoPE and softmax
  // are f32 whatever it is.
  // Setting it repacks the weights whose layout the new dtype's kernels do not read (bf16
  // compute on AMX tiles has a layout of its own, ops/amx_gemm.h), one projection at a time,
  // from the mapped checkpoint: ~1 s per GB, once.
  void set_compute_dtype(ComputeDType d);
  ComputeDType compute_dtype() const { return dtype_; }

  // --w8a8: every projection of integer codes runs on int8 activations (ops/int8_act_gemm.h), an
  // approximation; one whose groups are too long for int32 sums keeps the exact kernels.
  // Fails naming the model when it has no integer codes. Returns the line `w8a8()` reports.
  const std::string& use_int8_activations();
  // "" when off; else e.g. "w8a8 avx512_vnni: 196 of 196 projections".
  const std::string& w8a8() const { return w8a8_; }

  // Per-phase time and work of every forward since load or the last reset (always on: a few
  // clock reads per layer).
  const ForwardProfile& profile() const { return profile_; }
  void reset_profile() { profile_ = {}; }

  // Makes sure the RoPE table covers `n` positions (call before decoding a canvas of n).
  void reserve_positions(int n) { rope_.reserve(n); }

  // logits: [args.logits.size(), vocab_size] raw rows (no shift applied).
  void forward(const ForwardArgs& args, float* logits);

  // Several canvases in one forward (batched decoding). Their rows are stacked without padding:
  // row-wise work (norms, MLP, residuals) runs over the stack, every projection is one weight
  // pass (batch_gemm(): a GEMM per canvas of that canvas's own shape, or one over the stack where
  // that is verified to give the same bits), the LM head a GEMM per canvas, and attention runs
  // per canvas over its own fresh and cached rows. So each canvas's logits are bit-identical to
  // forward() on it alone, and no padding can leak into attention.
  void forward_batch(std::span<const struct CanvasForward> canvases);

  void set_batch_gemm(BatchGemm m) { batch_gemm_ = m; }
  // The mode forward_batch uses now: kAuto resolved (the check runs once per GEMM library and
  // compute dtype, a few products of the model's own projection shapes; call it before batching
  // starts).
  BatchGemm batch_gemm();

  // Model FLOPs of the forward `args` describes.
  double forward_flops(const ForwardArgs& args) const;
  // Model FLOPs of one forward over `n` fresh rows attending to `n_keys` keys with `n_logits`
  // LM-head rows (2 per multiply-add), for benchmark reports.
  // `n_out`: the rows the last layer runs its output projection and MLP on
  // (model/output_rows.h); every row when negative.
  double forward_flops(int n, int n_keys, int n_logits, int n_out = -1) const;
  // Model FLOPs of every forward run so far (benchmarks read differences of it).
  double flops_done() const { return flops_done_; }

 private:
  Model() = default;
  void grow(int n);
  void grow_output_rows(int n);        // xs_, atts_
  void pack_weights();                 // at load: every projection packed, its mapped pages dropped
  void account(const ForwardArgs& a);  // FLOPs and profile work of one canvas's forward
  // One canvas's attention at `layer`: q [n, n_heads*hd] post-RoPE, k/v its fresh rows, the
  // cached ranges read from its store; att: [n, n_heads*hd].
  void attend_canvas(const ForwardArgs& a, int layer, const float* q, const float* k,
                     const float* v, float* att) const;

  std::string dir_;
  mutable std::string fingerprint_;
  ModelConfig cfg_;
  std::unique_ptr<Checkpoint> ckpt_;
  ModelWeights w_;
  RopeTable rope_{2, 10000.0};
  // Workspace, grown on demand and reused across forwards (no per-step allocation).
  double flops_done_ = 0.0;
  ComputeDType dtype_ = ComputeDType::kF32;
  std::string w8a8_;
  BatchGemm batch_gemm_ = BatchGemm::kAuto;
  int stacked_exact_[2][2] = {{-1, -1}, {-1, -1}};  // [GEMM library][dtype]: unknown / no / yes
  ForwardProfile profile_;
  int cap_ = 0;
  std::vector<float> x_, h_, q_, k_, v_, att_, gate_, up_;
  std::vector<float> xs_, atts_;    // the last layer's output rows (model/output_rows.h)
  std::vector<float> head_rows_;    // LM head output of canvases with logit_rows, before scatter
  std::vector<int> rows_;           // batched forward: rows of each canvas
  std::vector<LinearRows> blocks_;  // batched forward: the GEMM blocks of a projection
  std::vector<std::exception_ptr> canvas_errors_;  // batched forward: a store's refusal per canvas
  MoeRunner moe_;                                  // LLaDA-MoE expert layers' workspace
  std::vector<CanvasRows> canvas_rows_;            // batched forward: rows of each canvas
};

}  // namespace dllmq
