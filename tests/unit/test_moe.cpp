// LLaDA-MoE: the routing's tie rule against torch.topk's answers, config detection and
// refusals, and a tiny random MoE checkpoint (written here) through the paths that must not
// care that layers have experts: thread count, forward_batch per canvas, batched decoding with
// cache modes and KV stores equal to batch-1. Logits against the released modeling code are
// checked by tests/python/test_lladamoe.py.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "decode/batch.h"
#include "decode/generate.h"
#include "io/model_config.h"
#include "io/safetensors_writer.h"
#include "model/model.h"
#include "model/moe.h"
#include "model/stacked_gemm.h"
#include "ops/gemm.h"
#include "util/error.h"

namespace dllmq {
namespace {

// torch 2.5.1 torch.topk(p, k) on CPU for these tied rows (tests/data/lladamoe/reference.npz
// "topk_ties", written by tools/lladamoe_reference.py; test_lladamoe.py checks the two agree).
struct TieCase {
  std::vector<float> p;
  int k;
  std::vector<int32_t> experts;
};

std::vector<TieCase> torch_ties() {
  return {{{0.25f, 0.25f, 0.25f, 0.25f}, 2, {2, 3}},
          {std::vector<float>(8, 0.125f), 2, {6, 5}},
          {std::vector<float>(8, 0.125f), 3, {6, 5, 4}},
          {{0.1f, 0.2f, 0.2f, 0.1f, 0.2f, 0.05f, 0.1f, 0.05f}, 3, {1, 4, 2}},
          {{0.3f, 0.1f, 0.3f, 0.1f, 0.1f, 0.1f}, 2, {2, 0}},
          {std::vector<float>(64, 1.0f / 64), 8, {44, 41, 42, 43, 46, 47, 40, 45}},
          {std::vector<float>(64, 1.0f / 64), 1, {0}},
          {std::vector<float>(128, 1.0f / 128), 2, {0, 1}}};
}

TEST(MoeRouting, TiesResolveAsTorchTopk) {
  std::vector<std::pair<float, int64_t>> scratch;
  for (const TieCase& c : torch_ties()) {
    // route_row takes logits: log p gives back p (up to a common factor) after the softmax, and
    // equal p stay exactly equal.
    const int n = static_cast<int>(c.p.size());
    std::vector<float> logits(n);
    for (int i = 0; i < n; ++i) logits[i] = std::log(c.p[i]);
    std::vector<int32_t> ex(c.k);
    std::vector<float> w(c.k);
    route_row(logits.data(), n, nullptr, c.k, ex.data(), w.data(), scratch);
    EXPECT_EQ(ex, c.experts) << n << " experts, top " << c.k;
  }
}

TEST(MoeRouting, DistinctProbabilitiesSortDescendingWithBias) {
  const float logits[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 0.0f};
  const float bias[6] = {0.0f, 0.0f, 0.0f, 0.01f, 0.0f, 0.0f};
  std::vector<std::pair<float, int64_t>> scratch;
  int32_t ex[3];
  float w[3];
  route_row(logits, 6, bias, 3, ex, w, scratch);
  EXPECT_EQ(ex[0], 3);  // the bias breaks the tie between 1 and 3
  EXPECT_EQ(ex[1], 1);
  EXPECT_EQ(ex[2], 4);
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l) - 2.0);
  EXPECT_NEAR(w[1], 1.0 / sum, 1e-6);         // plain softmax probability, not renormalised
  EXPECT_NEAR(w[0], 1.0 / sum + 0.01, 1e-6);  // the biased value is the weight
}

nlohmann::json moe_config(int layers = 2) {
  nlohmann::json j = {{"architectures", {"LLaDAMoEModelLM"}},
                      {"model_type", "llada"},
                      {"hidden_size", 32},
                      {"num_attention_heads", 4},
                      {"num_key_value_heads", 2},
                      {"num_hidden_layers", layers},
                      {"vocab_size", 160000},
                      {"rope_theta", 50000},
                      {"rms_norm_eps", 1e-5},
                      {"num_experts", 4},
                      {"num_experts_per_tok", 2},
                      {"expert_intermediate_size", 16},
                      {"dense_intermediate_size", 64},
                      {"shared_expert_intermediate_size", nullptr},
                      {"moe_layer_freq", std::vector<int>(layers, 1)},
                      {"qk_layernorm", true},
                      {"partial_rotary_factor", 1.0},
                      {"norm_topk_prob", false},
                      {"eos_token_id", 156892}};
  return j;
}

