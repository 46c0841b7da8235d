// Validation where inputs enter (issue 16): config.json ranges and architecture consistency,
// generation_config.json, the safetensors index, safetensors shapes whose sizes overflow,
// calibration artifact metadata. Every refusal is a dllmq::Error naming the file and field.
#include <gtest/gtest.h>

#include <span>
#include <string>

#include "io/calib_artifact.h"
#include "io/generation_config.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace dllmq {
namespace {

using test_util::expect_error;

const std::string kLLaDA =
    R"({"model_type":"llada","architectures":["LLaDAModelLM"],"d_model":8,"n_heads":2,)"
    R"("n_kv_heads":2,"n_layers":1,"mlp_hidden_size":16,"vocab_size":16,"embedding_size":16,)"
    R"("rope_theta":10000.0,"rms_norm_eps":1e-5,"mask_token_id":15,"eos_token_id":14})";
const std::string kDream =
    R"({"model_type":"Dream","architectures":["DreamModel"],"hidden_size":8,)"
    R"("num_attention_heads":2,"num_key_value_heads":1,"num_hidden_layers":1,)"
    R"("intermediate_size":16,"vocab_size":16,"rope_theta":1e6,"rms_norm_eps":1e-6,)"
    R"("mask_token_id":15,"eos_token_id":14})";

// `base` with the JSON value of `field` replaced (or the field added when absent).
std::string with(std::string base, const std::string& field, const std::string& value) {
  const std::string key = "\"" + field + "\":";
  const size_t k = base.find(key);
  if (k == std::string::npos) return base.substr(0, base.size() - 1) + "," + key + value + "}";
  const size_t v = k + key.size();
  size_t e = v;
  while (e < base.size() && base[e] != ',' && base[e] != '}') ++e;
  if (base[v] == '[') e = base.find(']', v) + 1;
  return base.replace(v, e - v, value);
}

ModelConfig parse(const std::string& text) {
  return parse_model_config(text, "m/config.json");
}

TEST(ConfigValidation, AcceptsBothArchitectures) {
  EXPECT_EQ(parse(kLLaDA).arch, Arch::kLLaDA);
  const ModelConfig d = parse(kDream);
  EXPECT_EQ(d.arch, Arch::kDream);
  EXPECT_EQ(d.head_dim, 4);
}

// The class behind "a config field outside its range gave NaN logits with exit 0": a norm
// epsilon or RoPE base that is zero, negative or not finite.
TEST(ConfigValidation, RealFieldsFinitePositive) {
  // 1e-0299 and 1e-300: positive doubles that are 0 as floats, or make RoPE's frequencies
  // infinite (the fuzz finding fuzz/regressions/model_config/eps-zero-in-float).
  for (const char* v : {"0", "-1e-5", "2.5", "\"1e-5\"", "1e-0299", "1e-31"})
    expect_error([&] { parse(with(kLLaDA, "rms_norm_eps", v)); },
                 {"m/config.json", "'rms_norm_eps'", "finite number in [1e-30, 1)"});
  for (const char* v : {"0", "-10000", "1e13", "1e-300", "0.5"})
    expect_error([&] { parse(with(kDream, "rope_theta", v)); },
                 {"m/config.json", "'rope_theta'", "finite number in [1, 1e+12)"});
  EXPECT_FLOAT_EQ(parse(with(kLLaDA, "rms_norm_eps", "1e-12")).rms_eps, 1e-12f);
  EXPECT_EQ(parse(with(kDream, "rope_theta", "1")).rope_theta, 1.0);
  // A number too large for a double never becomes infinity: the JSON reader refuses it.
  expect_error([&] { parse(with(kDream, "rope_theta", "1e999")); },
               {"m/config.json", "number overflow parsing '1e999'"});
}

TEST(ConfigValidation, GeometryPositiveAndDivisible) {
  for (const char* f : {"d_model", "n_heads", "n_layers", "mlp_hidden_size", "vocab_size"})
    expect_error([&] { parse(with(kLLaDA, f, "0")); },
                 {"m/config.json", std::string("'") + f + "'", "[1, 1073741824]"});
  expect_error([&] { parse(with(kLLaDA, "n_layers", "18446744073709551615")); },
               {"'n_layers'", "out of range"});
  expect_error([&] { parse(with(kLLaDA, "n_heads", "3")); }, {"not divisible", "heads 3"});
  expect_error([&] { parse(with(kDream, "num_key_value_heads", "3")); },
               {"not a multiple of the KV heads 3"});
  expect_error([&] { parse(with(with(kLLaDA, "d_model", "6"), "n_heads", "2")); },
               {"head dim 3 must be even"});
  expect_error([&] { parse(with(kDream, "head_dim", "8")); }, {"head_dim 8 contradicts", "= 4"});
  expect_error([&] { parse(with(kLLaDA, "embedding_size", "8")); }, {"'embedding_size'", "[16, "});
}

TEST(ConfigValidation, TokenIdsInsideVocabulary) {
  expect_error([&] { parse(with(kLLaDA, "mask_token_id", "16")); },
               {"mask_token_id 16 outside the vocabulary [0, 16)"});
  expect_error([&] { parse(with(kLLaDA, "eos_token_id", "99")); }, {"eos_token_id 99"});
  expect_error([&] { parse(with(kDream, "pad_token_id", "16")); }, {"pad_token_id 16"});
  expect_error([&] { parse(with(kLLaDA, "eos_token_id", "-3")); }, {"'eos_token_id'"});
}

// The class behind "a field contradicting another about which architecture this is was
// accepted": model_type, architectures and the geometry names must agree.
TEST(ConfigValidation, ArchitectureFieldsAgree) {
  expect_error([&] { parse(with(kLLaDA, "architectures", R"(["DreamModel"])")); },
               {"model_type 'llada' and architectures ['DreamModel'] name different"});
  expect_error([&] { parse(with(kDream, "model_type", "\"llada\"")); },
               {"name different architectures"});
  expect_error([&] { parse(with(kDream, "architectures", R"(["GPT2LMHeadModel"])")); },
               {"name different architectures"});
  expect_error([&] { parse(with(kLLaDA, "hidden_size", "8")); },
               {"'hidden_size' belongs to Dream configs"});
  expect_error([&] { parse(with(kDream, "n_layers", "1")); },
               {"'n_layers' belongs to LLaDA configs"});
  expect_error([&] { parse(with(kLLaDA, "architectures", R"(["LLaDAModelLM","DreamModel"])")); },
               {"'architectures' must be a list of one class name"});
  expect_error([&] { parse(with(kLLaDA, "model_type", "7")); }, {"'model_type' must be a string"});
}

TEST(GenerationConfigValidation, PositiveIntegers) {
  EXPECT_EQ(*parse_generation_defaults(R"({"max_new_tokens":48})", "g.json").gen_length, 48);
  for (const char* v : {"0", "-1", "1.5", "\"48\"", "18446744073709551615", "16777217"})
    expect_error(
        [&] { parse_generation_defaults(std::string(R"({"steps":)") + v + "}", "g.json"); },
        {"g.json", "'steps'", "[1, 16777216]"});
}

TEST(SafetensorsIndexValidation, ShardNamesStayInTheDirectory) {
  const auto ok = parse_safetensors_index(
      R"({"weight_map":{"a":"x.safetensors","b":"x.safetensors"}})", "i.json");
  EXPECT_EQ(ok.shards.size(), 1u);
  for (const char* s : {"../x.safetensors", "/etc/passwd", "", "..", "a/b"})
    expect_error(
        [&] {
          parse_safetensors_index(std::string(R"({"weight_map":{"a":")") + s + "\"}}", "i.json");
        },
        {"i.json", "weight_map['a']", "expected a file name in the model directory"});
  expect_error([&] { parse_safetensors_index(R"({"weight_map":{}})", "i.json"); },
               {"lists no tensors"});
  expect_error([&] { parse_safetensors_index("[1]", "i.json"); }, {"'weight_map'"});
}

std::string st_bytes(const std::string& header, size_t data_len) {
  return test_util::safetensors_bytes(header, data_len);
}

SafetensorsFile st(const std::string& bytes) {
  return SafetensorsFile("t.safetensors",
                         std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

// Shapes whose element count overflows 64 bits used to wrap around to a count that matched the
// offsets (UBSan: signed overflow in numel()).
TEST(SafetensorsValidation, ShapeProductOverflow) {
  expect_error(
      [&] {
        st(st_bytes(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})",
                    0));
      },
      {"t.safetensors", "tensor 'w'", "more elements than 64 bits"});
  expect_error(
      [&] {
        st(st_bytes(R"({"w":{"dtype":"F32","shape":[4611686018427387905],"data_offsets":[0,8]}})",
                    8));
      },
      {"tensor 'w'", "needs more bytes than 64 bits can count"});
  const auto f = st(
      st_bytes(R"({"w":{"dtype":"F32","shape":[0,4611686018427387904],"data_offsets":[0,0]}})", 0));
  EXPECT_EQ(f.tensors().at("w").numel(), 0);
}

std::string artifact_with(const std::string& key, const std::string& value) {
  std::string md = R"({"format":"dllmq-calib","version":"1","method":"dllm-kvq","trajectory":"ar",)"
                   R"("fisher":"none","kv_bits_k":"2","kv_bits_v":"2","outlier_percent":"1",)"
                   R"("sink":"1","model_fingerprint":"f","n_layers":"1","n_kv_heads":"1",)"
                   R"("head_dim":"2","n_pairs":"1","n_tokens":"9","data_hash":"0"})";
  const std::string k = "\"" + key + "\":\"";
  const size_t p = md.find(k) + k.size();
  md.replace(p, md.find('"', p) - p, value);
  // 1-byte-aligned offsets: the loader must not read floats through a misaligned pointer.
  const std::string h =
      R"({"__metadata__":)" + md +
      R"(,"layers.0.k_channel_scores":{"dtype":"F32","shape":[1,2],"data_offsets":[1,9]},)"
      R"("layers.0.k_fp16_channels":{"dtype":"F32","shape":[0],"data_offsets":[9,9]}})";
  return st_bytes(h, 9);
}

TEST(CalibArtifactValidation, MetadataNumbers) {
  const std::string good = artifact_with("n_tokens", "9");
  const CalibArtifact a = parse_calib_artifact(st(good));
  EXPECT_EQ(a.n_tokens, 9);
  EXPECT_EQ(a.layers.at(0).k_channel_scores.size(), 2u);
  const std::string bad_tokens = artifact_with("n_tokens", "many");  // was std::invalid_argument
  expect_error([&] { parse_calib_artifact(st(bad_tokens)); },
               {"t.safetensors", "metadata 'n_tokens' = 'many'"});
  const std::string bad_bits = artifact_with("kv_bits_k", "5");
  expect_error([&] { parse_calib_artifact(st(bad_bits)); }, {"expected 2, 3, 4 or 8"});
}

// Token ids index dense tables: a huge id in a tiny file allocated gigabytes (fuzz_tiktoken's
// out-of-memory finding, fuzz/regressions/tiktoken/oom-huge-rank). Bounded where read.
TEST(TokenizerValidation, TokenIdsBounded) {
  expect_error([] { load_tiktoken_text("YQ== 699999998\n", "t.tiktoken", {}); },
               {"t.tiktoken:1", "rank field '699999998'", "[0, 65538]"});
  const std::string pre = R"("pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false})";
  expect_error(
      [&] {
        load_tokenizer_json_text(
            R"({"model":{"type":"BPE","vocab":{"a":2000000000},"merges":[]},)" + pre + "}",
            "tok.json");
      },
      {"tok.json", "vocab entry 'a'", "id 2000000000 is not an integer in [0, 65537]"});
  expect_error(
      [&] {
        load_tokenizer_json_text(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},)" + pre +
                                     R"(,"added_tokens":[{"id":16777216,"content":"<x>"}]})",
                                 "tok.json");
      },
      {"tok.json", "added token '<x>'", "[0, 16777215]"});
  expect_error([] { load_vocab_merges_text(R"({"a":2000000000})", "", "v.json", "m.txt"); },
               {"v.json", "vocab entry 'a'"});
}

}  // namespace
}  // namespace dllmq
