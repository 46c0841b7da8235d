// dllmq inspect -m DIR: architecture, geometry, parameters, weight bytes, KV bytes per token.
#include <cstdio>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_names.h"
#include "cli/openmp_policy.h"
#include "model/model.h"
#include "ops/gemm.h"
#include "ops/int8_act_gemm.h"

namespace dllmq::cli {

void register_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Describe a model directory");
  auto model = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  cmd->add_option("-m,--model", *model, "model directory (config.json + safetensors)")
      ->required()
      ->transform(model_name_transform());
  cmd->add_flag("--json", *as_json, "print one JSON object");
  cmd->callback([=] {
    auto m = Model::load(*model);
    const ModelConfig& c = m->config();
    const size_t wbytes = m->checkpoint().total_bytes();
    // "int4-g128-sym" for GPTQ codes (embeddings, norms and LM head stay in `weight_dtype`).
    const std::string wformat = weight_format(m->weights());
    nlohmann::json j = {{"architecture", layout_name(c.layout)},
                        {"decoding", arch_name(c.arch)},
                        {"model_type", c.model_type},
                        {"n_layers", c.n_layers},
                        {"d_model", c.d_model},
                        {"n_heads", c.n_heads},
                        {"n_kv_heads", c.n_kv_heads},
                        {"head_dim", c.head_dim},
                        {"mlp_hidden", c.mlp_hidden},
                        {"vocab_size", c.vocab_size},
                        {"rope_theta", c.rope_theta},
                        {"tied_embeddings", c.tied_embeddings},
                        {"qkv_bias", c.qkv_bias},
                        {"logits_shift", c.logits_shift},
                        {"mask_id", c.mask_id},
                        {"eos_id", c.eos_id},
                        {"n_params", m->weights().n_params},
                        {"n_active_params", m->weights().n_active_params},
                        {"weight_dtype", std::string(dtype_name(m->weights().dtype))},
                        {"weight_bytes", wbytes},
                        {"weight_format", wformat},
                        {"proj_weight_bits", m->weights().proj_bits},
                        {"proj_weight_bytes", m->weights().proj_bytes},
                        {"kv_bytes_per_token_fp16", c.kv_bytes_per_token_fp16()}};
    const GemmInfo& g = gemm_info();
    j["gemm_backend"] = g.name;
    j["gemm_isa"] = g.isa;
    j["cpu_isa"] = g.cpu_isa;
    j["gemm_generic"] = g.generic;
    j["proj_kernels"] = std::string("packed ") + g.proj_isa;
    j["bf16_native"] = g.bf16_native;
    j["bf16_dot"] = g.bf16_dot;
    j["bf16_amx"] = g.bf16_amx;
    j["bf16_why"] = g.bf16_why;
    j["w8a8_kernel"] = int8_act_kernel_name();  // what --w8a8 would run (docs/weight_quant.md)
    j["threads"] = gemm_threads();
    j["openmp_wait"] = openmp_wait_description();
    if (c.moe.enabled()) {
      int n_moe = 0;
      for (int l = 0; l < c.n_layers; ++l) n_moe += c.moe.is_moe(l);
      j["moe"] = {
          {"n_experts", c.moe.n_experts},           {"top_k", c.moe.top_k},
          {"expert_hidden", c.moe.expert_hidden},   {"shared_expert_hidden", c.moe.shared_hidden},
          {"dense_hidden", c.moe.dense_hidden},     {"moe_layers", n_moe},
          {"router_expert_bias", c.moe.expert_bias}};
      j["qk_norm"] = c.qk_norm;
      // Bytes of the weights one token reads (its experts, not the others').
      const double frac = double(m->weights().n_active_params) / double(m->weights().n_params);
      j["active_weight_bytes"] = size_t(double(wbytes) * frac);
    }
    if (*as_json) {
      std::puts(j.dump().c_str());
      return;
    }
    fmt::print("model          {}\n", *model);
    fmt::print("architecture   {} (model_type '{}'){}\n", layout_name(c.layout), c.model_type,
               c.logits_shift ? ", logits shifted by 1 (row j predicts token j+1)" : "");
    fmt::print("layers         {}\n", c.n_layers);
    fmt::print("d_model        {}\n", c.d_model);
    fmt::print("heads          {} query, {} KV (head dim {}){}\n", c.n_heads, c.n_kv_heads,
               c.head_dim, c.n_heads != c.n_kv_heads ? ", grouped-query" : "");
    if (c.moe.enabled()) {
      fmt::print(
          "experts        {} routed, top {}, width {}; shared expert {}; {} of {} layers "
          "MoE{}\n",
          c.moe.n_experts, c.moe.top_k, c.moe.expert_hidden,
          c.moe.shared_hidden ? fmt::format("width {}", c.moe.shared_hidden) : "none",
          j["moe"]["moe_layers"].get<int>(), c.n_layers,
          c.moe.dense_hidden ? fmt::format(" (dense MLP {})", c.moe.dense_hidden) : "");
      fmt::print("qk norm        {}\n", c.qk_norm ? "per-head RMSNorm" : "none");
    } else {
      fmt::print("mlp hidden     {}\n", c.mlp_hidden);
    }
    fmt::print("vocab          {} (mask {}, eos {})\n", c.vocab_size, c.mask_id, c.eos_id);
    fmt::print("rope theta     {}\n", c.rope_theta);
    fmt::print("parameters     {} ({:.3f} B)\n", m->weights().n_params,
               m->weights().n_params / 1e9);
    if (c.moe.enabled())
      fmt::print("active         {} ({:.3f} B) per token, {} weight bytes\n",
                 m->weights().n_active_params, m->weights().n_active_params / 1e9,
                 j["active_weight_bytes"].get<size_t>());
    if (m->weights().quant.enabled)
      fmt::print(
          "weights        {} bytes; projections {} ({} bits, {} bytes with scales, zeros and "
          "g_idx), the rest {}\n",
          wbytes, wformat, m->weights().proj_bits, m->weights().proj_bytes,
          dtype_name(m->weights().dtype));
    else
      fmt::print("weights        {} bytes, dtype {} (packed at load in that dtype)\n", wbytes,
                 dtype_name(m->weights().dtype));
    fmt::print("KV per token   {} bytes at fp16 (K+V, all layers)\n", c.kv_bytes_per_token_fp16());
    fmt::print("projections    packed-weight kernels for {} ({})\n", g.proj_isa, g.proj_why);
    fmt::print("gemm backend   {}, kernels for {} (CPU has {}){}\n", g.name, g.isa, g.cpu_isa,
               g.generic ? ": GENERIC, slow" : "");
    fmt::print("               {}\n", g.why);
    fmt::print("bf16 products  {}\n", g.bf16_why);
    fmt::print("--w8a8         int8 activations on {}{}\n", int8_act_kernel_name(),
               int8_act_vnni() ? " (vpdpbusd; an approximation, weight-quantized models only)"
                               : " twin: no AVX512-VNNI usable here, so slow");
    fmt::print("threads        {} (OpenMP wait: {})\n", gemm_threads(), openmp_wait_description());
  });
}

}  // namespace dllmq::cli
