// Loader validation: every defect gives an error naming the file and the tensor/field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "io/generation_config.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "test_util.h"
#include "util/error.h"

namespace dllmq {
namespace {

namespace fs = std::filesystem;

using test_util::TempDir;
using test_util::write_bytes;

using test_util::expect_error;
using test_util::safetensors_bytes;

TEST(Safetensors, ReadsValidFile) {
  TempDir d;
  const auto f = d.file("ok.safetensors");
  write_bytes(
      f,
      safetensors_bytes(
          R"({"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},"__metadata__":{"format":"pt"}})",
          12));
  SafetensorsFile st(f);
  ASSERT_EQ(st.tensors().size(), 1u);
  EXPECT_EQ(st.tensors().at("a").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(st.metadata().at("format"), "pt");
}

TEST(Safetensors, TruncatedBeforeHeaderLength) {
  TempDir d;
  const auto f = d.file("t.safetensors");
  write_bytes(f, "abc");
  expect_error([&] { SafetensorsFile s(f); }, {f, "truncated", "8-byte header length"});
}

TEST(Safetensors, HeaderLengthPastEnd) {
  TempDir d;
  const auto f = d.file("h.safetensors");
  write_bytes(f, safetensors_bytes("{}", 0, 1000));
  expect_error([&] { SafetensorsFile s(f); }, {f, "header length 1000 runs past the end"});
}

TEST(Safetensors, MalformedJson) {
  TempDir d;
  const auto f = d.file("j.safetensors");
  write_bytes(f, safetensors_bytes("{\"a\": [", 0));
  expect_error([&] { SafetensorsFile s(f); }, {f, "malformed JSON header"});
}

TEST(Safetensors, OffsetsOutOfRange) {
  TempDir d;
  const auto f = d.file("o.safetensors");
  write_bytes(f,
              safetensors_bytes(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8));
  expect_error([&] { SafetensorsFile s(f); }, {f, "tensor 'w'", "out of range", "truncated?"});
}

TEST(Safetensors, OverlappingOffsets) {
  TempDir d;
  const auto f = d.file("ov.safetensors");
  write_bytes(
      f,
      safetensors_bytes(
          R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
          12));
  expect_error([&] { SafetensorsFile s(f); }, {f, "'a' and 'b'", "overlapping"});
}

TEST(Safetensors, ShapeTimesDtypeMismatch) {
  TempDir d;
  const auto f = d.file("s.safetensors");
  write_bytes(
      f, safetensors_bytes(R"({"w":{"dtype":"BF16","shape":[3,3],"data_offsets":[0,16]}})", 16));
  expect_error([&] { SafetensorsFile s(f); },
               {f, "tensor 'w'", "[3, 3] x BF16 needs 18 bytes", "span 16"});
}

TEST(Safetensors, UnsupportedDtype) {
  TempDir d;
  const auto f = d.file("d.safetensors");
  write_bytes(f, safetensors_bytes(R"({"w":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8));
  expect_error([&] { SafetensorsFile s(f); }, {f, "tensor 'w'", "unsupported dtype 'I64'"});
}

TEST(Checkpoint, MissingFiles) {
  TempDir d;
  expect_error([&] { Checkpoint c(d.path().string()); },
               {"no model.safetensors or model.safetensors.index.json"});
}

TEST(Checkpoint, IndexNamesTensorMissingFromShard) {
  TempDir d;
  write_bytes(d.file("model-00001-of-00001.safetensors"),
              safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4));
  write_bytes(
      d.file("model.safetensors.index.json"),
      R"({"weight_map":{"a":"model-00001-of-00001.safetensors","b":"model-00001-of-00001.safetensors"}})");
  expect_error([&] { Checkpoint c(d.path().string()); },
               {"model.safetensors.index.json", "tensor 'b'", "does not hold it"});
}

const char* kLLaDAConfig =
    R"({"model_type":"llada","architectures":["LLaDAModelLM"],"block_type":"llama",
  "d_model":8,"n_heads":2,"n_kv_heads":2,"n_layers":1,"mlp_hidden_size":16,"vocab_size":16,"embedding_size":16,
  "rope_theta":10000.0,"rms_norm_eps":1e-5,"weight_tying":false,"include_qkv_bias":false,"mask_token_id":15,
  "eos_token_id":14,"alibi":false,"rope":true})";

TEST(Config, UnknownArchitecture) {
  TempDir d;
  write_bytes(d.file("config.json"),
              R"({"model_type":"gpt2","architectures":["GPT2LMHeadModel"]})");
  expect_error([&] { load_model_config(d.path().string()); },
               {"config.json", "unknown architecture", "'gpt2'"});
}

TEST(Config, UnsupportedOptions) {
  TempDir d;
  std::string c = kLLaDAConfig;
  write_bytes(d.file("config.json"), c.replace(c.find("\"alibi\":false"), 13, "\"alibi\":true"));
  expect_error([&] { load_model_config(d.path().string()); },
               {"config.json", "unsupported option alibi=true"});
  c = kLLaDAConfig;
  write_bytes(d.file("config.json"), c.replace(c.find("\"llama\""), 7, "\"sequential\""));
  expect_error([&] { load_model_config(d.path().string()); },
               {"unsupported block_type 'sequential'"});
}

TEST(Config, MissingField) {
  TempDir d;
  write_bytes(d.file("config.json"), R"({"model_type":"llada","n_heads":2})");
  expect_error([&] { load_model_config(d.path().string()); },
               {"config.json", "missing integer field 'd_model'"});
}