std::string parse_error(const nlohmann::json& j) {
  try {
    parse_model_config(j.dump(), "x/config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MoeConfig, ReleasedLayoutDetectedAndMaskIdFallsBack) {
  const ModelConfig c = parse_model_config(moe_config().dump(), "x/config.json");
  EXPECT_EQ(c.layout, Layout::kLLaDAMoE);
  EXPECT_EQ(c.arch, Arch::kLLaDA);  // decodes with LLaDA's samplers
  EXPECT_EQ(c.mask_id, 156895);     // not in the released config.json: the model card's id
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.moe.n_experts, 4);
  EXPECT_EQ(c.moe.dense_hidden, 0);  // no dense layer: dense_intermediate_size is not read
  EXPECT_EQ(c.mlp_hidden, 32);       // the active width, 2 experts x 16
  nlohmann::json j = moe_config();
  j["mask_token_id"] = 7;
  EXPECT_EQ(parse_model_config(j.dump(), "x").mask_id, 7);
  j["model_type"] = "lladamoe";
  EXPECT_EQ(parse_model_config(j.dump(), "x").layout, Layout::kLLaDAMoE);
}

TEST(MoeConfig, RefusalsNameTheField) {
  auto expect = [](nlohmann::json j, const std::string& want) {
    const std::string e = parse_error(j);
    EXPECT_NE(e.find(want), std::string::npos) << "got: " << e << "\nwanted: " << want;
  };
  nlohmann::json j = moe_config();
  j["num_experts_per_tok"] = 5;
  expect(j, "num_experts_per_tok 5 exceeds num_experts 4");
  j = moe_config();
  j["moe_layer_freq"] = {1};
  expect(j, "'moe_layer_freq' has 1 entries but num_hidden_layers is 2");
  j = moe_config();
  j["clip_qkv"] = 8;
  expect(j, "clip_qkv");
  j = moe_config();
  j["partial_rotary_factor"] = 0.5;
  expect(j, "partial_rotary_factor");
  j = moe_config();
  j.erase("rope_theta");
  expect(j, "rope_theta");
  // A dense LLaDA class (or none) with expert fields: never loaded as dense.
  j = moe_config();
  j["architectures"] = {"LLaDAModelLM"};
  expect(j, "mixture-of-experts fields (num_experts, num_experts_per_tok");
  j.erase("architectures");
  expect(j, "architectures absent");
  // Architectures dllmq does not implement name the field and the supported list.
  for (const auto& [type, cls] : std::vector<std::pair<std::string, std::string>>{
           {"llada2_moe", "LLaDA2MoeModelLM"}, {"sdar", "SDARForCausalLM"}, {"llada", "Foo"}}) {
    j = moe_config();
    j["model_type"] = type;
    j["architectures"] = {cls};
    expect(j, "LLaDA-MoE (model_type 'llada' or 'lladamoe', architectures ['LLaDAMoEModelLM'])");
    expect(j, cls);
  }
}

// A tiny random LLaDA-MoE checkpoint: f32 weights, dense layer 1, shared expert, expert bias,
// GQA, 8 experts top-2 (so short canvases leave experts without rows).
std::string write_moe_checkpoint() {
  const std::string dir = testing::TempDir() + "/dllmq_moe_tiny";
  std::filesystem::create_directories(dir);
  nlohmann::json c = moe_config(3);
  c["vocab_size"] = 96;
  c["mask_token_id"] = 90;
  c["eos_token_id"] = 91;
  c["num_experts"] = 8;
  c["moe_layer_freq"] = {1, 0, 1};
  c["shared_expert_intermediate_size"] = 24;
  c["moe_router_enable_expert_bias"] = true;
  std::ofstream(dir + "/config.json") << c.dump(2);
  std::mt19937 rng(31);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::map<std::string, F32Tensor> t;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float std, float mean = 0) {
    F32Tensor x;
    x.shape = shape;
    size_t n = 1;
    for (int64_t s : shape) n *= size_t(s);
    x.data.resize(n);
    for (float& v : x.data) v = mean + std * normal(rng);
    t[name] = std::move(x);
  };
  const int d = 32, hd = 8, kvd = 16, V = 96;
  add("model.embed_tokens.weight", {V, d}, 0.5f);
  for (int l = 0; l < 3; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {d}, 0.1f, 1.0f);
    add(p + "post_attention_layernorm.weight", {d}, 0.1f, 1.0f);
    add(p + "self_attn.q_proj.weight", {d, d}, 0.2f);
    add(p + "self_attn.k_proj.weight", {kvd, d}, 0.2f);
    add(p + "self_attn.v_proj.weight", {kvd, d}, 0.2f);
    add(p + "self_attn.o_proj.weight", {d, d}, 0.2f);
    add(p + "self_attn.q_norm.weight", {hd}, 0.1f, 1.0f);
    add(p + "self_attn.k_norm.weight", {hd}, 0.1f, 1.0f);
    if (l == 1) {
      add(p + "mlp.gate_proj.weight", {64, d}, 0.2f);
      add(p + "mlp.up_proj.weight", {64, d}, 0.2f);
      add(p + "mlp.down_proj.weight", {d, 64}, 0.2f);
      continue;
    }
    add(p + "mlp.gate.weight", {8, d}, 0.5f);
    add(p + "mlp.expert_bias", {8}, 0.05f);
    for (int e = 0; e < 8; ++e) {
      const std::string q = p + "mlp.experts." + std::to_string(e) + ".";
      add(q + "gate_proj.weight", {16, d}, 0.2f);
      add(q + "up_proj.weight", {16, d}, 0.2f);
      add(q + "down_proj.weight", {d, 16}, 0.2f);
    }
    add(p + "shared_expert.gate_proj.weight", {24, d}, 0.2f);
    add(p + "shared_expert.up_proj.weight", {24, d}, 0.2f);
    add(p + "shared_expert.down_proj.weight", {d, 24}, 0.2f);
  }
  add("model.norm.weight", {d}, 0.1f, 1.0f);
  add("lm_head.weight", {V, d}, 0.8f);
  write_safetensors_f32(dir + "/model.safetensors", t, {{"format", "pt"}});
  return dir;
}

