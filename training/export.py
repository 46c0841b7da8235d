#!/usr/bin/env python3
"""Export a training checkpoint to models/dllmq-synth-tiny/ in the released LLaDA layout:
config.json (LLaDA field names), model.safetensors (bf16, `model.transformer.*` names,
[out, in] shapes), generation_config.json; tokenizer.json / tokenizer_config.json are
written by make_tokenizer.py into the same folder.
A Dream checkpoint (train.py --arch dream) goes to models/dllmq-synth-dream-tiny/ in the released
Dream-v0 layout: config.json with Dream-v0's fields (model_type "Dream", DreamModel), the Qwen2
tensor names as they are in the training model (`model.embed_tokens.weight`, `model.layers.{i}.*`
with q/k/v biases, `model.norm.weight`, `lm_head.weight`), bf16.
Run with /usr/bin/python3 (Debian python3-torch 1.13).

The safetensors file is written with tools/safetensors_np.py (the same writer the test
checkpoints use).

Usage: python3 training/export.py [--ckpt training/checkpoints/seed0.pt] [--out models/dllmq-synth-tiny]
       python3 training/export.py --ckpt training/checkpoints/dream/seed0.pt --out models/dllmq-synth-dream-tiny
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np
import torch
from tokenizers import Tokenizer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import safetensors_np as stn  # noqa: E402
from atomic_write import atomic_open  # noqa: E402

GEN_LEN = 48
BLOCK_LEN = 16  # the accuracy table's semi-autoregressive block length


def write_safetensors(path, tensors, metadata=None):
    """bf16 safetensors through the project's writer (round to nearest even, like torch's cast)."""
    stn.write_safetensors(path, {n: t.detach().float().numpy() for n, t in tensors.items()}, metadata, dtype="bf16")


def read_safetensors(path):
    """-> dict of fp32 torch tensors holding the stored bf16 values exactly."""
    arrays, _ = stn.read_safetensors(path)
    return {n: torch.from_numpy(np.array(a, dtype=np.float32)) for n, a in arrays.items()}


def llada_config(c, tok):
    ids = {s: tok.token_to_id(s) for s in ["<|startoftext|>", "<|endoftext|>", "<|mdm_mask|>"]}
    return {
        "architectures": ["LLaDAModelLM"],
        "model_type": "llada",
        "block_type": "llama",
        "d_model": c["d_model"],
        "n_heads": c["n_heads"],
        "n_kv_heads": c["n_heads"],  # MHA
        "n_layers": c["n_layers"],
        "mlp_hidden_size": c["mlp_hidden_size"],
        "mlp_ratio": c["mlp_hidden_size"] // c["d_model"],
        "vocab_size": c["vocab_size"],
        "embedding_size": c["vocab_size"],
        "max_sequence_length": c["max_sequence_length"],
        "rope": True,
        "rope_theta": c["rope_theta"],
        "rope_full_precision": True,
        "layer_norm_type": "rms",
        "rms_norm_eps": c["rms_norm_eps"],
        "layer_norm_with_affine": True,
        "bias_for_layer_norm": False,
        "attention_layer_norm_with_affine": True,
        "include_bias": False,
        "include_qkv_bias": False,
        "weight_tying": False,
        "alibi": False,
        "alibi_bias_max": 8.0,
        "activation_type": "silu",
        "attention_dropout": 0.0,
        "residual_dropout": 0.0,
        "embedding_dropout": 0.0,
        "multi_query_attention": None,
        "block_group_size": 1,
        "clip_qkv": None,
        "mask_token_id": ids["<|mdm_mask|>"],
        "eos_token_id": ids["<|endoftext|>"],
        "pad_token_id": ids["<|endoftext|>"],
        "bos_token_id": ids["<|startoftext|>"],
        "flash_attention": False,
        "scale_logits": False,
        "input_emb_norm": False,
        "attention_layer_norm": False,
        "init_fn": "normal",
        "init_std": 0.02,
        "precision": "amp_bf16",
        "torch_dtype": "bfloat16",
        "use_cache": False,
    }


def dream_config(c, tok):
    """Dream-v0-Instruct-7B's config.json fields (reference §2.1) with this model's sizes and ids.
    Like Dream-v0, bos/eos/pad are <|endoftext|>; the mask is <|mask|>."""
    eos = tok.token_to_id("<|endoftext|>")
    return {
        "architectures": ["DreamModel"],
        "attention_dropout": 0.0,
        "bos_token_id": eos,
        "eos_token_id": eos,
        "hidden_act": "silu",
        "hidden_size": c["d_model"],
        "initializer_range": 0.02,
        "intermediate_size": c["mlp_hidden_size"],
        "mask_token_id": tok.token_to_id("<|mask|>"),
        "max_position_embeddings": c["max_sequence_length"],
        "max_window_layers": c["n_layers"],
        "model_type": "Dream",
        "num_attention_heads": c["n_heads"],
        "num_hidden_layers": c["n_layers"],
        "num_key_value_heads": c["n_kv_heads"],
        "pad_token_id": eos,
        "rms_norm_eps": c["rms_norm_eps"],
        "rope_scaling": None,
        "rope_theta": c["rope_theta"],
        "sliding_window": None,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "use_cache": False,
        "use_sliding_window": False,
        "vocab_size": c["vocab_size"],
    }


def write_json(path, obj):
    with atomic_open(path, "w") as f:
        json.dump(obj, f, indent=2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default="training/checkpoints/seed0.pt")
    ap.add_argument("--out", default="models/dllmq-synth-tiny")
    ap.add_argument("--tokenizer-from", default="models/dllmq-synth-tiny",
                    help="copy tokenizer.json / tokenizer_config.json from here when --out lacks them")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    s = torch.load(a.ckpt, map_location="cpu")
    c = s["config"]
    dream = c.get("arch", "llada") == "dream"
    for f in ("tokenizer.json", "tokenizer_config.json"):
        if not os.path.exists(os.path.join(a.out, f)):
            if dream:  # the LLaDA tokenizer has the wrong specials
                sys.exit(f"{a.out}/{f} missing: run training/make_tokenizer.py --arch dream --out {a.out}")
            shutil.copyfile(os.path.join(a.tokenizer_from, f), os.path.join(a.out, f))
    tok = Tokenizer.from_file(os.path.join(a.out, "tokenizer.json"))
    sd = s["model"]
    if dream:
        # Dream-v0 has more embedding rows than tokenizer ids (152064 vs 151667); so has this one
        assert tok.get_vocab_size() <= c["vocab_size"]
        per_layer = ["input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.q_proj.bias",
                     "self_attn.k_proj.weight", "self_attn.k_proj.bias", "self_attn.v_proj.weight",
                     "self_attn.v_proj.bias", "self_attn.o_proj.weight", "post_attention_layernorm.weight",
                     "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"]
        names = (["model.embed_tokens.weight"] + [f"model.layers.{i}.{p}" for i in range(c["n_layers"])
                                                  for p in per_layer] + ["model.norm.weight", "lm_head.weight"])
        tensors = {n: sd[n] for n in names}
        config = dream_config(c, tok)
        gen = {"bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"],
               "pad_token_id": config["pad_token_id"], "mask_token_id": config["mask_token_id"],
               "max_new_tokens": GEN_LEN, "block_length": BLOCK_LEN}  # dllmq's decoding defaults
    else:
        assert tok.get_vocab_size() == c["vocab_size"]
        # released order: wte, blocks.{i}.*, ln_f, ff_out; names get the `model.transformer.` prefix
        per_block = ["attn_norm", "q_proj", "k_proj", "v_proj", "attn_out", "ff_norm", "ff_proj", "up_proj", "ff_out"]
        names = ["wte"] + [f"blocks.{i}.{p}" for i in range(c["n_layers"]) for p in per_block] + ["ln_f", "ff_out"]
        tensors = {f"model.transformer.{n}.weight": sd[f"{n}.weight"] for n in names}
        config = llada_config(c, tok)
        gen = {"bos_token_id": tok.token_to_id("<|startoftext|>"), "eos_token_id": tok.token_to_id("<|endoftext|>"),
               "pad_token_id": tok.token_to_id("<|endoftext|>"), "max_new_tokens": GEN_LEN,
               "block_length": BLOCK_LEN}  # dllmq's decoding defaults for this model
    assert len(tensors) == len(sd), "unexported parameters"
    # both writers are crash-safe: temporary file, fsync, rename (tools/atomic_write.py)
    write_safetensors(os.path.join(a.out, "model.safetensors"), tensors, {"format": "pt"})
    write_json(os.path.join(a.out, "config.json"), config)
    write_json(os.path.join(a.out, "generation_config.json"), gen)
    # check: the file reads back to the bf16-rounded training weights
    back = read_safetensors(os.path.join(a.out, "model.safetensors"))
    for n, t in tensors.items():
        assert torch.equal(back[n], t.to(torch.bfloat16).float()), n
    size = os.path.getsize(os.path.join(a.out, "model.safetensors"))
    print(f"exported step {s['step']} -> {a.out} ({len(tensors)} tensors, {size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
