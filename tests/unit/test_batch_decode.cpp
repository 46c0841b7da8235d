// Batched decoding on the embedded model: linear_grouped gives every block linear()'s result;
// forward_batch gives each canvas the logits forward() gives it alone (bit for bit), and decoders
// batched together (N = 2..8, different prompt lengths, lengths, schedules, cache modes, KV stores,
// sampling) produce exactly their batch-1 tokens, NFE and KV bytes. A failing or cancelled decoder
// leaves the others untouched.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cache/kv_spec.h"
#include "decode/batch.h"
#include "decode/generate.h"
#include "model/model.h"
#include "model/stacked_gemm.h"
#include "ops/gemm.h"
#include "util/error.h"
#include "util/half.h"

namespace dllmq {
namespace {

const char* kModel = DLLMQ_SOURCE_DIR "/models/dllmq-synth-tiny";

Model& model() {
  static std::unique_ptr<Model> m = Model::load(kModel);
  return *m;
}

// Prompt ids below the specials (the embedded model's BOS/EOS/mask ids are 506..508).
std::vector<int32_t> random_prompt(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p(n);
  for (int32_t& id : p) id = static_cast<int32_t>(rng() % 500);
  return p;
}

std::unique_ptr<KvStore> make_store(const Model& m, const std::string& method, int n) {
  KvSpec spec;
  spec.method = method;
  const ModelConfig& c = m.config();
  auto s = make_kv_store(spec, {c.n_layers, c.n_kv_heads, c.head_dim}, m.rope(), m.fingerprint());
  s->reset(n);
  return s;
}

// A bf16 weight [out, in] of N(0, 0.05^2) values, as a Linear without bias.
struct RandomBf16Weight {
  std::vector<uint16_t> w;
  TensorView tv;
  Linear linear;
  RandomBf16Weight(int out, int in, std::mt19937& rng) : w(size_t(out) * in) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (uint16_t& x : w) x = f32_to_bf16(0.05f * normal(rng));
    tv.name = "w";
    tv.dtype = DType::kBF16;
    tv.shape = {out, in};
    tv.data = w.data();
    tv.nbytes = w.size() * 2;
    linear = Linear{&tv, nullptr, out, in};
  }
};

// linear_grouped: blocks small enough for one thread and blocks large enough for the panel
// threads (16-bit weights widened once for all of them), each equal to linear() alone and close
// to the double-precision reference. The panel path needs more than one OpenMP thread and a
// weight of several panels: 4096 x 256 bf16 (4 panels); on a one-panel weight (256 x 256) the
// blocks go to the threads as (panel, block) pairs, the per-canvas GEMMs of a batched forward.
void mixed_blocks_equal_linear_alone(int out) {
  const int in = 256;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  RandomBf16Weight rw(out, in, rng);
  const Linear& l = rw.linear;
  const int rows[] = {3, 40, 1, 16, 64};  // 40 and 64 rows: 4096 * 256 * n > 4e6 -> panel threads
  int n = 0;
  for (int r : rows) n += r;
  std::vector<float> x(size_t(n) * in), grouped(size_t(n) * out), alone(grouped.size()),
      ref(grouped.size());
  for (float& v : x) v = normal(rng);
  for (ComputeDType dt : {ComputeDType::kF32, ComputeDType::kBF16}) {
    std::vector<LinearRows> blocks;
    int r0 = 0;
    for (int r : rows) {
      blocks.push_back({x.data() + size_t(r0) * in, r, grouped.data() + size_t(r0) * out});
      linear(x.data() + size_t(r0) * in, r, l, alone.data() + size_t(r0) * out, 0, dt);
      r0 += r;
    }
    linear_grouped(blocks, l, 0, dt);
    EXPECT_EQ(0, std::memcmp(grouped.data(), alone.data(), grouped.size() * 4)) << out;
    linear_ref(x.data(), n, l, ref.data(), dt);
    double worst = 0;
    for (size_t i = 0; i < ref.size(); ++i)
      worst = std::max(worst, double(std::abs(grouped[i] - ref[i])));
    EXPECT_LT(worst, 1e-3) << compute_dtype_name(dt);
  }
}

TEST(LinearGrouped, MixedBlocksEqualLinearAlone) {
  for (const int out : {4096, 256}) mixed_blocks_equal_linear_alone(out);
}

// Stacked tiles spread over the threads as (panel, tile) pairs, each thread widening a panel once
// for the tiles it takes: every row must still be its product (reference in double precision),
// and a block that is not a tile keeps linear()'s bits. Four threads on 1- and 2-panel weights
// (2048 x 256 is two panels), so pairs cross panels and threads share none.
TEST(LinearGrouped, TilesOnThreadsMatchReference) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(4);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const int out : {256, 2048}) {
    const int in = 256;
    RandomBf16Weight rw(out, in, rng);
    const Linear& l = rw.linear;
    const int rows[] = {5, 128, 128, 64};  // a small canvas's own block, then three tiles
    const int n = 5 + 128 + 128 + 64;
    std::vector<float> x(size_t(n) * in), y(size_t(n) * out), alone(size_t(5) * out), ref(y.size());
    for (float& v : x) v = normal(rng);
    for (ComputeDType dt : {ComputeDType::kF32, ComputeDType::kBF16}) {
      std::vector<LinearRows> blocks;
      int r0 = 0;
      for (int r : rows) {
        blocks.push_back({x.data() + size_t(r0) * in, r, y.data() + size_t(r0) * out, r0 > 0});
        r0 += r;
      }
      std::fill(y.begin(), y.end(), 0.0f);
      linear_grouped(blocks, l, 0, dt);
      linear(x.data(), 5, l, alone.data(), 0, dt);
      EXPECT_EQ(0, std::memcmp(y.data(), alone.data(), alone.size() * 4)) << out;
      linear_ref(x.data(), n, l, ref.data(), dt);
      double worst = 0;
      for (size_t i = 0; i < ref.size(); ++i)
        worst = std::max(worst, double(std::abs(y[i] - ref[i])));
      EXPECT_LT(worst, 1e-3) << "out " << out << " " << compute_dtype_name(dt);
    }
  }
  omp_set_num_threads(threads);
}