Model& moe_model() {
  static std::unique_ptr<Model> m = Model::load(write_moe_checkpoint());
  return *m;
}

std::vector<int32_t> prompt(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p(n);
  for (int32_t& id : p) id = static_cast<int32_t>(rng() % 90);
  return p;
}

std::vector<float> logits_of(Model& m, const std::vector<int32_t>& ids) {
  ForwardArgs f;
  f.ids = ids;
  f.logits = {0, int(ids.size())};
  std::vector<float> out(ids.size() * size_t(m.config().vocab_size));
  m.forward(f, out.data());
  return out;
}

TEST(MoeModel, LoadsWithActiveParameterCount) {
  Model& m = moe_model();
  const ModelWeights& w = m.weights();
  ASSERT_TRUE(w.layers[0].moe);
  EXPECT_FALSE(w.layers[1].moe);
  // Each MoE layer: 6 of 8 experts (3 x 16 x 32 each) are not active for a token.
  EXPECT_EQ(w.n_params - w.n_active_params, size_t(2) * 6 * 3 * 16 * 32);
}

TEST(MoeModel, SameBitsOnOneAndTwoThreads) {
  Model& m = moe_model();
  const int before = omp_get_max_threads();
  for (int n : {1, 5, 40}) {
    const std::vector<int32_t> ids = prompt(n, n);
    omp_set_num_threads(1);
    const std::vector<float> one = logits_of(m, ids);
    omp_set_num_threads(2);
    const std::vector<float> two = logits_of(m, ids);
    EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * 4), 0) << n << " rows";
  }
  omp_set_num_threads(before);
}

TEST(MoeModel, ForwardBatchGivesEveryCanvasItsLoneLogits) {
  Model& m = moe_model();
  const int V = m.config().vocab_size;
  // Forced stacking is exact only where the GEMM library is (the check kAuto runs); the expert
  // products never stack, so the other modes must be exact whatever the library.
  std::vector<BatchGemm> modes = {BatchGemm::kAuto, BatchGemm::kPerCanvas};
  if (stacked_gemm_exact(m.weights(), m.compute_dtype(), gemm_threads()))
    modes.push_back(BatchGemm::kStacked);
  for (BatchGemm mode : modes) {
    m.set_batch_gemm(mode);
    const std::vector<int32_t> a = prompt(37, 1), b = prompt(3, 2), c = prompt(20, 3);
    std::vector<std::vector<float>> alone = {logits_of(m, a), logits_of(m, b), logits_of(m, c)};
    ForwardArgs fa, fb, fc;
    fa.ids = a, fa.logits = {0, 37};
    fb.ids = b, fb.logits = {0, 3};
    fc.ids = c, fc.logits = {0, 20};
    std::vector<float> la(37 * V), lb(3 * V), lc(20 * V);
    const CanvasForward batch[] = {{&fb, lb.data()}, {&fa, la.data()}, {&fc, lc.data()}};
    m.forward_batch(batch);
    EXPECT_EQ(std::memcmp(la.data(), alone[0].data(), la.size() * 4), 0) << batch_gemm_name(mode);
    EXPECT_EQ(std::memcmp(lb.data(), alone[1].data(), lb.size() * 4), 0) << batch_gemm_name(mode);
    EXPECT_EQ(std::memcmp(lc.data(), alone[2].data(), lc.size() * 4), 0) << batch_gemm_name(mode);
  }
  m.set_batch_gemm(BatchGemm::kAuto);
}

