"""LLaDA-architecture masked-diffusion transformer in PyTorch (reference §1.3), plus data
helpers and the greedy low-confidence decoder shared by train.py / export.py / evaluate.py.

Parameter names mirror the released LLaDA checkpoint minus the `model.transformer.` prefix
(wte, blocks.{i}.{attn_norm,q_proj,k_proj,v_proj,attn_out,ff_norm,ff_proj,up_proj,ff_out},
ln_f, ff_out), so export is a rename + bf16 cast.
Written for PyTorch 1.13 (no F.scaled_dot_product_attention there).
"""
import json
import math
import re
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    vocab_size: int = 512
    d_model: int = 256
    n_heads: int = 8
    n_layers: int = 4
    mlp_hidden_size: int = 768
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    max_sequence_length: int = 512


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        # fp32 normalisation, cast back, then scale by the weight (as LLaDA does)
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return h.to(x.dtype) * self.weight


def rope_tables(n, hd, theta, device):
    inv_freq = 1.0 / theta ** (torch.arange(0, hd, 2, device=device, dtype=torch.float32) / hd)
    freqs = torch.outer(torch.arange(n, device=device, dtype=torch.float32), inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)  # NeoX half rotation layout
    return emb.cos(), emb.sin()


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


class Block(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        d, f = c.d_model, c.mlp_hidden_size
        self.n_heads, self.hd = c.n_heads, c.d_model // c.n_heads
        self.attn_norm = RMSNorm(d, c.rms_norm_eps)
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, d, bias=False)  # MHA: n_kv_heads == n_heads
        self.v_proj = nn.Linear(d, d, bias=False)
        self.attn_out = nn.Linear(d, d, bias=False)
        self.ff_norm = RMSNorm(d, c.rms_norm_eps)
        self.ff_proj = nn.Linear(d, f, bias=False)  # gate (through SiLU)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.ff_out = nn.Linear(f, d, bias=False)   # MLP down projection

    def forward(self, x, cos, sin, key_bias):
        B, T, D = x.shape
        h = self.attn_norm(x)
        q, k, v = (p(h).view(B, T, self.n_heads, self.hd).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))  # [B, H, T, hd]
        q = (q.float() * cos + rotate_half(q.float()) * sin).type_as(v)
        k = (k.float() * cos + rotate_half(k.float()) * sin).type_as(v)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd)  # full bidirectional attention
        if key_bias is not None:  # only masks right padding used to batch unequal lengths
            s = s + key_bias[:, None, None, :]
        a = torch.softmax(s.float(), dim=-1).type_as(v) @ v
        x = x + self.attn_out(a.transpose(1, 2).reshape(B, T, D))
        h = self.ff_norm(x)
        return x + self.ff_out(F.silu(self.ff_proj(h)) * self.up_proj(h))


class LLaDA(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.wte = nn.Embedding(c.vocab_size, c.d_model)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.n_layers))
        self.ln_f = RMSNorm(c.d_model, c.rms_norm_eps)
        self.ff_out = nn.Linear(c.d_model, c.vocab_size, bias=False)  # untied LM head
        for n, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, ids, valid=None):
        """ids [B, T] -> logits [B, T, V]; logit i predicts token i (no shift).
        valid [B, T] bool: keys that may be attended to (None = all)."""
        x = self.wte(ids)  # no embedding scaling, no positional embedding
        cos, sin = rope_tables(ids.shape[1], self.c.d_model // self.c.n_heads, self.c.rope_theta, ids.device)
        key_bias = None
        if valid is not None:
            key_bias = torch.zeros(valid.shape, dtype=torch.float32, device=ids.device)
            key_bias.masked_fill_(~valid, float("-inf"))
        for b in self.blocks:
            x = b(x, cos, sin, key_bias)
        return self.ff_out(self.ln_f(x))


# ---------------------------------------------------------------- data


def load_jsonl(path):
    with open(path) as f:
        return [json.loads(l) for l in f]


def render_prompt(question):
    """LLaDA-Instruct chat template for a single user turn (see tokenizer_config.json)."""
    return ("<|startoftext|><|start_header_id|>user<|end_header_id|>\n\n" + question.strip()
            + "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")


class Specials:
    def __init__(self, tok):
        self.bos = tok.token_to_id("<|startoftext|>")
        self.eos = tok.token_to_id("<|endoftext|>")
        self.mask = tok.token_to_id("<|mdm_mask|>")
        self.eot = tok.token_to_id("<|eot_id|>")


def final_number(text):
    """GSM8K-style extraction: the number after '####' (None if absent)."""
    m = re.search(r"####\s*(-?[\d,]+)", text)
    return m.group(1).replace(",", "") if m else None


# ---------------------------------------------------------------- decoding


@torch.no_grad()
def generate(model, prompts, gen_len, mask_id, pad_id, block_len=None, batch=100):
    """Greedy LLaDA sampler: low-confidence remasking, exactly one token per step
    (steps == gen_len), semi-autoregressive blocks of `block_len` (default: whole gen).
    prompts: list of id lists (unequal lengths are right-padded; padding is masked out of
    attention, so each row behaves as if decoded alone). Returns list of gen id lists."""
    block_len = block_len or gen_len
    assert gen_len % block_len == 0
    out = []
    for s in range(0, len(prompts), batch):
        ps = prompts[s:s + batch]
        B, T = len(ps), max(len(p) for p in ps) + gen_len
        x = torch.full((B, T), pad_id, dtype=torch.long)
        valid = torch.zeros(B, T, dtype=torch.bool)
        start = torch.tensor([len(p) for p in ps])
        for i, p in enumerate(ps):
            x[i, :len(p)] = torch.tensor(p)
            x[i, len(p):len(p) + gen_len] = mask_id
            valid[i, :len(p) + gen_len] = True
        pos = torch.arange(T)[None, :]
        for b0 in range(0, gen_len, block_len):
            in_block = (pos >= (start[:, None] + b0)) & (pos < (start[:, None] + b0 + block_len))
            for _ in range(block_len):
                logits = model(x, valid)
                p = torch.softmax(logits.float(), dim=-1)
                conf, x0 = p.max(dim=-1)
                cand = in_block & (x == mask_id)
                conf = conf.masked_fill(~cand, -1.0)
                j = conf.argmax(dim=1)  # most confident masked position per row
                rows = torch.arange(B)
                x[rows, j] = torch.where(cand[rows, j], x0[rows, j], x[rows, j])
        for i in range(B):
            out.append(x[i, start[i]:start[i] + gen_len].tolist())
    return out


def exact_match(model, tok, rows, gen_len, sp, block_len=None, batch=100):
    """Fraction of problems whose generated '####' number equals the reference one.
    Returns (accuracy, list of decoded generations)."""
    prompts = [tok.encode(render_prompt(r["question"]), add_special_tokens=False).ids for r in rows]
    order = sorted(range(len(rows)), key=lambda i: len(prompts[i]))  # batch similar lengths: less padding
    gens_sorted = generate(model, [prompts[i] for i in order], gen_len, sp.mask, sp.eos, block_len, batch)
    gens = [None] * len(rows)
    for i, g in zip(order, gens_sorted):
        gens[i] = g
    texts, ok = [], 0
    for r, g in zip(rows, gens):
        # keep the answer up to the end of turn / first EOS, like chat.py strips EOS
        cut = [i for i, t in enumerate(g) if t in (sp.eot, sp.eos)]
        t = tok.decode(g[:cut[0]] if cut else g, skip_special_tokens=False)
        texts.append(t)
        ok += final_number(t) is not None and final_number(t) == final_number(r["answer"])
    return ok / len(rows), texts