// The stacked layout: small canvases first, a GEMM each; the rest covered by tiles back to back
// from small_rows, each a multiple of kTileQuantum rows and at most kStackedRows (the few kernel
// shapes a server compiles), ending inside the buffers' capacity with less than kTileQuantum
// rows of padding. The tiles fall into one share per thread (no tile crosses a share's edge),
// equal to within kTileQuantum rows, so each thread multiplies the same number of rows.
TEST(StackedLayout, TilesCoverEveryRowInEqualThreadShares) {
  const std::vector<std::vector<int>> splits = {{16},
                                                {16, 16, 16, 16},
                                                {64, 1},
                                                {65},
                                                {16, 16, 16, 16, 16, 16, 16, 16, 16},
                                                {130, 2, 33},
                                                {5, 3},
                                                {200, 200, 17},
                                                {260},
                                                {16, 16, 16, 16, 16, 16, 16, 16, 16, 16}};
  std::vector<float> x(8192), y(8192);
  std::vector<LinearRows> blocks;
  for (const int threads : {1, 2, 3, 4})
    for (const auto& split : splits) {
      const StackedLayout l = stacked_layout(split, threads);
      int small = 0, total = 0;
      for (int r : split) {
        total += r;
        if (r < kMinStackedRows) small += r;
      }
      ASSERT_EQ(l.small_rows, small);
      ASSERT_EQ(l.n, total);
      const int rest = total - small;
      const int share = (rest + threads - 1) / threads;  // rows per thread, before rounding
      stacked_blocks(l, split, x.data(), 1, y.data(), 1, blocks);
      int next = l.small_rows, tiles = 0;
      std::vector<int> share_rows;  // rows of each share, from the tiles' positions
      const int quantum_share = (share + kTileQuantum - 1) / kTileQuantum * kTileQuantum;
      for (const LinearRows& b : blocks) {
        const int r0 = static_cast<int>(b.x - x.data());
        if (r0 < l.small_rows) continue;  // a small canvas's own GEMM
        EXPECT_TRUE(b.tile);
        EXPECT_EQ(b.n % kTileQuantum, 0) << b.n;
        EXPECT_GE(b.n, kTileQuantum);
        EXPECT_LE(b.n, kStackedRows);
        EXPECT_EQ(r0, next);
        const int s = (r0 - l.small_rows) / quantum_share;
        EXPECT_EQ(s, (r0 + b.n - 1 - l.small_rows) / quantum_share) << "a tile crosses a share";
        if (int(share_rows.size()) <= s) share_rows.resize(s + 1, 0);
        share_rows[s] += b.n;
        next += b.n;
        ++tiles;
      }
      EXPECT_GE(next, l.n);
      EXPECT_EQ(next, l.capacity());
      EXPECT_LT(next - l.n, kTileQuantum);
      EXPECT_LE(int(share_rows.size()), threads);
      for (int r : share_rows) EXPECT_LE(r, quantum_share);
      if (rest > 0) {
        EXPECT_GT(tiles, 0);
        // Equal shares: the largest within one quantum of the even split.
        EXPECT_LT(*std::max_element(share_rows.begin(), share_rows.end()), share + kTileQuantum);
      }
    }
}