TEST(Config, ReadsLLaDAFields) {
  TempDir d;
  write_bytes(d.file("config.json"), kLLaDAConfig);
  ModelConfig c = load_model_config(d.path().string());
  EXPECT_EQ(c.arch, Arch::kLLaDA);
  EXPECT_EQ(c.head_dim, 4);
  EXPECT_EQ(c.mlp_hidden, 16);
  EXPECT_EQ(c.logits_shift, 0);
  EXPECT_EQ(c.mask_id, 15);
}

// A one-layer LLaDA checkpoint (F32 zeros) with a tensor list that can be perturbed.
std::string llada_header(const std::string& skip, const std::string& bad_shape_name) {
  struct T {
    std::string name;
    std::vector<int> shape;
  };
  std::vector<T> ts = {{"model.transformer.wte.weight", {16, 8}},
                       {"model.transformer.blocks.0.attn_norm.weight", {8}},
                       {"model.transformer.blocks.0.q_proj.weight", {8, 8}},
                       {"model.transformer.blocks.0.k_proj.weight", {8, 8}},
                       {"model.transformer.blocks.0.v_proj.weight", {8, 8}},
                       {"model.transformer.blocks.0.attn_out.weight", {8, 8}},
                       {"model.transformer.blocks.0.ff_norm.weight", {8}},
                       {"model.transformer.blocks.0.ff_proj.weight", {16, 8}},
                       {"model.transformer.blocks.0.up_proj.weight", {16, 8}},
                       {"model.transformer.blocks.0.ff_out.weight", {8, 16}},
                       {"model.transformer.ln_f.weight", {8}},
                       {"model.transformer.ff_out.weight", {16, 8}},
                       {"model.transformer.extra.weight", {1}}};
  std::string h = "{";
  size_t off = 0;
  for (auto& t : ts) {
    if (t.name == skip) continue;
    if (t.name == "model.transformer.extra.weight" && skip != "(add extra)") continue;
    if (t.name == bad_shape_name) t.shape[0] += 1;
    size_t n = 4;
    std::string shp;
    for (int v : t.shape) {
      n *= v;
      shp += fmt::format("{}{}", shp.empty() ? "" : ",", v);
    }
    h += fmt::format(R"({}"{}":{{"dtype":"F32","shape":[{}],"data_offsets":[{},{}]}})",
                     h.size() > 1 ? "," : "", t.name, shp, off, off + n);
    off += n;
  }
  return safetensors_bytes(h + "}", off);
}

TEST(Weights, MissingTensor) {
  TempDir d;
  write_bytes(d.file("config.json"), kLLaDAConfig);
  write_bytes(d.file("model.safetensors"),
              llada_header("model.transformer.blocks.0.up_proj.weight", ""));
  expect_error([&] { Model::load(d.path().string()); },
               {"missing tensor 'model.transformer.blocks.0.up_proj.weight'", "llada"});
}

TEST(Weights, UnexpectedTensor) {
  TempDir d;
  write_bytes(d.file("config.json"), kLLaDAConfig);
  write_bytes(d.file("model.safetensors"), llada_header("(add extra)", ""));
  expect_error([&] { Model::load(d.path().string()); },
               {"unexpected tensor 'model.transformer.extra.weight'"});
}

TEST(Weights, ShapeDisagreesWithConfig) {
  TempDir d;
  write_bytes(d.file("config.json"), kLLaDAConfig);
  write_bytes(d.file("model.safetensors"),
              llada_header("", "model.transformer.blocks.0.k_proj.weight"));
  expect_error(
      [&] { Model::load(d.path().string()); },
      {"model.safetensors", "tensor 'model.transformer.blocks.0.k_proj.weight' has shape [9, 8]",
       "expects [8, 8]"});
}

TEST(Weights, LoadsCompleteCheckpoint) {
  TempDir d;
  write_bytes(d.file("config.json"), kLLaDAConfig);
  write_bytes(d.file("model.safetensors"), llada_header("", ""));
  auto m = Model::load(d.path().string());
  EXPECT_EQ(m->weights().layers.size(), 1u);
  EXPECT_EQ(m->weights().n_params, size_t(16 * 8 * 2 + 8 * 3 + 8 * 8 * 4 + 16 * 8 * 3));
}

// generation_config.json: optional; present fields must be positive integers.
TEST(GenerationConfig, DefaultsAndErrors) {
  TempDir d;
  GenerationDefaults none = load_generation_defaults(d.path().string());
  EXPECT_FALSE(none.gen_length || none.block_length || none.steps);
  const std::string f = d.file("generation_config.json");
  write_bytes(f, R"({"bos_token_id": 1, "max_new_tokens": 48, "block_length": 16})");
  GenerationDefaults g = load_generation_defaults(d.path().string());
  EXPECT_EQ(g.gen_length, 48);
  EXPECT_EQ(g.block_length, 16);
  EXPECT_FALSE(g.steps);
  write_bytes(f, R"({"max_new_tokens": -4})");
  expect_error([&] { load_generation_defaults(d.path().string()); },
               {f, "'max_new_tokens'", "positive integer", "-4"});
  write_bytes(f, R"({"steps": "48"})");
  expect_error([&] { load_generation_defaults(d.path().string()); }, {f, "'steps'", "\"48\""});
  write_bytes(f, R"({"max_new_tokens": 48,)");
  expect_error([&] { load_generation_defaults(d.path().string()); }, {f, "malformed JSON"});
  write_bytes(f, "[48]");
  expect_error([&] { load_generation_defaults(d.path().string()); }, {f, "JSON object"});
}

}  // namespace
}  // namespace dllmq
