#!/usr/bin/env python3
"""Initial weights for dllmq-synth-dream-tiny from the LLaDA model's weights, the way Dream-v0 was
initialised from an existing language model (Qwen2.5-7B) before its diffusion training.

Run with /usr/bin/python3 (Debian python3-torch 1.13). Called by train.py --init-from-llada DIR;
nothing here trains. Mapping (LLaDA name -> Dream name):
  wte / ff_out (LM head) rows: BPE ids 0..505 are the same tokens in both tokenizers (the Dream
      tokenizer reuses the BPE); special rows by role: <|endoftext|> 507 -> 506, <|start_header_id|>
      509 -> <|im_start|> 507, <|eot_id|> 511 -> <|im_end|> 508, <|startoftext|> 506 -> <|beginoftext|>
      509, <|mdm_mask|> 508 -> <|mask|> 510; row 511 (no token) keeps its fresh N(0, 0.02) init.
  attn_norm, ff_norm, ln_f -> input_layernorm, post_attention_layernorm, model.norm
  q_proj, attn_out -> self_attn.q_proj, self_attn.o_proj; ff_proj, up_proj, ff_out -> mlp.gate/up/down_proj
  k_proj, v_proj (8 heads) -> grouped-query K/V (n_kv heads): each K/V head is the mean of the
      n_heads / n_kv heads it serves (mean-pooling, as in GQA uptraining, Ainslie et al. 2023)
  q/k/v biases: zero.
The logit shift is not mapped: the LLaDA model predicts token i at position i, the Dream model must
learn to predict it at position i - 1; that is what the Dream training teaches first.
"""
import os

import torch

from export import read_safetensors

SPECIAL_ROWS = {506: 507, 507: 509, 508: 511, 509: 506, 510: 508}  # Dream id <- LLaDA id


@torch.no_grad()
def init_dream_from_llada(model, llada_dir):
    c = model.c
    w = {k[len("model.transformer."):]: v for k, v in
         read_safetensors(os.path.join(llada_dir, "model.safetensors")).items()}
    hd = c.d_model // c.n_heads
    r = c.n_heads // c.kv_heads()

    def rows(dst, src):
        dst[:506] = src[:506]
        for d, s in SPECIAL_ROWS.items():
            dst[d] = src[s]

    rows(model.model.embed_tokens.weight, w["wte.weight"])
    rows(model.lm_head.weight, w["ff_out.weight"])
    model.model.norm.weight.copy_(w["ln_f.weight"])

    def pool(t):  # [n_heads*hd, d] -> [n_kv*hd, d]
        return t.view(c.kv_heads(), r, hd, -1).mean(dim=1).reshape(c.kv_heads() * hd, -1)

    for i, L in enumerate(model.model.layers):
        p = f"blocks.{i}."
        L.input_layernorm.weight.copy_(w[p + "attn_norm.weight"])
        L.post_attention_layernorm.weight.copy_(w[p + "ff_norm.weight"])
        L.self_attn.q_proj.weight.copy_(w[p + "q_proj.weight"])
        L.self_attn.k_proj.weight.copy_(pool(w[p + "k_proj.weight"]))
        L.self_attn.v_proj.weight.copy_(pool(w[p + "v_proj.weight"]))
        L.self_attn.o_proj.weight.copy_(w[p + "attn_out.weight"])
        for b in (L.self_attn.q_proj.bias, L.self_attn.k_proj.bias, L.self_attn.v_proj.bias):
            b.zero_()
        L.mlp.gate_proj.weight.copy_(w[p + "ff_proj.weight"])
        L.mlp.up_proj.weight.copy_(w[p + "up_proj.weight"])
        L.mlp.down_proj.weight.copy_(w[p + "ff_out.weight"])
