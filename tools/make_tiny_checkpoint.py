#!/usr/bin/python3
"""Write a tiny, seeded, random LLaDA, LLaDA-MoE or Dream checkpoint with the released tensor names.

    make_tiny_checkpoint.py --arch llada|dream|lladamoe --out DIR [--seed S] [--shards N]
                            [--dtype bf16|f16|f32] [--tied]
                            [--layers N] [--d-model D] [--heads H] [--kv-heads K]
                            [--head-dim HD] [--mlp M] [--vocab V]
                            [--mask-id ID] [--eos-id ID] [--lm-head-std S]
                            [--w-std S] [--emb-std S] [--zero-mask-logit]
                            [--eot-id ID] [--boost-eos X] [--plant L:C1,C2,...:S]

Defaults: LLaDA d_model 64, 2 layers, 4 heads (head_dim 16), MHA, mlp 128, vocab 128,
mask 120, eos/pad 121, rope_theta 500000, eps 1e-5.  Dream hidden 64, 2 layers,
4 heads, 2 kv heads, intermediate 128, vocab 128, mask 120, eos/pad/bos 121,
rope_theta 1e6, eps 1e-6, q/k/v bias.  --head-dim sets d_model = heads * head_dim.

Tensor names follow the released checkpoints (reference doc §1.2 / §2.2):
  LLaDA: model.transformer.wte.weight, model.transformer.blocks.{i}.{attn_norm,q_proj,
         k_proj,v_proj,attn_out,ff_norm,ff_proj,up_proj,ff_out}.weight,
         model.transformer.ln_f.weight, model.transformer.ff_out.weight (absent if tied)
  Dream: model.embed_tokens.weight, model.layers.{i}.input_layernorm.weight,
         model.layers.{i}.self_attn.{q,k,v}_proj.{weight,bias}, self_attn.o_proj.weight,
         post_attention_layernorm.weight, mlp.{gate,up,down}_proj.weight,
         model.norm.weight, lm_head.weight (absent if tied)
  LLaDA-MoE (released LLaDAMoEModelLM, OLMoE names): model.embed_tokens.weight,
         model.layers.{i}.input_layernorm.weight, self_attn.{q,k,v,o}_proj.weight,
         self_attn.{q,k}_norm.weight [head_dim], post_attention_layernorm.weight,
         MoE layers: mlp.gate.weight [experts, D] (the router), mlp.experts.{e}.{gate,up,down}_proj
         .weight, mlp.expert_bias [experts] (with --expert-bias), shared_expert.{gate,up,down}_proj
         .weight (with --shared-mlp); dense layers (--dense-layers): mlp.{gate,up,down}_proj.weight;
         model.norm.weight, lm_head.weight.  Defaults: hidden 64, 2 layers, 4 heads, 4 experts
         top-2 of width 32, QK norm, rope_theta 50000, vocab 128, mask 120, eos/pad 121.
         --router tie:E1,E2,..  copies expert E1's router row to the others (equal router logits:
         the top-k tie rule decides); --router zero: every router logit 0 (all rows take the same
         experts, chosen by the tie rule alone).
Weights are drawn in float32 from a numpy Generator(seed) and then stored in --dtype.

--plant L:C1,C2,...:S ("planted channels", repeatable) multiplies, in layer L, the k_proj rows of
the K channels C (flattened kv_head * head_dim + c) and the q_proj rows of the same channel c in
every query head served by that KV head (biases too) by S, so those channels carry ~S^2 times the
share of the attention logits q.k. RoPE rotates channel c with c +- head_dim/2: plant both of a
pair (e.g. 7 and 15 for head_dim 16) so the post-RoPE channels stay the planted ones.
Also importable: make_checkpoint(arch, out, **kw) -> config dict.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np as st  # noqa: E402
from atomic_write import atomic_open  # noqa: E402

DEFAULTS = {
    "llada": dict(layers=2, d_model=64, heads=4, kv_heads=4, mlp=128, vocab=128,
                  mask_id=120, eos_id=121),
    "dream": dict(layers=2, d_model=64, heads=4, kv_heads=2, mlp=128, vocab=128,
                  mask_id=120, eos_id=121),
    "lladamoe": dict(layers=2, d_model=64, heads=4, kv_heads=4, mlp=128, vocab=128,
                     mask_id=120, eos_id=121),
}
MOE_DEFAULTS = dict(experts=4, top_k=2, expert_mlp=32, shared_mlp=None, dense_layers=(),
                    qk_norm=True, expert_bias=False, router="random", router_std=0.5)


def lladamoe_config(layers, d_model, heads, kv_heads, dense_mlp, vocab, mask_id, eos_id, tied, dtype,
                    moe):
    """The released LLaDA-MoE config.json's fields (model_type stays 'llada'); the tiny
    checkpoints carry mask_token_id because the released id 156895 is outside their vocab."""
    return {
        "architectures": ["LLaDAMoEModelLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "clip_qkv": None,
        "dense_intermediate_size": dense_mlp,
        "eos_token_id": eos_id,
        "expert_intermediate_size": moe["expert_mlp"],
        "hidden_act": "silu",
        "hidden_size": d_model,
        "initializer_range": 0.02,
        "mask_token_id": mask_id,
        "max_position_embeddings": 8192,
        "model_type": "llada",
        "moe_layer_freq": [0 if i in moe["dense_layers"] else 1 for i in range(layers)],
        "moe_router_enable_expert_bias": bool(moe["expert_bias"]),
        "moe_router_score_function": "softmax",
        "norm_topk_prob": False,
        "num_attention_heads": heads,
        "num_experts": moe["experts"],
        "num_experts_per_tok": moe["top_k"],
        "num_hidden_layers": layers,
        "num_key_value_heads": kv_heads,
        "output_router_logits": False,
        "pad_token_id": eos_id,
        "partial_rotary_factor": 1.0,
        "qk_layernorm": bool(moe["qk_norm"]),
        "rms_norm_eps": 1e-05,
        "rope_scaling": None,
        "rope_theta": 50000,
        "routed_scaling_factor": 1,
        "router_aux_loss_coef": 0.01,
        "shared_expert_intermediate_size": moe["shared_mlp"],
        "tie_word_embeddings": bool(tied),
        "torch_dtype": {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}[dtype],
        "use_cache": False,
        "vocab_size": vocab,
    }


def llada_config(layers, d_model, heads, kv_heads, mlp, vocab, mask_id, eos_id, tied, dtype):
    return {
        "activation_type": "silu",
        "alibi": False,
        "alibi_bias_max": 8.0,
        "architectures": ["LLaDAModelLM"],
        "attention_dropout": 0.0,
        "attention_layer_norm": False,
        "attention_layer_norm_with_affine": True,
        "bias_for_layer_norm": False,
        "block_group_size": 1,
        "block_type": "llama",
        "d_model": d_model,
        "embedding_dropout": 0.0,
        "embedding_size": vocab,
        "eos_token_id": eos_id,
        "flash_attention": False,
        "include_bias": False,
        "include_qkv_bias": False,
        "init_cutoff_factor": None,
        "init_device": "meta",
        "init_fn": "mitchell",
        "init_std": 0.02,
        "input_emb_norm": False,
        "layer_norm_type": "rms",
        "layer_norm_with_affine": True,
        "mask_token_id": mask_id,
        "max_sequence_length": 4096,
        "mlp_hidden_size": mlp,
        "mlp_ratio": 4,
        "model_type": "llada",
        "multi_query_attention": None,
        "n_heads": heads,
        "n_kv_heads": kv_heads,
        "n_layers": layers,
        "pad_token_id": eos_id,
        "precision": "amp_bf16" if dtype == "bf16" else ("amp_fp16" if dtype == "f16" else "fp32"),
        "residual_dropout": 0.0,
        "rms_norm_eps": 1e-05,
        "rope": True,
        "rope_full_precision": True,
        "rope_theta": 500000.0,
        "scale_logits": False,
        "transformers_version": "4.46.3",
        "use_cache": False,
        "vocab_size": vocab,
        "weight_tying": bool(tied),
    }


def dream_config(layers, d_model, heads, kv_heads, mlp, vocab, mask_id, eos_id, tied, dtype):
    return {
        "architectures": ["DreamModel"],
        "attention_dropout": 0.0,
        "bos_token_id": eos_id,
        "eos_token_id": eos_id,
        "hidden_act": "silu",
        "hidden_size": d_model,
        "initializer_range": 0.02,
        "intermediate_size": mlp,
        "mask_token_id": mask_id,
        "max_position_embeddings": 131072,
        "max_window_layers": layers,
        "model_type": "Dream",
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "num_key_value_heads": kv_heads,
        "pad_token_id": eos_id,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "tie_word_embeddings": bool(tied),
        "torch_dtype": {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}[dtype],
        "transformers_version": "4.46.2",
        "use_cache": False,
        "use_sliding_window": False,
        "vocab_size": vocab,
    }


def make_checkpoint(arch, out, seed=0, shards=1, dtype="bf16", tied=False, layers=None,
                    d_model=None, heads=None, kv_heads=None, head_dim=None, mlp=None,
                    vocab=None, mask_id=None, eos_id=None, lm_head_std=0.25, w_std=0.08,
                    emb_std=0.5, zero_mask_logit=False, eot_id=None, boost_eos=1.0, plant=(), **moe_kw):
    if arch not in DEFAULTS:
        raise ValueError("arch must be llada, dream or lladamoe")
    moe = dict(MOE_DEFAULTS)
    for k, v in moe_kw.items():
        if k not in moe:
            raise TypeError("unknown argument %r" % k)
        if v is not None:
            moe[k] = v
    d = dict(DEFAULTS[arch])
    for k, v in dict(layers=layers, d_model=d_model, heads=heads, kv_heads=kv_heads, mlp=mlp,
                     vocab=vocab, mask_id=mask_id, eos_id=eos_id).items():
        if v is not None:
            d[k] = v
    if arch == "llada" and kv_heads is None:
        d["kv_heads"] = d["heads"]
    if head_dim is not None:
        d["d_model"] = d["heads"] * head_dim
    if d["d_model"] % d["heads"] or d["heads"] % d["kv_heads"]:
        raise ValueError("d_model must divide by heads and heads by kv_heads")
    hd = d["d_model"] // d["heads"]
    if hd % 2:
        raise ValueError("head_dim must be even (RoPE)")
    if not (0 <= d["mask_id"] < d["vocab"] and 0 <= d["eos_id"] < d["vocab"]):
        raise ValueError("mask/eos ids must be < vocab")

    rng = np.random.default_rng(seed)
    D, F, V, H, KV = d["d_model"], d["mlp"], d["vocab"], d["heads"], d["kv_heads"]
    t = {}

    def w(*shape, std=w_std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def norm_w(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    def swiglu(prefix, width):  # Hugging Face names: {prefix}{gate,up,down}_proj.weight
        t[prefix + "gate_proj.weight"] = w(width, D)
        t[prefix + "up_proj.weight"] = w(width, D)
        t[prefix + "down_proj.weight"] = w(D, width)

    def hf_final():  # final norm and (untied) LM head, Hugging Face names
        t["model.norm.weight"] = norm_w(D)
        if not tied:
            t["lm_head.weight"] = w(V, D, std=lm_head_std)
            if zero_mask_logit:
                t["lm_head.weight"][d["mask_id"]] = 0.0

    if arch == "llada":
        p = "model.transformer."
        t[p + "wte.weight"] = w(V, D, std=emb_std)
        for i in range(d["layers"]):
            b = p + "blocks.%d." % i
            t[b + "attn_norm.weight"] = norm_w(D)
            t[b + "q_proj.weight"] = w(D, D)
            t[b + "k_proj.weight"] = w(KV * hd, D)
            t[b + "v_proj.weight"] = w(KV * hd, D)
            t[b + "attn_out.weight"] = w(D, D)
            t[b + "ff_norm.weight"] = norm_w(D)
            t[b + "ff_proj.weight"] = w(F, D)
            t[b + "up_proj.weight"] = w(F, D)
            t[b + "ff_out.weight"] = w(D, F)
        t[p + "ln_f.weight"] = norm_w(D)
        if not tied:
            t[p + "ff_out.weight"] = w(V, D, std=lm_head_std)
            if zero_mask_logit:  # mask logit == 0: (almost) never the argmax, like a trained model
                t[p + "ff_out.weight"][d["mask_id"]] = 0.0
        cfg = llada_config(d["layers"], D, H, KV, F, V, d["mask_id"], d["eos_id"], tied, dtype)
    elif arch == "lladamoe":
        E, K, FE = moe["experts"], moe["top_k"], moe["expert_mlp"]
        t["model.embed_tokens.weight"] = w(V, D, std=emb_std)
        for i in range(d["layers"]):
            b = "model.layers.%d." % i
            t[b + "input_layernorm.weight"] = norm_w(D)
            t[b + "self_attn.q_proj.weight"] = w(D, D)
            t[b + "self_attn.k_proj.weight"] = w(KV * hd, D)
            t[b + "self_attn.v_proj.weight"] = w(KV * hd, D)
            t[b + "self_attn.o_proj.weight"] = w(D, D)
            if moe["qk_norm"]:
                t[b + "self_attn.q_norm.weight"] = norm_w(hd)
                t[b + "self_attn.k_norm.weight"] = norm_w(hd)
            t[b + "post_attention_layernorm.weight"] = norm_w(D)
            if i in moe["dense_layers"]:
                swiglu(b + "mlp.", F)
                continue
            router = w(E, D, std=moe["router_std"])
            if moe["router"] == "zero":
                router[:] = 0.0
            elif moe["router"].startswith("tie:"):
                group = [int(e) for e in moe["router"][4:].split(",")]
                for e in group[1:]:
                    router[e] = router[group[0]]
            elif moe["router"] != "random":
                raise ValueError("router must be random, zero or tie:E1,E2,...")
            t[b + "mlp.gate.weight"] = router
            for e in range(E):
                swiglu(b + "mlp.experts.%d." % e, FE)
            if moe["expert_bias"]:
                t[b + "mlp.expert_bias"] = (0.05 * rng.standard_normal(E)).astype(np.float32)
            if moe["shared_mlp"]:
                swiglu(b + "shared_expert.", moe["shared_mlp"])
        hf_final()
        if K > E:
            raise ValueError("top_k must not exceed experts")
        cfg = lladamoe_config(d["layers"], D, H, KV, F, V, d["mask_id"], d["eos_id"], tied, dtype, moe)
    else:
        t["model.embed_tokens.weight"] = w(V, D, std=emb_std)
        for i in range(d["layers"]):
            b = "model.layers.%d." % i
            t[b + "input_layernorm.weight"] = norm_w(D)
            t[b + "self_attn.q_proj.weight"] = w(D, D)
            t[b + "self_attn.q_proj.bias"] = w(D, std=0.05)
            t[b + "self_attn.k_proj.weight"] = w(KV * hd, D)
            t[b + "self_attn.k_proj.bias"] = w(KV * hd, std=0.05)
            t[b + "self_attn.v_proj.weight"] = w(KV * hd, D)
            t[b + "self_attn.v_proj.bias"] = w(KV * hd, std=0.05)
            t[b + "self_attn.o_proj.weight"] = w(D, D)
            t[b + "post_attention_layernorm.weight"] = norm_w(D)
            swiglu(b + "mlp.", F)
        hf_final()
        cfg = dream_config(d["layers"], D, H, KV, F, V, d["mask_id"], d["eos_id"], tied, dtype)

    for layer, chans, scale in plant:
        if not 0 <= layer < d["layers"]:
            raise ValueError("--plant: layer %d outside [0, %d)" % (layer, d["layers"]))
        if arch == "llada":
            b = "model.transformer.blocks.%d." % layer
            qn, kn = b + "q_proj", b + "k_proj"
        else:
            b = "model.layers.%d.self_attn." % layer
            qn, kn = b + "q_proj", b + "k_proj"
        rep = H // KV
        for ch in chans:
            if not 0 <= ch < KV * hd:
                raise ValueError("--plant: channel %d outside [0, %d)" % (ch, KV * hd))
            g, c = divmod(ch, hd)
            rows = [h * hd + c for h in range(g * rep, (g + 1) * rep)]
            for name, idx in ((kn, [ch]), (qn, rows)):
                for suffix in (".weight", ".bias"):
                    if name + suffix in t:
                        t[name + suffix][idx] *= scale

    if eot_id is not None:  # not a released field; lets tests exercise the EoT rules
        cfg["eot_token_id"] = int(eot_id)
    if boost_eos != 1.0:  # scale the LM-head rows of EOS (and EoT) so they are often predicted
        head = t.get("model.transformer.ff_out.weight", t.get("lm_head.weight"))
        if head is None:
            raise ValueError("--boost-eos needs an untied LM head")
        for tid in [d["eos_id"]] + ([eot_id] if eot_id is not None else []):
            head[tid] *= boost_eos

    os.makedirs(out, exist_ok=True)
    for fn in os.listdir(out):  # remove stale shards from an earlier run
        if fn.endswith(".safetensors") or fn == "model.safetensors.index.json":
            os.remove(os.path.join(out, fn))
    st.write_sharded(out, t, n_shards=shards, dtype=dtype, metadata={"format": "pt"})
    with atomic_open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
    return cfg


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", required=True, choices=["llada", "dream", "lladamoe"])
    ap.add_argument("--experts", type=int, help="LLaDA-MoE: routed experts per layer (default 4)")
    ap.add_argument("--top-k", type=int, help="LLaDA-MoE: experts per token (default 2)")
    ap.add_argument("--expert-mlp", type=int, help="LLaDA-MoE: expert width (default 32)")
    ap.add_argument("--shared-mlp", type=int, help="LLaDA-MoE: add a shared expert of this width")
    ap.add_argument("--dense-layers", help="LLaDA-MoE: comma separated layers with a dense MLP (--mlp)")
    ap.add_argument("--no-qk-norm", action="store_true", help="LLaDA-MoE: no q/k norms")
    ap.add_argument("--expert-bias", action="store_true", help="LLaDA-MoE: router expert bias")
    ap.add_argument("--router", help="LLaDA-MoE: random (default), zero or tie:E1,E2,...")
    ap.add_argument("--router-std", type=float, help="LLaDA-MoE: std of the router weights (0.5)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"])
    ap.add_argument("--tied", action="store_true")
    ap.add_argument("--layers", type=int)
    ap.add_argument("--d-model", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--kv-heads", type=int)
    ap.add_argument("--head-dim", type=int)
    ap.add_argument("--mlp", type=int)
    ap.add_argument("--vocab", type=int)
    ap.add_argument("--mask-id", type=int)
    ap.add_argument("--eos-id", type=int)
    ap.add_argument("--lm-head-std", type=float, default=0.25)
    ap.add_argument("--w-std", type=float, default=0.08, help="std of projection weights")
    ap.add_argument("--emb-std", type=float, default=0.5, help="std of the embedding")
    ap.add_argument("--eot-id", type=int, help="write eot_token_id into config.json (test-only field)")
    ap.add_argument("--boost-eos", type=float, default=1.0, help="scale the EOS/EoT LM-head rows")
    ap.add_argument("--zero-mask-logit", action="store_true",
                    help="zero the LM-head row of the mask token (untied only) so it is never predicted")
    ap.add_argument("--plant", action="append", default=[], metavar="L:C1,C2,...:S",
                    help="scale the q/k projections of K channels C in layer L by S (planted channels)")
    a = ap.parse_args(argv)
    plant = []
    for spec in a.plant:
        try:
            layer, chans, scale = spec.split(":")
            plant.append((int(layer), [int(c) for c in chans.split(",")], float(scale)))
        except ValueError:
            ap.error("--plant %r: expected LAYER:C1,C2,...:SCALE" % spec)
    make_checkpoint(a.arch, a.out, seed=a.seed, shards=a.shards, dtype=a.dtype, tied=a.tied,
                    layers=a.layers, d_model=a.d_model, heads=a.heads, kv_heads=a.kv_heads,
                    head_dim=a.head_dim, mlp=a.mlp, vocab=a.vocab, mask_id=a.mask_id,
                    eos_id=a.eos_id, lm_head_std=a.lm_head_std, w_std=a.w_std, emb_std=a.emb_std,
                    zero_mask_logit=a.zero_mask_logit, eot_id=a.eot_id, boost_eos=a.boost_eos,
                    plant=plant, experts=a.experts, top_k=a.top_k, expert_mlp=a.expert_mlp,
                    shared_mlp=a.shared_mlp, expert_bias=a.expert_bias or None, router=a.router,
                    router_std=a.router_std, qk_norm=False if a.no_qk_norm else None,
                    dense_layers=tuple(int(x) for x in a.dense_layers.split(",")) if a.dense_layers else None)


if __name__ == "__main__":
    main()