// The last (MoE) layer's experts run on the output rows alone (model/output_rows.h): a forward
// that asks for some rows' logits gives them the bits of one that asks for every row, alone and
// batched beside another canvas.
TEST(MoeModel, LastLayerOnOutputRowsKeepsTheirBits) {
  Model& m = moe_model();
  ASSERT_TRUE(m.weights().layers.back().moe);
  const int V = m.config().vocab_size;
  const std::vector<int32_t> a = prompt(40, 4), b = prompt(9, 5);
  const std::vector<float> every = logits_of(m, a), every_b = logits_of(m, b);
  ForwardArgs sub, fb;
  sub.ids = a;
  sub.logits = {8, 40};
  sub.logit_rows = {0, 1, 7, 30, 31};
  fb.ids = b;
  fb.logits = {0, 9};
  for (bool batched : {false, true}) {
    std::vector<float> got(32 * size_t(V)), got_b(9 * size_t(V));
    if (batched) {
      const CanvasForward batch[] = {{&fb, got_b.data()}, {&sub, got.data()}};
      m.forward_batch(batch);
      EXPECT_EQ(std::memcmp(got_b.data(), every_b.data(), got_b.size() * 4), 0);
    } else {
      m.forward(sub, got.data());
    }
    for (int r : sub.logit_rows)
      EXPECT_EQ(
          std::memcmp(got.data() + size_t(r) * V, every.data() + size_t(8 + r) * V, size_t(V) * 4),
          0)
          << "row " << r << (batched ? " batched" : "");
  }
}

TEST(MoeModel, BatchedDecodingEqualsBatch1AcrossCachesAndStores) {
  Model& m = moe_model();
  std::vector<GenerateOptions> settings(5);
  for (GenerateOptions& o : settings) o.gen_length = 32, o.block_length = 8, o.steps = 32;
  settings[1].cache = CacheMode::kPrefix;
  settings[2].cache = CacheMode::kDual, settings[2].threshold = 0.9;
  settings[3].cache = CacheMode::kDual, settings[3].kv.method = "kivi";
  settings[3].kv.bits_k = settings[3].kv.bits_v = 4;
  settings[4].cache = CacheMode::kDual, settings[4].kv.method = "fp16", settings[4].factor = 1.0;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<BatchJob> jobs;
  for (size_t i = 0; i < settings.size(); ++i) prompts.push_back(prompt(4 + 5 * int(i), 50 + i));
  for (size_t i = 0; i < settings.size(); ++i) jobs.push_back({prompts[i], settings[i], nullptr});
  const auto out = generate_batched(m, jobs);
  for (size_t i = 0; i < settings.size(); ++i) {
    const GenerateResult single = generate(m, prompts[i], settings[i]);
    ASSERT_FALSE(out[i].error) << i;
    EXPECT_EQ(single.tokens, out[i].result.tokens) << "job " << i;
    EXPECT_EQ(single.nfe, out[i].result.nfe) << "job " << i;
    EXPECT_EQ(single.kv_bytes, out[i].result.kv_bytes) << "job " << i;
    for (int32_t t : single.tokens) EXPECT_NE(t, m.config().mask_id);
  }
}

TEST(MoeModel, MissingExpertAndWrongCountAreRefused) {
  const std::string src = write_moe_checkpoint();
  const std::string dir = testing::TempDir() + "/dllmq_moe_broken";
  std::filesystem::create_directories(dir);
  nlohmann::json c = nlohmann::json::parse(std::ifstream(src + "/config.json"));
  c["num_experts"] = 7;
  std::filesystem::copy_file(src + "/model.safetensors", dir + "/model.safetensors",
                             std::filesystem::copy_options::overwrite_existing);
  std::ofstream(dir + "/config.json") << c.dump();
  try {
    Model::load(dir);
    ADD_FAILURE() << "loaded 8 experts as 7";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds 8 experts (indices 0..7) but config.json "
                                         "num_experts is 7"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dllmq
