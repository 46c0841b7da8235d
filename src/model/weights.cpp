#include "model/weights.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "model/moe.h"
#include "model/projections.h"
#include "util/error.h"
#include "util/mmap_file.h"
#include "wquant/gptq_tensors.h"

namespace dllmq {

namespace {

// Tensor names of one architecture, as released.
struct Names {
  std::string embed, final_norm, lm_head;
  std::string layer_prefix;  // with {} for the layer index
  std::string attn_norm, q, k, v, o, ffn_norm, gate, up, down;
};

Names names_for(Layout a) {
  if (a == Layout::kLLaDA)
    return {"model.transformer.wte.weight",
            "model.transformer.ln_f.weight",
            "model.transformer.ff_out.weight",
            "model.transformer.blocks.{}.",
            "attn_norm",
            "q_proj",
            "k_proj",
            "v_proj",
            "attn_out",
            "ff_norm",
            "ff_proj",
            "up_proj",
            "ff_out"};
  // Dream (Qwen2) and LLaDA-MoE (OLMoE) use the Hugging Face llama names.
  return {"model.embed_tokens.weight",
          "model.norm.weight",
          "lm_head.weight",
          "model.layers.{}.",
          "input_layernorm",
          "self_attn.q_proj",
          "self_attn.k_proj",
          "self_attn.v_proj",
          "self_attn.o_proj",
          "post_attention_layernorm",
          "mlp.gate_proj",
          "mlp.up_proj",
          "mlp.down_proj"};
}

}  // namespace

const TensorView* TensorBinder::get(const std::string& name, std::vector<int64_t> shape) {
  const TensorView* t = c_.find(name);
  if (t == nullptr)
    fail("{}: missing tensor '{}' required by the {} architecture", c_.dir(), name,
         layout_name(cfg_.layout));
  if (t->dtype == DType::kI32)
    fail("{}: tensor '{}' is I32; a floating-point tensor (BF16, F16 or F32) is expected here",
         t->file, name);
  if (t->shape != shape)
    fail(
        "{}: tensor '{}' has shape {} but config.json (d_model {}, heads {}/{}, mlp {}, vocab "
        "{}) "
        "expects [{}]",
        t->file, name, t->shape_str(), cfg_.d_model, cfg_.n_heads, cfg_.n_kv_heads, cfg_.mlp_hidden,
        cfg_.vocab_size, fmt::join(shape, ", "));
  used_.insert(name);
  n_params_ += t->numel();
  return t;
}

std::vector<float> TensorBinder::vec(const std::string& name, int d) {
  const TensorView* t = get(name, {d});
  std::vector<float> out(d);
  to_f32(t->dtype, t->data, out.data(), d);
  return out;
}

Linear TensorBinder::lin(const std::string& base, int out, int in, bool bias) {
  Linear l;
  if (c_.find(base + ".weight") == nullptr && c_.find(base + ".qweight") != nullptr) {
    if (!qc_.enabled)
      fail(
          "{}: tensor '{}.qweight' is GPTQ-quantized but config.json has no "
          "quantization_config (nor is there a quantize_config.json)",
          c_.dir(), base);
    // Decoded when packed (Model::pack_weights, one projection at a time), not here: the unpacked
    // codes take a byte per weight, so decoding every projection first would hold the whole
    // model's codes at once (about 2x an int8 and 4x an int4 checkpoint). Once decoded, the
    // GPTQ tensors' mapped pages are dropped: the packed copy is the one that stays.
    const Checkpoint& ckpt = c_;
    const WeightQuantConfig qc = qc_;
    l.decode = [&ckpt, base, out, in, qc] {
      QuantMatrix m = decode_gptq(ckpt, base, out, in, qc);
      for (const std::string& n : gptq_tensor_names(base))
        if (const TensorView* t = ckpt.find(n)) release_mapped_pages(t->data, t->nbytes);
      return m;
    };
    l.quant_bits = qc_.scheme.bits;
    for (const std::string& n : gptq_tensor_names(base)) {
      used_.insert(n);
      if (const TensorView* t = c_.find(n)) l.quant_bytes += t->nbytes;
    }
    n_params_ += size_t(out) * in;
    // AutoGPTQ gives every quantized projection a bias (all zero where the model has none) and
    // saves it; its own forward adds it, so the projection does too (test_gptq_heldout.py).
    if (!bias && c_.find(base + ".bias") != nullptr) l.b = get(base + ".bias", {out});
  } else {
    l.w = get(base + ".weight", {out, in});
  }
  if (bias) l.b = get(base + ".bias", {out});
  l.out = out;
  l.in = in;
  return l;
}

void TensorBinder::check_unexpected() const {
  for (auto& [name, t] : c_.tensors())
    if (!used_.count(name))
      fail(
          "{}: unexpected tensor '{}' for the {} architecture (config.json n_layers {}, tying "
          "{})",
          t->file, name, layout_name(cfg_.layout), cfg_.n_layers, cfg_.tied_embeddings);
}

std::string weight_format(const ModelWeights& w) {
  return w.quant.enabled ? weight_format_label(w.quant) : std::string(dtype_name(w.dtype));
}

ModelWeights bind_weights(const Checkpoint& ckpt, const ModelConfig& cfg,
                          const WeightQuantConfig& qc) {
  const Names nm = names_for(cfg.layout);
  TensorBinder b(ckpt, cfg, qc);
  ModelWeights w;
  w.quant = qc;
  const int d = cfg.d_model, qd = cfg.n_heads * cfg.head_dim, kvd = cfg.kv_dim();
  w.embed = b.get(nm.embed, {cfg.vocab_size, d});
  w.dtype = w.embed->dtype;
  size_t active_skipped = 0;  // parameters of experts a token is not routed to
  for (int i = 0; i < cfg.n_layers; ++i) {
    const std::string p = fmt::format(fmt::runtime(nm.layer_prefix), i);
    LayerWeights L;
    L.attn_norm = b.vec(p + nm.attn_norm + ".weight", d);
    L.q = b.lin(p + nm.q, qd, d, cfg.qkv_bias);
    L.k = b.lin(p + nm.k, kvd, d, cfg.qkv_bias);
    L.v = b.lin(p + nm.v, kvd, d, cfg.qkv_bias);
    L.o = b.lin(p + nm.o, d, qd, cfg.out_bias);
    if (cfg.qk_norm) {
      L.q_norm = b.vec(p + "self_attn.q_norm.weight", cfg.head_dim);
      L.k_norm = b.vec(p + "self_attn.k_norm.weight", cfg.head_dim);
    }
    L.ffn_norm = b.vec(p + nm.ffn_norm + ".weight", d);
    if (cfg.moe.is_moe(i)) {
      L.moe = bind_moe_ffn(b, cfg, i, p);
      active_skipped += moe_total_params(*L.moe) - moe_active_params(*L.moe);
    } else {
      const int mlp = cfg.moe.enabled() ? cfg.moe.dense_hidden : cfg.mlp_hidden;
      L.gate = b.lin(p + nm.gate, mlp, d, false);
      L.up = b.lin(p + nm.up, mlp, d, false);
      L.down = b.lin(p + nm.down, d, mlp, false);
    }
    w.layers.push_back(std::move(L));
  }
  w.final_norm = b.vec(nm.final_norm, d);
  if (cfg.tied_embeddings) {
    w.lm_head = {w.embed, nullptr, cfg.vocab_size, d};
  } else {
    w.lm_head = b.lin(nm.lm_head.substr(0, nm.lm_head.size() - 7), cfg.vocab_size, d, false);
  }
  b.check_unexpected();
  for_each_projection(w, [&w](const Linear& l) {
    if (l.decode)
      w.proj_bytes += l.quant_bytes;
    else if (l.w)
      w.proj_bytes += l.w->nbytes;
    w.proj_bits = std::max(w.proj_bits, l.weight_bits());
  });
  w.n_params = b.n_params();
  w.n_active_params = w.n_params - active_skipped;
  return w;
}

}  // namespace dllmq