// forward_batch's logits against forward()'s, bit for bit, with the batch GEMM mode `mode`;
// returns how many of the three canvases differ.
int canvases_differing(BatchGemm mode) {
  Model& m = model();
  m.set_batch_gemm(mode);
  const int V = m.config().vocab_size;
  // Three canvases: a full refresh writing a dense store, a cached dual-style step against a
  // KIVI store, and a plain full forward; different lengths and positions.
  const std::vector<int32_t> a = random_prompt(37, 1), b = random_prompt(52, 2),
                             c = random_prompt(9, 3);
  m.reserve_positions(64);
  auto store_a1 = make_store(m, "fp32", 37), store_a2 = make_store(m, "fp32", 37);
  auto store_b1 = make_store(m, "kivi", 52), store_b2 = make_store(m, "kivi", 52);
  // Fill b's stores with a refresh first (single forwards, identical in both).
  for (KvStore* s : {store_b1.get(), store_b2.get()}) {
    ForwardArgs f;
    f.ids = b;
    f.store = s;
    f.write = {0, 52};
    m.forward(f, nullptr);
  }
  ForwardArgs fa;
  fa.ids = a;
  fa.write = {0, 37};
  fa.logits = {21, 37};
  ForwardArgs fb;
  fb.ids = std::span<const int32_t>(b).subspan(16, 16);
  fb.pos0 = 16;
  fb.cached = {{0, 16}, {32, 52}};
  fb.logits = {16, 32};
  ForwardArgs fc;
  fc.ids = c;
  fc.logits = {0, 9};

  std::vector<float> la1(16 * V), lb1(16 * V), lc1(9 * V);
  fa.store = store_a1.get();
  fb.store = store_b1.get();
  m.forward(fa, la1.data());
  m.forward(fb, lb1.data());
  m.forward(fc, lc1.data());

  std::vector<float> la2(16 * V), lb2(16 * V), lc2(9 * V);
  fa.store = store_a2.get();
  fb.store = store_b2.get();
  const CanvasForward batch[] = {{&fb, lb2.data()}, {&fa, la2.data()}, {&fc, lc2.data()}};
  m.forward_batch(batch);

  EXPECT_EQ(store_a1->bytes(), store_a2->bytes());
  m.set_batch_gemm(BatchGemm::kAuto);
  return (std::memcmp(la1.data(), la2.data(), la1.size() * 4) != 0) +
         (std::memcmp(lb1.data(), lb2.data(), lb1.size() * 4) != 0) +
         (std::memcmp(lc1.data(), lc2.data(), lc1.size() * 4) != 0);
}

TEST(ForwardBatch, EachCanvasGetsItsSingleForwardLogits) {
  const GemmLib before = gemm_info().lib;
  for (GemmLib lib : {GemmLib::kOneDnn, GemmLib::kOpenBlas}) {
    if (!gemm_available(lib)) continue;
    gemm_select(lib);
    EXPECT_EQ(canvases_differing(BatchGemm::kAuto), 0) << gemm_lib_name(lib) << " auto";
    EXPECT_EQ(canvases_differing(BatchGemm::kPerCanvas), 0) << gemm_lib_name(lib) << " per-canvas";
    // Where the check refuses stacking, forcing it is what batching must not do; say what it
    // would have done (the check's reason to exist).
    if (!stacked_gemm_exact(model().weights(), model().compute_dtype(), gemm_threads()))
      std::printf("%s: forced stacking changes the logits of %d of 3 canvases\n",
                  gemm_lib_name(lib), canvases_differing(BatchGemm::kStacked));
  }
  gemm_select(before);
}

