#!/usr/bin/python3
"""Independent float64 numpy forward pass for LLaDA, LLaDA-MoE and Dream checkpoints.

Written from docs/reference/dllm-models-and-fast-dllm.md §1.3 (LLaDA) and §2.3 (Dream):

    x = embed[ids]                      (no scaling, no positional embedding)
    per layer:
        h = rmsnorm(x) * w_attn_norm    (x / sqrt(mean(x^2) + eps))
        q, k, v = h Wq^T (+bq), h Wk^T (+bk), h Wv^T (+bv)     (bias: Dream only)
        q, k = rope(q), rope(k)         (NeoX half rotation, inv_freq = theta^(-2i/hd),
                                         absolute positions)
        a = softmax(q k^T / sqrt(hd)) v (full bidirectional, no mask; GQA: query head h
                                         uses kv head h // (H / KV))
        x = x + a Wo^T
        h = rmsnorm(x) * w_ffn_norm
        x = x + Wdown (silu(Wgate h) * (Wup h))
    logits = rmsnorm(x) * w_final @ W_lm^T      (W_lm = embedding when tied)

LLaDA-MoE (written from the released modeling code, LLaDAMoEModelLM / OLMoE; Dream's names
without biases): after the q/k projections each head's q and k is RMS-normalised with the
[head_dim] weights self_attn.{q,k}_norm (qk_layernorm), before RoPE and before K is cached;
the FFN of a MoE layer (moe_layer_freq[i] != 0) is
        p = softmax(h Wrouter^T) (+ expert_bias);  (w, e) = top-k of p (no renormalisation)
        ffn = sum over the row's experts in increasing index of w * SwiGLU_e(h)  (+ SwiGLU_shared(h))
and a dense layer's is the SwiGLU mlp.{gate,up,down}_proj.  Ties in p go to the lower expert
index here; `min_route_gap` keeps the smallest log(p_k / p_k+1) seen (k-th against (k+1)-th
probability of a row), so a test can make sure no routing decision it compares was a near tie;
`route_log`, when set to a list, receives every MoE layer's chosen experts (finite differences
check that both sides of a difference routed alike).

LLaDA names: gate = blocks.N.ff_proj, up = blocks.N.up_proj, down = blocks.N.ff_out,
LM head = transformer.ff_out.  Logits are returned RAW (no Dream shift here).

Everything is computed in float64 from the stored weights (bf16/f16/f32 upcast exactly).
No bf16 rounding of activations is emulated (the engine computes in fp32).

KV-cache support (used by tools/ref_decode.py for Fast-dLLM prefix/dual cache):
    RefModel.forward(ids, positions, past=past, return_kv=True)
computes only the rows `ids` at absolute `positions`; the keys/values each query row
attends to are: all rows of `past` (per layer: K [Lp, KV, hd] post-RoPE, V [Lp, KV, hd],
pos [Lp]) whose position is NOT among `positions`, plus the freshly computed rows.
So a prefix cache passes K/V of [0, s) and queries [s, L); a dual cache passes K/V of
all L positions and queries [s, e), whose fresh rows replace the cached ones.
Cached K is stored post-RoPE (equivalent to Fast-dLLM's pre-RoPE store + re-rotation,
doc §4.2 / §8.7, since rotation depends only on the absolute position).
`return_k_prerope=True` also returns the keys before RoPE (KVQuant quantizes those).

CLI:  ref_forward.py -m DIR --ids 1,2,3 [--positions ...]  -> {"logits": [[...], ...]}
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np as st  # noqa: E402


class LayerW:
    __slots__ = ("attn_norm", "wq", "wk", "wv", "bq", "bk", "bv", "wo", "ffn_norm",
                 "w_gate", "w_up", "w_down", "q_norm", "k_norm", "moe")

    def __init__(self):
        self.q_norm = self.k_norm = self.moe = None


class RefModel:
    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = json.load(f)
        self.cfg = cfg
        raw = st.load_checkpoint_dir(model_dir, upcast=True)
        W = {k: np.asarray(v, dtype=np.float64) for k, v in raw.items()}
        mt = str(cfg.get("model_type", "")).lower()
        archs = cfg.get("architectures") or []
        self.min_route_gap = float("inf")
        self.route_log = None  # a list: every MoE layer's chosen experts per row are appended
        if "LLaDAMoEModelLM" in archs or mt == "lladamoe":
            self.arch = "llada"  # decodes as LLaDA
            self.layout = "lladamoe"
            self._load_lladamoe(cfg, W)
        elif mt == "llada" or "LLaDAModelLM" in archs:
            self.arch = "llada"
            self._load_llada(cfg, W)
        elif mt == "dream" or "DreamModel" in archs:
            self.arch = "dream"
            self._load_dream(cfg, W)
        else:
            raise ValueError("%s: unknown model_type %r" % (model_dir, cfg.get("model_type")))
        self.hd = self.d_model // self.n_heads
        self.mask_id = int(cfg["mask_token_id"])
        self.eos_id = int(cfg["eos_token_id"]) if cfg.get("eos_token_id") is not None else None
        # not a released config field: optional end-of-turn id for tiny test checkpoints
        self.eot_id = int(cfg["eot_token_id"]) if cfg.get("eot_token_id") is not None else None
        self.vocab = self.embed.shape[0]
        self.shift_logits = self.arch == "dream"
        half = self.hd // 2
        self.inv_freq = 1.0 / (self.rope_theta ** (np.arange(0, self.hd, 2, dtype=np.float64) / self.hd))
        assert self.inv_freq.shape[0] == half

    # ------------------------------------------------------------------ loading
    def _load_llada(self, cfg, W):
        assert cfg.get("block_type", "llama") == "llama", "only block_type llama supported"
        assert not cfg.get("alibi", False) and cfg.get("rope", True)
        assert cfg.get("layer_norm_type", "rms") == "rms"
        self.d_model = int(cfg["d_model"])
        self.n_heads = int(cfg["n_heads"])
        self.n_kv = int(cfg.get("n_kv_heads") or cfg["n_heads"])
        self.n_layers = int(cfg["n_layers"])
        self.eps = float(cfg.get("rms_norm_eps", 1e-5))
        self.rope_theta = float(cfg.get("rope_theta", 10000.0))
        p = "model.transformer."
        self.embed = W[p + "wte.weight"]
        self.layers = []
        for i in range(self.n_layers):
            b = p + "blocks.%d." % i
            L = LayerW()
            L.attn_norm = W[b + "attn_norm.weight"]
            L.wq, L.wk, L.wv = W[b + "q_proj.weight"], W[b + "k_proj.weight"], W[b + "v_proj.weight"]
            L.bq = W.get(b + "q_proj.bias")
            L.bk = W.get(b + "k_proj.bias")
            L.bv = W.get(b + "v_proj.bias")
            L.wo = W[b + "attn_out.weight"]
            L.ffn_norm = W[b + "ff_norm.weight"]
            L.w_gate = W[b + "ff_proj.weight"]
            L.w_up = W[b + "up_proj.weight"]
            L.w_down = W[b + "ff_out.weight"]
            self.layers.append(L)
        self.final_norm = W[p + "ln_f.weight"]
        if cfg.get("weight_tying", False):
            self.lm_head = self.embed
        else:
            self.lm_head = W[p + "ff_out.weight"]

    def _load_lladamoe(self, cfg, W):
        self._load_dream(cfg, W, dense_mlp=False)
        freq = cfg["moe_layer_freq"]
        for i, L in enumerate(self.layers):
            b = "model.layers.%d." % i
            if cfg.get("qk_layernorm"):
                L.q_norm = W[b + "self_attn.q_norm.weight"]
                L.k_norm = W[b + "self_attn.k_norm.weight"]
            if freq[i] == 0:
                L.w_gate = W[b + "mlp.gate_proj.weight"]
                L.w_up = W[b + "mlp.up_proj.weight"]
                L.w_down = W[b + "mlp.down_proj.weight"]
                continue
            E = int(cfg["num_experts"])
            experts = [(W[b + "mlp.experts.%d.gate_proj.weight" % e], W[b + "mlp.experts.%d.up_proj.weight" % e],
                        W[b + "mlp.experts.%d.down_proj.weight" % e]) for e in range(E)]
            shared = None
            if cfg.get("shared_expert_intermediate_size"):
                shared = tuple(W[b + "shared_expert.%s_proj.weight" % n] for n in ("gate", "up", "down"))
            L.moe = dict(router=W[b + "mlp.gate.weight"], experts=experts, shared=shared,
                         bias=W.get(b + "mlp.expert_bias") if cfg.get("moe_router_enable_expert_bias") else None,
                         k=int(cfg["num_experts_per_tok"]))

    @staticmethod
    def _swiglu(h, g, u, d):
        a = h @ g.T
        return ((a / (1.0 + np.exp(-a))) * (h @ u.T)) @ d.T

    def _moe(self, m, h):
        lg = h @ m["router"].T
        p = np.exp(lg - lg.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        if m["bias"] is not None:
            p = p + m["bias"]
        k = m["k"]
        order = np.argsort(-p, axis=-1, kind="stable")  # ties: lower index first
        if k < p.shape[1]:
            srt = np.take_along_axis(p, order, axis=-1)
            with np.errstate(divide="ignore"):
                gap = np.log(srt[:, k - 1]) - np.log(srt[:, k])
            self.min_route_gap = min(self.min_route_gap, float(np.nan_to_num(gap, nan=0.0).min()))
        if self.route_log is not None:
            self.route_log.append(np.sort(order[:, :k], axis=-1))
        out = np.zeros_like(h)
        for t in range(h.shape[0]):
            for e in sorted(order[t, :k]):
                g, u, d = m["experts"][e]
                out[t] += p[t, e] * self._swiglu(h[t:t + 1], g, u, d)[0]
        if m["shared"] is not None:
            out += self._swiglu(h, *m["shared"])
        return out

    def _load_dream(self, cfg, W, dense_mlp=True):
        self.d_model = int(cfg["hidden_size"])
        self.n_heads = int(cfg["num_attention_heads"])
        self.n_kv = int(cfg.get("num_key_value_heads") or cfg["num_attention_heads"])
        self.n_layers = int(cfg["num_hidden_layers"])
        self.eps = float(cfg.get("rms_norm_eps", 1e-6))
        self.rope_theta = float(cfg.get("rope_theta", 10000.0))
        self.embed = W["model.embed_tokens.weight"]
        self.layers = []
        for i in range(self.n_layers):
            b = "model.layers.%d." % i
            L = LayerW()
            L.attn_norm = W[b + "input_layernorm.weight"]
            L.wq = W[b + "self_attn.q_proj.weight"]
            L.wk = W[b + "self_attn.k_proj.weight"]
            L.wv = W[b + "self_attn.v_proj.weight"]
            L.bq = W.get(b + "self_attn.q_proj.bias")
            L.bk = W.get(b + "self_attn.k_proj.bias")
            L.bv = W.get(b + "self_attn.v_proj.bias")
            L.wo = W[b + "self_attn.o_proj.weight"]
            L.ffn_norm = W[b + "post_attention_layernorm.weight"]
            if dense_mlp:
                L.w_gate = W[b + "mlp.gate_proj.weight"]
                L.w_up = W[b + "mlp.up_proj.weight"]
                L.w_down = W[b + "mlp.down_proj.weight"]
            self.layers.append(L)
        self.final_norm = W["model.norm.weight"]
        if cfg.get("tie_word_embeddings", False) or "lm_head.weight" not in W:
            self.lm_head = self.embed
        else:
            self.lm_head = W["lm_head.weight"]

    # ------------------------------------------------------------------ pieces
    def rmsnorm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope(self, x, positions):
        """x: [T, nh, hd]; NeoX half rotation at absolute positions."""
        ang = np.asarray(positions, dtype=np.float64)[:, None] * self.inv_freq[None, :]  # [T, hd/2]
        emb = np.concatenate([ang, ang], axis=-1)  # [T, hd]
        cos = np.cos(emb)[:, None, :]
        sin = np.sin(emb)[:, None, :]
        half = self.hd // 2
        rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return x * cos + rot * sin

    @staticmethod
    def _lin(x, w, b=None):
        y = x @ w.T
        return y + b if b is not None else y

    # ------------------------------------------------------------------ forward
    def forward(self, ids, positions=None, past=None, return_kv=False, return_hidden=False,
                return_k_prerope=False, return_q=False, kv_hook=None):
        """Raw logits [T, V] float64 for query rows `ids` at `positions` (default arange).

        past: optional list (per layer) of (K [Lp,KV,hd] post-RoPE, V [Lp,KV,hd], pos [Lp]).
        return_kv: also return the list of (K_new, V_new) per layer for the query rows.
        return_k_prerope (with return_kv): the per-layer entries become (K_new, V_new, K_pre),
            K_pre = the same keys before RoPE (used by tools/ref_kvquant.py for KVQuant).
        return_q: also return the list of the query rows' queries per layer, [T, H, hd] post-RoPE
            (last in the returned tuple).
        kv_hook: optional f(layer, k_pre, v) -> (k_pre, v) applied to the query rows' keys (before
            RoPE) and values of every layer (tools/ref_fisher.py perturbs one element with it).
        """
        ids = np.asarray(ids, dtype=np.int64)
        T = ids.shape[0]
        if positions is None:
            positions = np.arange(T)
        positions = np.asarray(positions, dtype=np.int64)
        assert positions.shape == (T,)
        if (ids < 0).any() or (ids >= self.vocab).any():
            raise ValueError("token id out of range")
        H, KV, hd = self.n_heads, self.n_kv, self.hd
        rep = H // KV
        scale = 1.0 / np.sqrt(hd)
        x = self.embed[ids].copy()  # [T, D]
        new_kv, qs = [], []
        for li, L in enumerate(self.layers):
            h = self.rmsnorm(x, L.attn_norm)
            q = self._lin(h, L.wq, L.bq).reshape(T, H, hd)
            k = self._lin(h, L.wk, L.bk).reshape(T, KV, hd)
            v = self._lin(h, L.wv, L.bv).reshape(T, KV, hd)
            if L.q_norm is not None:  # LLaDA-MoE: per-head RMSNorm before RoPE and the cache
                q = self.rmsnorm(q, L.q_norm)
                k = self.rmsnorm(k, L.k_norm)
            if kv_hook is not None:
                k, v = kv_hook(li, k, v)
            k_pre = k
            q = self.rope(q, positions)
            k = self.rope(k, positions)
            if return_q:
                qs.append(q.copy())
            if return_kv:
                new_kv.append((k.copy(), v.copy(), k_pre.copy()) if return_k_prerope else (k.copy(), v.copy()))
            if past is not None:
                pk, pv, ppos = past[li]
                keep = ~np.isin(np.asarray(ppos), positions)
                K = np.concatenate([pk[keep], k], axis=0)
                V = np.concatenate([pv[keep], v], axis=0)
            else:
                K, V = k, v
            # scores [H, T, S]
            Kh = np.repeat(K, rep, axis=1)  # [S, H, hd]; kv head j serves heads j*rep..j*rep+rep-1
            Vh = np.repeat(V, rep, axis=1)
            s = np.einsum("thd,shd->hts", q, Kh) * scale
            s -= s.max(axis=-1, keepdims=True)
            p = np.exp(s)
            p /= p.sum(axis=-1, keepdims=True)
            a = np.einsum("hts,shd->thd", p, Vh).reshape(T, H * hd)
            x = x + a @ L.wo.T
            h = self.rmsnorm(x, L.ffn_norm)
            if L.moe is not None:
                x = x + self._moe(L.moe, h)
            else:
                x = x + self._swiglu(h, L.w_gate, L.w_up, L.w_down)
        hfin = self.rmsnorm(x, self.final_norm)
        logits = hfin @ self.lm_head.T
        out = [logits]
        if return_kv:
            out.append(new_kv)
        if return_hidden:
            out.append(hfin)
        if return_q:
            out.append(qs)
        return out[0] if len(out) == 1 else tuple(out)


_CACHE = {}


def load_model(model_dir):
    key = os.path.abspath(model_dir)
    if key not in _CACHE:
        _CACHE[key] = RefModel(model_dir)
    return _CACHE[key]


def ref_logits(model_dir, ids, positions=None):
    """Convenience: raw float64 logits [T, V] for ids on the checkpoint in model_dir."""
    return load_model(model_dir).forward(ids, positions)


def main(argv=None):
    ap = argparse.ArgumentParser(description="float64 numpy reference forward (raw logits, no shift)")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--ids", required=True, help="comma separated token ids")
    ap.add_argument("--positions", help="comma separated absolute positions (default 0..T-1)")
    a = ap.parse_args(argv)
    ids = [int(t) for t in a.ids.split(",") if t.strip()]
    pos = [int(t) for t in a.positions.split(",")] if a.positions else None
    lg = ref_logits(a.model, ids, pos)
    json.dump({"logits": lg.tolist()}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
