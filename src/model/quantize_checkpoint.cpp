#include "model/quantize_checkpoint.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "io/model_config.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "model/projections.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "wquant/gptq_tensors.h"
#include "wquant/quant_config.h"

namespace dllmq {

namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) fail("{}: cannot read", p.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The projection weights to quantize: attention q/k/v/o, the dense MLP, MoE experts (shared
// ones too). Not the embedding, norms, LM head or MoE router.
std::set<const TensorView*> projection_weights(const ModelWeights& w) {
  std::set<const TensorView*> out;
  for_each_projection(w, [&](const Linear& l) {
    if (l.w != nullptr) out.insert(l.w);
  });
  return out;
}

std::string as_bytes(const void* p, size_t n) {
  return std::string(static_cast<const char*>(p), n);
}

}  // namespace

QuantizeReport quantize_checkpoint(const std::string& in_dir, const std::string& out_dir,
                                   const WeightQuantScheme& s) {
  check_weight_quant_scheme(s, "--weights/--group");
  std::error_code ec;
  if (fs::exists(out_dir, ec) && fs::equivalent(in_dir, out_dir, ec))
    fail("--out {}: is the input model directory; choose a new directory", out_dir);
  if (load_weight_quant_config(in_dir).enabled)
    fail("-m {}: is already quantized (quantization_config); quantize the original checkpoint",
         in_dir);
  const ModelConfig cfg = load_model_config(in_dir);
  const Checkpoint ckpt(in_dir);
  const ModelWeights w = bind_weights(ckpt, cfg);
  const std::set<const TensorView*> proj = projection_weights(w);

  WeightQuantConfig qc;
  qc.enabled = true;
  qc.scheme = s;
  qc.v1 = s.sym;

  QuantizeReport rep;
  std::vector<OutTensor> out;
  for (const auto& [tensor_name, tensor] : ckpt.tensors()) {
    const std::string& name = tensor_name;
    const TensorView* t = tensor;
    rep.total_bytes_before += t->nbytes;
    if (!proj.count(t)) {
      out.push_back({name, t->dtype, t->shape, [t] { return as_bytes(t->data, t->nbytes); }});
      rep.total_bytes_after += t->nbytes;
      continue;
    }
    const std::string base = name.substr(0, name.size() - std::string(".weight").size());
    const int n = int(t->shape[0]), k = int(t->shape[1]);
    // The codes are computed once per tensor, here, so that their size is known for the header
    // and errors come before anything is written; the writer then streams them.
    auto g = std::make_shared<GptqTensors>(
        encode_gptq(quantize_rtn(t->data, t->dtype, n, k, s, name), qc.v1, base));
    auto i32 = [](const std::vector<int32_t>& v) { return as_bytes(v.data(), v.size() * 4); };
    out.push_back(
        {base + ".qweight", DType::kI32, g->qweight_shape, [g, i32] { return i32(g->qweight); }});
    out.push_back(
        {base + ".qzeros", DType::kI32, g->qzeros_shape, [g, i32] { return i32(g->qzeros); }});
    out.push_back({base + ".scales", DType::kF16, g->scales_shape,
                   [g] { return as_bytes(g->scales.data(), g->scales.size() * 2); }});
    out.push_back(
        {base + ".g_idx", DType::kI32, g->g_idx_shape, [g, i32] { return i32(g->g_idx); }});
    const size_t qbytes =
        (g->qweight.size() + g->qzeros.size() + g->g_idx.size()) * 4 + g->scales.size() * 2;
    rep.n_quantized++;
    rep.proj_bytes_before += t->nbytes;
    rep.proj_bytes_after += qbytes;
    rep.total_bytes_after += qbytes;
  }
  fs::create_directories(out_dir, ec);
  if (ec) fail("--out {}: cannot create directory: {}", out_dir, ec.message());
  write_safetensors((fs::path(out_dir) / "model.safetensors").string(), out,
                    {{"format", "pt"}, {"quantized_by", "dllmq quantize"}});

  nlohmann::ordered_json j =
      nlohmann::ordered_json::parse(read_all(fs::path(in_dir) / "config.json"));
  j["quantization_config"] = nlohmann::ordered_json::parse(weight_quant_config_json(qc));
  write_file_atomic((fs::path(out_dir) / "config.json").string(), j.dump(2) + "\n");
  for (const auto& e : fs::directory_iterator(in_dir)) {
    const std::string fn = e.path().filename().string();
    if (!e.is_regular_file() || fn == "config.json" || fn == "model.safetensors.index.json" ||
        e.path().extension() == ".safetensors")
      continue;
    write_file_atomic((fs::path(out_dir) / fn).string(), read_all(e.path()));
  }
  return rep;
}

}  // namespace dllmq