// ForwardArgs::logit_rows: the named rows of a canvas's logits, alone or batched beside other
// canvases, have the bits they have when every row is computed; the other output rows keep what
// they held. In fp32 (packed kernels) and, where bf16 compute runs on our own kernels (AMX tiles,
// vdpbf16ps or widening: one product per row, unlike oneDNN's), in bf16.
TEST(ForwardBatch, LogitRowsKeepTheirBitsAndLeaveTheOtherRows) {
  Model& m = model();
  const int V = m.config().vocab_size;
  const std::vector<int32_t> a = random_prompt(40, 7), c = random_prompt(20, 8);
  m.reserve_positions(64);
  const ComputeDType before = m.compute_dtype();
  for (ComputeDType dt : {ComputeDType::kF32, ComputeDType::kBF16}) {
    m.set_compute_dtype(dt);
    if (dt == ComputeDType::kBF16 && gemm_info().bf16_native) continue;
    ForwardArgs full;
    full.ids = a;
    full.logits = {8, 40};
    std::vector<float> ref(32 * size_t(V));
    m.forward(full, ref.data());
    ForwardArgs other;  // a canvas beside it in the batch, every row
    other.ids = c;
    other.logits = {0, 20};
    std::vector<float> ref_other(20 * size_t(V)), got_other(ref_other.size());
    m.forward(other, ref_other.data());
    for (const std::vector<int>& rows :
         std::vector<std::vector<int>>{{0}, {31}, {0, 1, 2, 5, 17, 30, 31}, {3, 4, 5, 6}}) {
      ForwardArgs sub = full;
      sub.logit_rows = rows;
      EXPECT_EQ(sub.n_logit_rows(), int(rows.size()));
      for (bool batched : {false, true}) {
        std::vector<float> got(ref.size(), 12345.0f);
        if (batched) {
          const CanvasForward batch[] = {{&other, got_other.data()}, {&sub, got.data()}};
          m.forward_batch(batch);
          EXPECT_EQ(0, std::memcmp(got_other.data(), ref_other.data(), ref_other.size() * 4));
        } else {
          m.forward(sub, got.data());
        }
        for (int r = 0; r < 32; ++r) {
          const float* g = got.data() + size_t(r) * V;
          if (std::find(rows.begin(), rows.end(), r) != rows.end())
            EXPECT_EQ(0, std::memcmp(g, ref.data() + size_t(r) * V, size_t(V) * 4))
                << "row " << r << (batched ? " batched" : "") << " dtype " << int(dt);
          else
            EXPECT_TRUE(std::all_of(g, g + V, [](float x) { return x == 12345.0f; }))
                << "row " << r << " was written";
        }
      }
    }
    ForwardArgs bad = full;
    bad.logit_rows = {3, 3};
    std::vector<float> out(ref.size());
    EXPECT_THROW(m.forward(bad, out.data()), Error);
    bad.logit_rows = {32};
    EXPECT_THROW(m.forward(bad, out.data()), Error);
  }
  m.set_compute_dtype(before);
}

