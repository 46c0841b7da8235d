#!/usr/bin/env python3
"""Export a training checkpoint to models/dllmq-synth-tiny/ in the released LLaDA layout:
config.json (LLaDA field names), model.safetensors (bf16, `model.transformer.*` names,
[out, in] shapes), generation_config.json; tokenizer.json / tokenizer_config.json are
written by make_tokenizer.py into the same folder.

The safetensors file is written with tools/safetensors_np.py (the same writer the test
checkpoints use).

Usage: python3 training/export.py [--ckpt training/checkpoints/seed0.pt] [--out models/dllmq-synth-tiny]
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default="training/checkpoints/seed0.pt")
    ap.add_argument("--out", default="models/dllmq-synth-tiny")
    ap.add_argument("--tokenizer-from", default="models/dllmq-synth-tiny",
                    help="copy tokenizer.json / tokenizer_config.json from here when --out lacks them")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        if not os.path.exists(os.path.join(a.out, f)):
            shutil.copyfile(os.path.join(a.tokenizer_from, f), os.path.join(a.out, f))
    s = torch.load(a.ckpt, map_location="cpu")
    c = s["config"]
    tok = Tokenizer.from_file(os.path.join(a.out, "tokenizer.json"))
    assert tok.get_vocab_size() == c["vocab_size"]
    # released order: wte, blocks.{i}.*, ln_f, ff_out; names get the `model.transformer.` prefix
    sd = s["model"]
    per_block = ["attn_norm", "q_proj", "k_proj", "v_proj", "attn_out", "ff_norm", "ff_proj", "up_proj", "ff_out"]
    names = ["wte"] + [f"blocks.{i}.{p}" for i in range(c["n_layers"]) for p in per_block] + ["ln_f", "ff_out"]
    tensors = {f"model.transformer.{n}.weight": sd[f"{n}.weight"] for n in names}
    assert len(tensors) == len(sd), "unexported parameters"
    write_safetensors(os.path.join(a.out, "model.safetensors"), tensors, {"format": "pt"})
    with atomic_open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(llada_config(c, tok), f, indent=2)
    gen = {"bos_token_id": tok.token_to_id("<|startoftext|>"), "eos_token_id": tok.token_to_id("<|endoftext|>"),
           "pad_token_id": tok.token_to_id("<|endoftext|>"), "max_new_tokens": GEN_LEN,
           "block_length": BLOCK_LEN}  # dllmq's decoding defaults for this model
    with atomic_open(os.path.join(a.out, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
    # check: the file reads back to the bf16-rounded training weights
    back = read_safetensors(os.path.join(a.out, "model.safetensors"))
    for n, t in tensors.items():
        assert torch.equal(back[n], t.to(torch.bfloat16).float()), n
    size = os.path.getsize(os.path.join(a.out, "model.safetensors"))
    print(f"exported step {s['step']} -> {a.out} ({len(tensors)} tensors, {size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
