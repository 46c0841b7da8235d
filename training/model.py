"""LLaDA- and Dream-architecture masked-diffusion transformers in PyTorch (reference §1.3, §2),
plus data helpers and the greedy decoder shared by train.py / export.py / evaluate.py.

LLaDA: parameter names mirror the released LLaDA checkpoint minus the `model.transformer.` prefix
(wte, blocks.{i}.{attn_norm,q_proj,k_proj,v_proj,attn_out,ff_norm,ff_proj,up_proj,ff_out},
ln_f, ff_out), so export is a rename + bf16 cast; MHA, no biases, logit i predicts token i.
Dream: parameter names are the released Dream-v0 (Qwen2) ones as they are
(model.embed_tokens, model.layers.{i}.{input_layernorm, self_attn.{q,k,v,o}_proj,
post_attention_layernorm, mlp.{gate,up,down}_proj}, model.norm, lm_head); grouped-query attention
(n_kv_heads < n_heads, each K/V head shared by n_heads / n_kv_heads query heads), q/k/v biases
(o_proj none), untied LM head, and the logit shift: raw logit j predicts token j + 1
(`shift_logits`).
Written for PyTorch 1.13 (no F.scaled_dot_product_attention there). Run with /usr/bin/python3.
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
    n_kv_heads: int = 0  # 0: n_heads (MHA)
    qkv_bias: bool = False
    arch: str = "llada"  # "llada" | "dream"

    def kv_heads(self):
        return self.n_kv_heads or self.n_heads


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


def attention(q_proj, k_proj, v_proj, h, n_heads, n_kv, cos, sin, key_bias):
    """Full bidirectional attention with RoPE (fp32 rotation) over [B, T, D] -> [B, T, n_heads*hd].
    Grouped-query attention when n_kv < n_heads: K/V head j serves query heads
    j*r .. j*r + r - 1 (r = n_heads / n_kv; HF repeat_kv)."""
    B, T, _ = h.shape
    hd = q_proj.out_features // n_heads
    q = q_proj(h).view(B, T, n_heads, hd).transpose(1, 2)  # [B, H, T, hd]
    k = k_proj(h).view(B, T, n_kv, hd).transpose(1, 2)     # [B, Hkv, T, hd]
    v = v_proj(h).view(B, T, n_kv, hd).transpose(1, 2)
    q = (q.float() * cos + rotate_half(q.float()) * sin).type_as(v)
    k = (k.float() * cos + rotate_half(k.float()) * sin).type_as(v)
    if n_kv != n_heads:
        k = k.repeat_interleave(n_heads // n_kv, dim=1)
        v = v.repeat_interleave(n_heads // n_kv, dim=1)
    s = (q @ k.transpose(-1, -2)) / math.sqrt(hd)  # full bidirectional attention
    if key_bias is not None:  # only masks right padding used to batch unequal lengths
        s = s + key_bias[:, None, None, :]
    a = torch.softmax(s.float(), dim=-1).type_as(v) @ v
    return a.transpose(1, 2).reshape(B, T, n_heads * hd)


def padding_bias(valid, device):
    if valid is None:
        return None
    key_bias = torch.zeros(valid.shape, dtype=torch.float32, device=device)
    return key_bias.masked_fill_(~valid, float("-inf"))


class Block(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        d, f = c.d_model, c.mlp_hidden_size
        self.n_heads = c.n_heads
        assert c.kv_heads() == c.n_heads and not c.qkv_bias, "LLaDA blocks are MHA without biases"
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
        h = self.attn_norm(x)
        x = x + self.attn_out(attention(self.q_proj, self.k_proj, self.v_proj, h, self.n_heads, self.n_heads,
                                        cos, sin, key_bias))
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
        key_bias = padding_bias(valid, ids.device)
        for b in self.blocks:
            x = b(x, cos, sin, key_bias)
        return self.ff_out(self.ln_f(x))


class DreamAttention(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        d, hd = c.d_model, c.d_model // c.n_heads
        self.n_heads, self.n_kv = c.n_heads, c.kv_heads()
        self.q_proj = nn.Linear(d, c.n_heads * hd, bias=True)   # Qwen2: q/k/v with bias,
        self.k_proj = nn.Linear(d, self.n_kv * hd, bias=True)   # o_proj without
        self.v_proj = nn.Linear(d, self.n_kv * hd, bias=True)
        self.o_proj = nn.Linear(c.n_heads * hd, d, bias=False)

    def forward(self, h, cos, sin, key_bias):
        return self.o_proj(attention(self.q_proj, self.k_proj, self.v_proj, h, self.n_heads, self.n_kv,
                                     cos, sin, key_bias))


class DreamMLP(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.gate_proj = nn.Linear(c.d_model, c.mlp_hidden_size, bias=False)
        self.up_proj = nn.Linear(c.d_model, c.mlp_hidden_size, bias=False)
        self.down_proj = nn.Linear(c.mlp_hidden_size, c.d_model, bias=False)

    def forward(self, h):
        return self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class DreamLayer(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.input_layernorm = RMSNorm(c.d_model, c.rms_norm_eps)
        self.self_attn = DreamAttention(c)
        self.post_attention_layernorm = RMSNorm(c.d_model, c.rms_norm_eps)
        self.mlp = DreamMLP(c)

    def forward(self, x, cos, sin, key_bias):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, key_bias)
        return x + self.mlp(self.post_attention_layernorm(x))


class DreamBase(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.d_model)
        self.layers = nn.ModuleList(DreamLayer(c) for _ in range(c.n_layers))
        self.norm = RMSNorm(c.d_model, c.rms_norm_eps)


class Dream(nn.Module):
    """Dream-v0 (Qwen2 layout): state_dict names are the released tensor names."""

    def __init__(self, c: Config):
        super().__init__()
        assert c.n_heads % c.kv_heads() == 0
        self.c = c
        self.model = DreamBase(c)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)  # untied, as Dream-v0 ships
        for n, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)
            elif n.endswith(".bias"):
                nn.init.zeros_(p)

    def forward(self, ids, valid=None):
        """ids [B, T] -> raw logits [B, T, V]; raw logit j predicts token j + 1 (see shift_logits)."""
        x = self.model.embed_tokens(ids)
        cos, sin = rope_tables(ids.shape[1], self.c.d_model // self.c.n_heads, self.c.rope_theta, ids.device)
        key_bias = padding_bias(valid, ids.device)
        for layer in self.model.layers:
            x = layer(x, cos, sin, key_bias)
        return self.lm_head(self.model.norm(x))


def make_model(c: Config):
    return Dream(c) if c.arch == "dream" else LLaDA(c)


def shift_logits(model, logits):
    """Per-position predictions: identity for LLaDA; for Dream every sampler's
    cat([logits[:, :1], logits[:, :-1]]) (position i is predicted by raw position i - 1)."""
    if model.c.arch != "dream":
        return logits
    return torch.cat([logits[:, :1], logits[:, :-1]], dim=1)


# ---------------------------------------------------------------- data


def load_jsonl(path):
    with open(path) as f:
        return [json.loads(l) for l in f]


def render_prompt(question, arch="llada"):
    """The chat template for a single user turn (see each model's tokenizer_config.json):
    LLaDA-8B-Instruct's, or for Dream Qwen2.5's with its default system prompt (no BOS)."""
    if arch == "dream":
        return ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n" + question
                + "<|im_end|>\n<|im_start|>assistant\n")
    return ("<|startoftext|><|start_header_id|>user<|end_header_id|>\n\n" + question.strip()
            + "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")


def end_of_turn(arch="llada"):
    return "<|im_end|>" if arch == "dream" else "<|eot_id|>"


class Specials:
    """bos (None for Dream: its chat prompts have none), eos = pad, mask, end of turn."""

    def __init__(self, tok, arch="llada"):
        self.arch = arch
        if arch == "dream":
            self.bos = tok.token_to_id("<|beginoftext|>")
            self.eos = tok.token_to_id("<|endoftext|>")
            self.mask = tok.token_to_id("<|mask|>")
            self.eot = tok.token_to_id("<|im_end|>")
        else:
            self.bos = tok.token_to_id("<|startoftext|>")
            self.eos = tok.token_to_id("<|endoftext|>")
            self.mask = tok.token_to_id("<|mdm_mask|>")
            self.eot = tok.token_to_id("<|eot_id|>")
        assert None not in (self.eos, self.mask, self.eot), "tokenizer lacks the specials of " + arch


def final_number(text):
    """GSM8K-style extraction: the number after '####' (None if absent)."""
    m = re.search(r"####\s*(-?[\d,]+)", text)
    return m.group(1).replace(",", "") if m else None


# ---------------------------------------------------------------- decoding


@torch.no_grad()
def generate(model, prompts, gen_len, mask_id, pad_id, block_len=None, batch=100):
    """Greedy LLaDA sampler: low-confidence remasking, exactly one token per step
    (for Dream the same rule on the shifted logits: Dream's maskgit_plus with one token per step)
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
                logits = shift_logits(model, model(x, valid))
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
    prompts = [tok.encode(render_prompt(r["question"], sp.arch), add_special_tokens=False).ids for r in rows]
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