// The last layer's output projection and MLP on the output rows alone (model/output_rows.h):
// a forward that asks for some rows' logits gives them the bits of one whose every row goes
// through the last layer (logits for all rows), alone and batched beside another canvas, with
// logits ranges and named rows; and the FLOP count drops by the rows it skips.
TEST(ForwardBatch, LastLayerOnOutputRowsKeepsTheirBits) {
  Model& m = model();
  const int V = m.config().vocab_size, n = 48;
  const std::vector<int32_t> a = random_prompt(n, 11), c = random_prompt(24, 12);
  m.reserve_positions(64);
  const ComputeDType before = m.compute_dtype();
  for (ComputeDType dt : {ComputeDType::kF32, ComputeDType::kBF16}) {
    m.set_compute_dtype(dt);
    if (dt == ComputeDType::kBF16 && gemm_info().bf16_native) continue;
    ForwardArgs every;  // every row through the last layer
    every.ids = a;
    every.logits = {0, n};
    std::vector<float> ref(size_t(n) * V);
    m.forward(every, ref.data());
    ForwardArgs other;  // a canvas beside it in the batch, a few rows
    other.ids = c;
    other.logits = {4, 12};
    std::vector<float> ref_other(size_t(other.logits.size()) * V);
    m.forward(other, ref_other.data());
    struct Case {
      PosRange logits;
      std::vector<int> rows;
    };
    for (const Case& k : std::vector<Case>{{{16, 48}, {}},
                                           {{16, 48}, {0, 5, 31}},
                                           {{0, 1}, {}},
                                           {{47, 48}, {}},
                                           {{8, 40}, {3, 4, 5, 6, 30}}}) {
      ForwardArgs sub;
      sub.ids = a;
      sub.logits = k.logits;
      sub.logit_rows = k.rows;
      EXPECT_LT(m.forward_flops(sub), m.forward_flops(every));
      for (bool batched : {false, true}) {
        std::vector<float> got(size_t(k.logits.size()) * V, 12345.0f);
        std::vector<float> got_other(size_t(other.logits.size()) * V);
        if (batched) {
          const CanvasForward batch[] = {{&other, got_other.data()}, {&sub, got.data()}};
          m.forward_batch(batch);
        } else {
          m.forward(sub, got.data());
        }
        for (int i = 0; i < k.logits.size(); ++i) {
          if (!k.rows.empty() && std::find(k.rows.begin(), k.rows.end(), i) == k.rows.end())
            continue;
          const int r = k.logits.begin + i;
          EXPECT_EQ(
              0, std::memcmp(got.data() + size_t(i) * V, ref.data() + size_t(r) * V, size_t(V) * 4))
              << "row " << r << (batched ? " batched" : "") << " dtype " << int(dt);
        }
        if (batched) {
          EXPECT_EQ(0, std::memcmp(got_other.data(), ref_other.data(), ref_other.size() * 4));
        }
      }
    }
  }
  // The FLOP count: the last layer's output projection and MLP on 1 of 48 rows.
  const ModelConfig& cfg = m.config();
  const double d = cfg.d_model, qd = double(cfg.n_heads) * cfg.head_dim;
  const double per_row = 2.0 * (qd * d + 3.0 * d * m.weights().layers.back().gate.out);
  EXPECT_DOUBLE_EQ(m.forward_flops(n, n, 1, 1), m.forward_flops(n, n, 1) - 47 * per_row);
  m.set_compute_dtype(before);
}

// A spread of settings; job i of a batch takes settings[(i + shift) % size].
GenerateOptions setting(int k) {
  GenerateOptions o;
  o.gen_length = 32;
  o.block_length = 16;
  o.steps = 32;
  switch (k % 10) {
    case 0:  // LLaDA generate, one token per step
      break;
    case 1:
      o.cache = CacheMode::kDual;
      o.threshold = 0.9;
      break;
    case 2:
      o.cache = CacheMode::kPrefix;
      o.gen_length = 48;
      o.steps = 24;
      break;
    case 3:
      o.cache = CacheMode::kDual;
      o.kv.method = "kivi";
      o.kv.bits_k = o.kv.bits_v = 2;
      o.threshold = 0.8;
      break;
    case 4:
      o.block_length = 8;
      o.steps = 16;
      o.temperature = 0.7;
      o.seed = 11;
      break;
    case 5:
      o.cache = CacheMode::kDual;
      o.factor = 1.0;
      o.kv.method = "fp16";
      break;
    case 6:
      o.alg = RankAlg::kRandom;
      o.seed = 5;
      o.gen_length = 16;
      o.block_length = 16;
      o.steps = 8;
      break;
    case 7:
      o.cfg_scale = 0.5;
      o.gen_length = 16;
      o.steps = 16;
      break;
    case 8:
      o.cache = CacheMode::kPrefix;
      o.kv.method = "kivi";
      o.kv.bits_k = o.kv.bits_v = 4;
      o.temperature = 1.0;
      o.seed = 3;
      o.threshold = 0.9;
      break;
    case 9:
      o.cache = CacheMode::kDual;
      o.threshold = 0.9;
      o.early_stop = true;
      o.gen_length = 64;
      o.steps = 64;
      break;
  }
  return o;
}

void expect_same(const GenerateResult& single, const BatchOutcome& batched,
                 const std::string& what) {
  ASSERT_FALSE(batched.error) << what;
  EXPECT_EQ(single.tokens, batched.result.tokens) << what;
  EXPECT_EQ(single.nfe, batched.result.nfe) << what;
  EXPECT_EQ(single.steps, batched.result.steps) << what;
  EXPECT_EQ(single.kv_bytes, batched.result.kv_bytes) << what;
  EXPECT_DOUBLE_EQ(single.flops, batched.result.flops) << what;
}

