#!/usr/bin/env python3
"""Export a training checkpoint to models/dllmq-synth-tiny/ in the released LLaDA layout:
config.json (LLaDA field names), model.safetensors (bf16, `model.transformer.*` names,
[out, in] shapes), generation_config.json; tokenizer.json / tokenizer_config.json are
written by make_tokenizer.py into the same folder.

The safetensors file is written by hand: 8-byte little-endian header length, JSON header
(padded with spaces to a multiple of 8), then the raw little-endian tensor bytes.

Usage: python3 training/export.py [--ckpt training/checkpoints/seed0.pt] [--out models/dllmq-synth-tiny]
"""
import argparse
import json
import os
import struct

import torch
from tokenizers import Tokenizer

GEN_LEN = 48


def to_bf16_bytes(t):
    """Round-to-nearest-even fp32 -> bf16 (torch's cast), as raw little-endian bytes."""
    return t.detach().to(torch.bfloat16).contiguous().view(torch.int16).numpy().tobytes()


def write_safetensors(path, tensors, metadata=None):
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        b = to_bf16_bytes(t)
        header[name] = {"dtype": "BF16", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """Minimal reader (bf16 only) -> dict of fp32 tensors holding the bf16 values exactly."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        assert h["dtype"] == "BF16", (name, h["dtype"])
        a, b = h["data_offsets"]
        raw = torch.frombuffer(bytearray(data[a:b]), dtype=torch.int16)
        out[name] = raw.view(torch.bfloat16).float().reshape(h["shape"])
    return out


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
    a = ap.parse_args()
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
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(llada_config(c, tok), f, indent=2)
    gen = {"bos_token_id": tok.token_to_id("<|startoftext|>"), "eos_token_id": tok.token_to_id("<|endoftext|>"),
           "pad_token_id": tok.token_to_id("<|endoftext|>"), "max_new_tokens": GEN_LEN}
    with open(os.path.join(a.out, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
    # check: the file reads back to the bf16-rounded training weights
    back = read_safetensors(os.path.join(a.out, "model.safetensors"))
    for n, t in tensors.items():
        assert torch.equal(back[n], t.to(torch.bfloat16).float()), n
    size = os.path.getsize(os.path.join(a.out, "model.safetensors"))
    print(f"exported step {s['step']} -> {a.out} ({len(tensors)} tensors, {size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