// Batches of 2..8 with the batch GEMM mode `mode`, each job against its own batch-1 run.
void every_batch_size(BatchGemm mode) {
  Model& m = model();
  m.set_batch_gemm(mode);
  for (int n = 2; n <= 8; ++n) {
    std::vector<std::vector<int32_t>> prompts;
    std::vector<BatchJob> jobs;
    for (int i = 0; i < n; ++i) prompts.push_back(random_prompt(3 + 7 * i + n, 100 * n + i));
    for (int i = 0; i < n; ++i) jobs.push_back({prompts[i], setting(i + 3 * n), nullptr});
    const auto out = generate_batched(m, jobs);
    for (int i = 0; i < n; ++i) {
      const GenerateResult single = generate(m, prompts[i], jobs[i].options);
      const std::string what = std::string(batch_gemm_name(m.batch_gemm())) + " batch of " +
                               std::to_string(n) + ", job " + std::to_string(i) + ", setting " +
                               std::to_string((i + 3 * n) % 10);
      expect_same(single, out[i], what);
      // All jobs were seated together, so the first forward ran every canvas at once.
      EXPECT_EQ(out[i].max_batch, n) << what;
    }
  }
  m.set_batch_gemm(BatchGemm::kAuto);
}

TEST(BatchDecode, EveryBatchSizeEqualsBatch1) {
  every_batch_size(BatchGemm::kAuto);
  std::printf("batch GEMM mode chosen by the check here: %s (%s)\n",
              batch_gemm_name(model().batch_gemm()), gemm_info().name.c_str());
}

TEST(BatchDecode, PerCanvasGemmsEqualBatch1) {
  every_batch_size(BatchGemm::kPerCanvas);
}

// OpenBLAS 0.3.21 gives stacked rows other bits than separate calls on the test machine: the
// check must catch that (or find the library row-independent here) so batching stays exact.
TEST(BatchDecode, CheckedStackingIsExactOnOpenBlasToo) {
  const GemmLib before = gemm_info().lib;
  gemm_select(GemmLib::kOpenBlas);
  Model& m = model();
  const bool stacked = stacked_gemm_exact(m.weights(), m.compute_dtype(), gemm_threads());
  std::printf("OpenBLAS: stacking %s\n", stacked ? "gives the same bits" : "changes bits");
  every_batch_size(BatchGemm::kAuto);
  gemm_select(before);
}

TEST(BatchDecode, Bf16ComputeEqualsBatch1) {
  Model& m = model();
  m.set_compute_dtype(ComputeDType::kBF16);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<BatchJob> jobs;
  for (int i = 0; i < 4; ++i) prompts.push_back(random_prompt(10 + 5 * i, 7 + i));
  for (int i = 0; i < 4; ++i) jobs.push_back({prompts[i], setting(i), nullptr});
  const auto out = generate_batched(m, jobs);
  for (int i = 0; i < 4; ++i)
    expect_same(generate(m, prompts[i], jobs[i].options), out[i], "bf16 job " + std::to_string(i));
  m.set_compute_dtype(ComputeDType::kF32);
}

TEST(BatchDecode, FailedAndCancelledJobsLeaveOthersExact) {
  Model& m = model();
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) prompts.push_back(random_prompt(12 + i, 40 + i));
  std::vector<BatchJob> jobs;
  for (int i = 0; i < 4; ++i) jobs.push_back({prompts[i], setting(1), nullptr});
  jobs[1].options.gen_length = 30;  // not a multiple of the block length: fails before decoding
  int seen = 0;
  jobs[2].on_step = [&seen](const StepInfo&) {
    if (++seen == 2) throw Cancelled();
  };
  const auto out = generate_batched(m, jobs);
  ASSERT_TRUE(out[1].error);
  EXPECT_THROW(std::rethrow_exception(out[1].error), Error);
  ASSERT_TRUE(out[2].error);
  EXPECT_THROW(std::rethrow_exception(out[2].error), Cancelled);
  for (int i : {0, 3})
    expect_same(generate(m, prompts[i], jobs[i].options), out[i], "job " + std::to_string(i));
}

}  // namespace
}  // namespace dllmq
