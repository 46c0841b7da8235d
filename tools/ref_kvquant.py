#!/usr/bin/python3
"""Independent numpy reference of dllmq's quantized KV stores ("fake quant": quantize, then
dequantize) and of `dllmq calibrate --method kvquant --trajectory ar`.

Written from the definitions given to the test author (not from the C++).  Notation: per
layer K, V arrays [rows, n_kv_heads, hd] for absolute positions 0..W-1 (the rows a Fast-dLLM
block-start refresh writes: W = s in prefix mode, W = L in dual mode).  "fp16" = IEEE half;
fp16(x) = round to nearest even unless said otherwise.  All quantizer inputs are first cast to
float32 (the engine's precision); dequantized values are returned in float64.

Uniform asymmetric b-bit group quantizer (KIVI arithmetic), per group x[0..n):
    zero  = fp16 rounded TOWARD -INF of min(x)
    scale = fp16 rounded TOWARD +INF of float32((max(x) - zero) / (2^b - 1))
            (max == min: scale = 0 and every code 0).  The base is the ROUNDED zero, as
            docs/kv-quant.md states (so the grid covers [min, max] and every error is
            <= scale/2); SCALE_FROM = "min" gives (max - min) / (2^b - 1) instead.
    q     = clip(rint((x - zero) / scale), 0, 2^b - 1)   (float32 subtraction/division,
                                                          rint = round half to even)
    x_hat = q * scale + zero
KIVI (method "kivi"): K post-RoPE, per (layer, kv head, channel) over groups of G
    consecutive ABSOLUTE positions [gG, (g+1)G); complete groups inside [0, W) are quantized
    (bits_k), the rows of a trailing partial group stay unchanged (full precision).
    V per (layer, kv head, position) over groups of Gv = min(G, hd) consecutive channels
    (bits_v), every row.
dLLM-KVQ storage ("dllm-kvq"): as KIVI, but the listed K channels (layer, kv head, channel)
    are kept as fp16(post-RoPE K) instead of being quantized.  OPEN POINT (resolved here):
    in the trailing partial group those channels stay full precision like every other channel
    of those rows (`residual_fp16=False`); `residual_fp16=True` rounds them to fp16 there too.
KVQuant ("kvquant", parameters from a calibration artifact): K PRE-RoPE, per element of
    (layer l, head h, channel c): lo/up = k_lower/k_upper[h, c]; zp = (up+lo)/2,
    rng = (up-lo)/2 (float32); x < lo or x > up -> fp16(x) (outlier); else
    x_norm = (x - zp)/rng (rng == 0 -> 0) -> k_codebook[nearest]*rng + zp (ties: lower index);
    then RoPE at the row's absolute position.
    V per (layer, head, position) row: lo/up = np.percentile(row, op/2), (row, 100 - op/2);
    outliers -> fp16(x); of the others mn/mx = min/max, offset = fp16((mx+mn)/2),
    rng = fp16((mx-mn)/2) (nearest), x_norm = (x - offset)/rng (rng == 0 -> 0)
    -> v_codebook[nearest]*rng + offset.
    Rows at positions < sink (default 1): pre-RoPE K and V kept as fp16(x).
dLLM-KVQ on the KVQuant base ("dllm-kvq", base="kvquant"; METHODS.md section 4): the listed
    K channels (layer, kv head, channel) are kept as fp16(PRE-RoPE K) and are never outliers;
    every other K channel and all of V exactly as KVQuant above (same artifact parameters);
    then RoPE over the whole row (kept channels included) at the row's absolute position.
"fp16" / "bf16" methods: every row of post-RoPE K and of V rounded to fp16 / bf16 (nearest
even), as the dense store does.
"fp32" / None: unchanged.

Calibration (calibrate_kvquant): per pair, one full forward over prompt_ids + answer_ids at
positions 0..T-1 (nothing masked); pre-RoPE K and V per layer, positions < sink dropped.
k_lower/k_upper[h, c] = np.percentile over all collected tokens at op/2, 100 - op/2.
k_codebook (per layer) = kmeans1d(2^bits_k) over the pooled x_norm of all non-outlier K
elements; v_codebook = kmeans1d(2^bits_v) over pooled non-outlier V x_norm, per-token
normalisation as the V quantizer but with the float32 offset/range (no fp16 rounding).
kmeans1d: sort; initial centroid i = smallest sorted value whose cumulative count reaches
(i + 0.5)/k * n; Lloyd (nearest, ties to lower; mean of non-empty clusters; empty keep);
stop when no centroid moved by more than 1e-7 * (max - min), or after 100 iterations;
sorted ascending.

Sensitivity ("fragile" decisions).  The engine computes K/V in float32, so a quantizer
decision whose input lies within `delta` (relative to the RMS of that layer's K or V) of
its decision boundary could go either way (rint half-points, fp16 rounding points of
zero/scale/offset/range/kept values, outlier thresholds, nearest-centroid midpoints).
KVFakeQuant(delta=d) counts them in `.fragile`; with flip=True it takes the OTHER branch
for every such decision (and the other `residual_fp16` choice for dllm-kvq), so a test can
accept only prompts whose result does not depend on them.

Hook for tools/ref_decode.py: a KVFakeQuant instance (or a spec dict for it) is called as
    hook(model, kv, positions) -> [(K_post_hat, V_hat)] per layer
with kv = [(K_post, V, K_pre)] per layer holding the rows at `positions` (0..W-1).

CLI:
    ref_kvquant.py calibrate -m DIR --data pairs.jsonl --kv-bits B [--kv-bits-v B]
                   [--outlier-percent 1] [--sink 1] --out art.safetensors
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np as st  # noqa: E402

# KIVI scale base: "zero" = (max - fp16 zero) / (2^b - 1) as docs/kv-quant.md states (every
# element's error <= scale/2); "min" = (max - min) / (2^b - 1) as the test brief first said.
SCALE_FROM = "zero"

F16_NEG_INF = np.float16(-np.inf)
F16_POS_INF = np.float16(np.inf)


# ------------------------------------------------------------------------------ fp16 rounding
def _f32(x):
    return np.asarray(x, dtype=np.float32)


def fp16_nearest(x):
    """float32 -> nearest fp16 (ties to even) -> float32."""
    return _f32(x).astype(np.float16).astype(np.float32)


def fp16_down(x):
    """Largest fp16 value <= x (as float32)."""
    x = _f32(x)
    f = np.atleast_1d(x.astype(np.float16))
    xf = np.atleast_1d(x)
    over = f.astype(np.float32) > xf
    f[over] = np.nextafter(f[over], F16_NEG_INF)
    return f.astype(np.float32).reshape(x.shape)


def fp16_up(x):
    """Smallest fp16 value >= x (as float32)."""
    x = _f32(x)
    f = np.atleast_1d(x.astype(np.float16))
    xf = np.atleast_1d(x)
    under = f.astype(np.float32) < xf
    f[under] = np.nextafter(f[under], F16_POS_INF)
    return f.astype(np.float32).reshape(x.shape)


def _f16_prev(v):
    return np.nextafter(_f32(v).astype(np.float16), F16_NEG_INF).astype(np.float32)


def _f16_next(v):
    return np.nextafter(_f32(v).astype(np.float16), F16_POS_INF).astype(np.float32)


class Ctx:
    """Fragile-decision bookkeeping (see module doc).  delta = 0 disables it."""

    def __init__(self, delta=0.0, flip=False):
        self.delta = float(delta)
        self.flip = bool(flip)
        self.fragile = 0
        self.by_kind = {}

    def pick(self, kind, default, alt, fragile):
        if self.delta <= 0:
            return default
        fragile = np.asarray(fragile, dtype=bool)
        n = int(fragile.sum())
        if n:
            self.fragile += n
            self.by_kind[kind] = self.by_kind.get(kind, 0) + n
            if self.flip:
                return np.where(fragile, alt, default)
        return default


_NOCTX = Ctx()


def fp16_nearest_c(x, ctx=_NOCTX, tol=0.0, kind="fp16"):
    x = _f32(x)
    r = fp16_nearest(x)
    if ctx.delta <= 0:
        return r
    lo, hi = fp16_down(x), fp16_up(x)
    mid = (lo.astype(np.float64) + hi.astype(np.float64)) / 2
    fragile = (lo != hi) & (np.abs(x.astype(np.float64) - mid) < tol)
    alt = np.where(r == lo, hi, lo)
    return ctx.pick(kind, r, alt, fragile).astype(np.float32)


def fp16_down_c(x, ctx=_NOCTX, tol=0.0, kind="fp16-down"):
    x = _f32(x)
    r = fp16_down(x)
    if ctx.delta <= 0:
        return r
    hi = fp16_up(x)
    x64 = x.astype(np.float64)
    near_lo = (x64 - r) < tol          # includes x exactly representable
    near_hi = (hi != r) & ((hi - x64) < tol)
    alt = np.where(near_lo, _f16_prev(r), hi)
    return ctx.pick(kind, r, alt, near_lo | near_hi).astype(np.float32)


def fp16_up_c(x, ctx=_NOCTX, tol=0.0, kind="fp16-up"):
    x = _f32(x)
    r = fp16_up(x)
    if ctx.delta <= 0:
        return r
    lo = fp16_down(x)
    x64 = x.astype(np.float64)
    near_hi = (r - x64) < tol
    near_lo = (lo != r) & ((x64 - lo) < tol)
    alt = np.where(near_hi, _f16_next(r), lo)
    return ctx.pick(kind, r, alt, near_lo | near_hi).astype(np.float32)


def bf16_nearest(x):
    """float32 -> nearest bf16 (ties to even) -> float32."""
    return st.bf16_bits_to_f32(st.f32_to_bf16_bits(_f32(x))).astype(np.float32)


def bf16_nearest_c(x, ctx=_NOCTX, tol=0.0, kind="bf16"):
    x = _f32(x)
    r = bf16_nearest(x)
    if ctx.delta <= 0:
        return r
    x64 = x.astype(np.float64)
    r64 = r.astype(np.float64)
    ulp = np.spacing(np.abs(r)).astype(np.float64) * 65536.0
    alt = r64 + np.sign(x64 - r64) * ulp
    fragile = (x64 != r64) & (np.abs(x64 - (r64 + alt) / 2) < tol)
    return ctx.pick(kind, r, alt.astype(np.float32), fragile).astype(np.float32)


# ------------------------------------------------------------------------------ uniform groups
def uniform_fq(x, bits, ctx=_NOCTX, tol=0.0, return_params=False, scale_from=None):
    """KIVI asymmetric quantizer over the LAST axis of x (each slice one group).
    scale_from: "zero" (default, docs/kv-quant.md): scale = (max - zero)/(2^b - 1) with the
    fp16-rounded zero; "min": scale = (max - min)/(2^b - 1).
    Returns x_hat float64 (and (zero, scale, codes) if return_params)."""
    scale_from = scale_from or SCALE_FROM
    x = _f32(x)
    qmax = float(2 ** bits - 1)
    mn = x.min(axis=-1, keepdims=True)
    mx = x.max(axis=-1, keepdims=True)
    deg = mx == mn
    zero = fp16_down_c(mn, ctx, tol, "kivi-zero")
    base = zero if scale_from == "zero" else mn
    s32 = ((mx - base).astype(np.float32) / np.float32(qmax)).astype(np.float32)
    # degenerate groups (max == min) take no scale decision: tolerance -1 never matches
    # (the engine's error on max - min is <= 2 tol, on the scale <= 2 tol / (2^b - 1))
    scale = fp16_up_c(s32, ctx, np.where(deg, -1.0, 2.0 * tol / qmax), "kivi-scale")
    scale = np.where(deg, np.float32(0), scale).astype(np.float32)
    safe = np.where(deg, np.float32(1), scale).astype(np.float32)
    t = ((x - zero).astype(np.float32) / safe).astype(np.float32)
    t = np.where(deg, np.float32(0), t)
    q = np.rint(t)
    if ctx.delta > 0:
        fl = np.floor(t)
        dist = np.abs((t - fl).astype(np.float64) - 0.5) * safe
        fragile = (~deg) & (dist < tol) & (fl >= 0) & (fl + 1 <= qmax)
        alt = np.where(q == fl, fl + 1, fl)
        q = ctx.pick("kivi-rint", q, alt, fragile)
    q = np.clip(q, 0, qmax)
    xh = q.astype(np.float64) * scale.astype(np.float64) + zero.astype(np.float64)
    if return_params:
        return xh, (zero, scale, q)
    return xh


def _rms(a):
    a = np.asarray(a, dtype=np.float64)
    return float(np.sqrt(np.mean(a * a))) if a.size else 1.0


def kivi_k(K, bits, G, ctx=_NOCTX, delta=0.0, keep=None, residual_fp16=False):
    """K [W, KV, hd] (post-RoPE) -> fake-quantized float64.  keep: bool [KV, hd] channels
    stored as fp16 instead (dLLM-KVQ)."""
    K32 = _f32(K)
    W, KV, hd = K32.shape
    tol = delta * _rms(K32)
    out = K32.astype(np.float64).copy()
    n = W // G
    if n:
        blk = K32[:n * G].reshape(n, G, KV, hd).transpose(0, 2, 3, 1)  # [n, KV, hd, G]
        if keep is not None and keep.any():
            # kept channels take no part: quantize the others only
            sel = ~keep
            sub = blk[:, sel, :]  # [n, m, G]
            xh = uniform_fq(sub, bits, ctx, tol)
            full = blk.astype(np.float64).copy()
            full[:, sel, :] = xh
            full[:, keep, :] = fp16_nearest_c(blk[:, keep, :], ctx, tol, "dllm-fp16").astype(np.float64)
            xh = full
        else:
            xh = uniform_fq(blk, bits, ctx, tol)
        out[:n * G] = xh.transpose(0, 3, 1, 2).reshape(n * G, KV, hd)
    if keep is not None and keep.any() and W > n * G:
        use_fp16 = residual_fp16 != (ctx.flip and ctx.delta > 0)
        if use_fp16:
            res = out[n * G:]
            res[:, keep] = fp16_nearest(K32[n * G:][:, keep]).astype(np.float64)
    return out


def kivi_v(V, bits, G, ctx=_NOCTX, delta=0.0):
    V32 = _f32(V)
    W, KV, hd = V32.shape
    Gv = min(G, hd)
    if hd % Gv:
        raise ValueError("head dim %d is not a multiple of the V group %d" % (hd, Gv))
    tol = delta * _rms(V32)
    xh = uniform_fq(V32.reshape(W, KV, hd // Gv, Gv), bits, ctx, tol)
    return xh.reshape(W, KV, hd)


# ------------------------------------------------------------------------------ KVQuant
def nearest_centroid(xn, cb, ctx=_NOCTX, tol_n=None, kind="centroid"):
    """Index of the nearest codebook entry (ties to the lower index).  tol_n: per-element
    tolerance in x_norm units for fragility (array broadcastable to xn)."""
    xn = np.asarray(xn, dtype=np.float64)
    cb = np.asarray(cb, dtype=np.float64)
    d = np.abs(xn[..., None] - cb)
    idx = np.argmin(d, axis=-1)
    if ctx.delta > 0 and tol_n is not None and cb.shape[0] > 1:
        dd = d.copy()
        np.put_along_axis(dd, idx[..., None], np.inf, axis=-1)
        idx2 = np.argmin(dd, axis=-1)
        gap = np.take_along_axis(dd, idx2[..., None], -1)[..., 0] - np.take_along_axis(d, idx[..., None], -1)[..., 0]
        idx = ctx.pick(kind, idx, idx2, gap < 2 * np.asarray(tol_n))
    return idx


def kvquant_k(Kpre, lower, upper, cb, positions, sink=1, ctx=_NOCTX, delta=0.0, keep=None):
    """Pre-RoPE K [W, KV, hd] -> fake-quantized pre-RoPE K (float64).  keep: bool [KV, hd]
    channels stored as fp16 instead (dLLM-KVQ on the KVQuant base; never outliers)."""
    x = _f32(Kpre)
    tol = delta * _rms(x)
    lo = _f32(lower)[None]
    up = _f32(upper)[None]
    zp = ((up + lo) / np.float32(2)).astype(np.float32)
    rng = ((up - lo) / np.float32(2)).astype(np.float32)
    outl = (x < lo) | (x > up)
    if ctx.delta > 0:
        fr = (np.abs(x.astype(np.float64) - lo) < tol) | (np.abs(x.astype(np.float64) - up) < tol)
        if keep is not None:
            fr &= ~keep[None]
        outl = ctx.pick("kvq-k-outlier", outl, ~outl, fr)
    if keep is not None:
        outl &= ~keep[None]
    rz = rng == 0
    safe = np.where(rz, np.float32(1), rng).astype(np.float32)
    xn = np.where(rz, np.float32(0), ((x - zp).astype(np.float32) / safe).astype(np.float32))
    tol_n = np.broadcast_to(tol / safe.astype(np.float64), x.shape)
    idx = nearest_centroid(xn, cb, ctx, tol_n, "kvq-k-centroid")
    out = _f32(cb)[idx].astype(np.float64) * rng.astype(np.float64) + zp.astype(np.float64)
    out[outl] = fp16_nearest_c(x[outl], ctx, tol, "kvq-k-fp16").astype(np.float64)
    if keep is not None and keep.any():
        kept = np.broadcast_to(keep[None], x.shape)
        out[kept] = fp16_nearest_c(x[kept], ctx, tol, "dllm-kvq-fp16").astype(np.float64)
    pos = np.asarray(positions)
    sk = pos < sink
    if sk.any():
        out[sk] = fp16_nearest_c(x[sk], ctx, tol, "kvq-sink-fp16").astype(np.float64)
    return out


def _v_row_norm(x, outlier_percent, ctx=_NOCTX, tol=0.0, round_fp16=True):
    """x float32 [..., hd] -> (outlier mask, offset, rng) per row (offset/rng [..., 1])."""
    x64 = x.astype(np.float64)
    lo = np.percentile(x64, outlier_percent / 2.0, axis=-1, keepdims=True)
    up = np.percentile(x64, 100.0 - outlier_percent / 2.0, axis=-1, keepdims=True)
    outl = (x64 < lo) | (x64 > up)
    if ctx.delta > 0:
        fr = (np.abs(x64 - lo) < tol) | (np.abs(x64 - up) < tol)
        outl = ctx.pick("kvq-v-outlier", outl, ~outl, fr)
    inl = ~outl
    mn = np.where(inl, x, np.float32(np.inf)).min(axis=-1, keepdims=True).astype(np.float32)
    mx = np.where(inl, x, np.float32(-np.inf)).max(axis=-1, keepdims=True).astype(np.float32)
    off = ((mx + mn) / np.float32(2)).astype(np.float32)
    rng = ((mx - mn) / np.float32(2)).astype(np.float32)
    if round_fp16:
        off = fp16_nearest_c(off, ctx, tol, "kvq-v-offset")
        rng = fp16_nearest_c(rng, ctx, tol, "kvq-v-range")
    return outl, off, rng


def kvquant_v(V, cb, positions, outlier_percent=1.0, sink=1, ctx=_NOCTX, delta=0.0):
    x = _f32(V)
    tol = delta * _rms(x)
    outl, off, rng = _v_row_norm(x, outlier_percent, ctx, tol, round_fp16=True)
    rz = rng == 0
    safe = np.where(rz, np.float32(1), rng).astype(np.float32)
    xn = np.where(rz, np.float32(0), ((x - off).astype(np.float32) / safe).astype(np.float32))
    tol_n = np.broadcast_to(tol / safe.astype(np.float64), x.shape)
    idx = nearest_centroid(xn, cb, ctx, tol_n, "kvq-v-centroid")
    out = _f32(cb)[idx].astype(np.float64) * rng.astype(np.float64) + off.astype(np.float64)
    out[outl] = fp16_nearest_c(x[outl], ctx, tol, "kvq-v-fp16").astype(np.float64)
    sk = np.asarray(positions) < sink
    if sk.any():
        out[sk] = fp16_nearest_c(x[sk], ctx, tol, "kvq-sink-fp16").astype(np.float64)
    return out


def rope(model, x, positions):
    return model.rope(np.asarray(x, dtype=np.float64), positions)


# ------------------------------------------------------------------------------ artifact
def load_calib(path):
    """-> dict(n_layers, k_lower[l], k_upper[l], k_codebook[l], v_codebook[l], bits_k, bits_v,
    sink, outlier_percent, meta)."""
    t, meta = st.read_safetensors(path, upcast=True)
    meta = meta or {}
    nl = 0
    while "layers.%d.k_codebook" % nl in t:
        nl += 1
    if nl == 0:
        raise ValueError("%s: no layers.0.k_codebook" % path)
    g = lambda n: [np.asarray(t["layers.%d.%s" % (l, n)], dtype=np.float32) for l in range(nl)]  # noqa: E731
    c = dict(n_layers=nl, k_lower=g("k_lower"), k_upper=g("k_upper"), k_codebook=g("k_codebook"),
             v_codebook=g("v_codebook"), meta=meta)
    c["bits_k"] = int(meta.get("kv_bits_k", int(np.log2(len(c["k_codebook"][0])))))
    c["bits_v"] = int(meta.get("kv_bits_v", int(np.log2(len(c["v_codebook"][0])))))
    c["sink"] = int(meta.get("sink", "1"))
    c["outlier_percent"] = float(meta.get("outlier_percent", "1"))
    return c


def parse_channels(spec):
    """'L:H:C,L:H:C' -> set of (l, h, c)."""
    out = set()
    if not spec:
        return out
    for part in str(spec).split(","):
        part = part.strip()
        if not part:
            continue
        l, h, c = (int(v) for v in part.split(":"))
        out.add((l, h, c))
    return out


# ------------------------------------------------------------------------------ the hook
class KVFakeQuant:
    """Callable fake-quant hook for tools/ref_decode.py (see module doc).

    method: "fp32" | "fp16" | "bf16" | "kivi" | "dllm-kvq" | "kvquant"; base (dllm-kvq only):
    "kivi" | "kvquant" (the codec of the other K channels and V; kvquant needs calib)
    bits (both K and V) or bits_k / bits_v; group (KIVI G, default 32); channels ("L:H:C,..."
    or a set of tuples, dllm-kvq); calib (path or load_calib dict, kvquant; bits/sink/
    outlier_percent default to the artifact's); delta/flip: fragile-decision handling.
    """

    def __init__(self, method, bits=None, bits_k=None, bits_v=None, group=32, channels=None, calib=None,
                 sink=None, outlier_percent=None, residual_fp16=False, delta=0.0, flip=False, base="kivi"):
        self.method = method
        if base not in ("kivi", "kvquant") or (base == "kvquant" and method != "dllm-kvq"):
            raise ValueError("base %r: kivi, or kvquant with method dllm-kvq" % (base,))
        self.base = base
        self.group = int(group)
        self.channels = channels if isinstance(channels, (set, frozenset)) else parse_channels(channels)
        self.residual_fp16 = residual_fp16
        self.ctx = Ctx(delta, flip)
        self.calls = 0
        self.rows = []  # W of every call
        if method == "kvquant" or base == "kvquant":
            self.calib = load_calib(calib) if isinstance(calib, str) else calib
            if self.calib is None:
                raise ValueError("kvquant needs calib")
            self.bits_k = self.calib["bits_k"] if bits_k is None and bits is None else int(bits_k or bits)
            self.bits_v = self.calib["bits_v"] if bits_v is None and bits is None else int(bits_v or bits)
            self.sink = self.calib["sink"] if sink is None else int(sink)
            self.outlier_percent = self.calib["outlier_percent"] if outlier_percent is None else float(
                outlier_percent)
        else:
            self.calib = None
            self.bits_k = int(bits_k if bits_k is not None else (bits if bits is not None else 2))
            self.bits_v = int(bits_v if bits_v is not None else (bits if bits is not None else 2))
            self.sink = sink
            self.outlier_percent = outlier_percent
        if method not in ("fp32", "fp16", "bf16", "kivi", "dllm-kvq", "kvquant"):
            raise ValueError("unknown kv method %r" % method)

    @property
    def fragile(self):
        return self.ctx.fragile

    def needs_prerope(self):
        return self.method == "kvquant" or self.base == "kvquant"

    def _keep(self, li, shape):
        keep = np.zeros(shape, dtype=bool)
        for (l, h, c) in self.channels:
            if l == li:
                keep[h, c] = True
        return keep

    def __call__(self, model, kv, positions):
        self.calls += 1
        positions = np.asarray(positions)
        self.rows.append(int(positions.shape[0]))
        d = self.ctx.delta
        out = []
        for li, ent in enumerate(kv):
            K, V = ent[0], ent[1]
            if self.method == "fp32":
                out.append((np.asarray(K, np.float64), np.asarray(V, np.float64)))
            elif self.method in ("fp16", "bf16"):
                tk, tv = d * _rms(K), d * _rms(V)
                f = fp16_nearest_c if self.method == "fp16" else bf16_nearest_c
                out.append((f(K, self.ctx, tk).astype(np.float64), f(V, self.ctx, tv).astype(np.float64)))
            elif self.method == "kivi" or (self.method == "dllm-kvq" and self.base == "kivi"):
                keep = self._keep(li, K.shape[1:]) if self.method == "dllm-kvq" else None
                out.append((kivi_k(K, self.bits_k, self.group, self.ctx, d, keep, self.residual_fp16),
                            kivi_v(V, self.bits_v, self.group, self.ctx, d)))
            else:
                if len(ent) < 3:
                    raise ValueError("kvquant needs pre-RoPE K (forward(..., return_k_prerope=True))")
                c = self.calib
                keep = self._keep(li, K.shape[1:]) if self.method == "dllm-kvq" else None
                kq = kvquant_k(ent[2], c["k_lower"][li], c["k_upper"][li], c["k_codebook"][li], positions,
                               self.sink, self.ctx, d, keep)
                vq = kvquant_v(V, c["v_codebook"][li], positions, self.outlier_percent, self.sink, self.ctx, d)
                out.append((rope(model, kq, positions), vq))
        return out


def make_hook(spec):
    """None | KVFakeQuant | callable | dict(method=..., ...) -> hook or None."""
    if spec is None:
        return None
    if isinstance(spec, dict):
        if spec.get("method") in (None, "fp32") and not spec.get("force"):
            return None
        return KVFakeQuant(**{k: v for k, v in spec.items() if k != "force"})
    if callable(spec):
        return spec
    raise TypeError("kv_quant must be None, a dict or a callable")


# ------------------------------------------------------------------------------ calibration
def kmeans1d(data, k, max_iter=100, rel_tol=1e-7, weights=None):
    """Deterministic 1-D k-means (see module doc), optionally weighted (KVQuant's Fisher
    weighting: minimises sum_i w_i (x_i - c(x_i))^2; initial centroids at the weighted quantiles
    (i + 0.5) / k).  Returns float64 [k] ascending."""
    x = np.asarray(data, dtype=np.float64).ravel()
    w = np.ones_like(x) if weights is None else np.asarray(weights, dtype=np.float64).ravel()
    order = np.argsort(x, kind="stable")
    x, w = x[order], w[order]
    n = x.shape[0]
    if n == 0:
        raise ValueError("kmeans1d: no data")
    cum = np.cumsum(w)
    c = np.empty(k, dtype=np.float64)
    for i in range(k):
        target = (i + 0.5) / k * cum[-1]
        j = int(np.searchsorted(cum, target, side="left"))  # first index with cum >= target
        c[i] = x[min(j, n - 1)]
    tol = rel_tol * (x[-1] - x[0])
    for _ in range(max_iter):
        a = _assign(x, c)
        sums = np.bincount(a, weights=w * x, minlength=k)
        cnt = np.bincount(a, weights=w, minlength=k)
        new = c.copy()
        nz = cnt > 0
        new[nz] = sums[nz] / cnt[nz]
        moved = float(np.max(np.abs(new - c)))
        c = new
        if moved <= tol:
            break
    return np.sort(c)


def _assign(x, c):
    """Nearest centroid, ties to the lower index (chunked to bound memory)."""
    out = np.empty(x.shape[0], dtype=np.int64)
    step = max(1, 4000000 // max(1, c.shape[0]))
    for a in range(0, x.shape[0], step):
        out[a:a + step] = np.argmin(np.abs(x[a:a + step, None] - c[None, :]), axis=1)
    return out


def collect_kv(model, pairs, sink=1):
    """-> per layer (K_pre [N, KV, hd], V [N, KV, hd]) float64 over all pairs, positions >= sink."""
    ks = [[] for _ in range(model.n_layers)]
    vs = [[] for _ in range(model.n_layers)]
    for pr in pairs:
        ids = list(pr["prompt_ids"]) + list(pr["answer_ids"])
        _, kv = model.forward(np.asarray(ids), np.arange(len(ids)), return_kv=True, return_k_prerope=True)
        for li, (_k, v, kp) in enumerate(kv):
            ks[li].append(kp[sink:])
            vs[li].append(v[sink:])
    return [(np.concatenate(ks[l]), np.concatenate(vs[l])) for l in range(model.n_layers)]


def calibrate_kvquant(model, pairs, bits_k, bits_v=None, outlier_percent=1.0, sink=1):
    """numpy reference of `dllmq calibrate --method kvquant --trajectory ar`.
    Returns (tensors dict name -> float32 array, metadata dict, extras) where extras per layer
    hold the data ranges (for tolerance comparisons)."""
    bits_v = bits_k if bits_v is None else bits_v
    tens = {}
    extras = []
    for li, (K, V) in enumerate(collect_kv(model, pairs, sink)):
        lo = np.percentile(K, outlier_percent / 2.0, axis=0)
        up = np.percentile(K, 100.0 - outlier_percent / 2.0, axis=0)
        zp = (up + lo) / 2
        rg = (up - lo) / 2
        inl = (K >= lo) & (K <= up)
        xn = np.where(rg > 0, (K - zp) / np.where(rg > 0, rg, 1), 0.0)[inl]
        kcb = kmeans1d(xn, 2 ** bits_k)
        # V per token row
        x = V
        vlo = np.percentile(x, outlier_percent / 2.0, axis=-1, keepdims=True)
        vup = np.percentile(x, 100.0 - outlier_percent / 2.0, axis=-1, keepdims=True)
        vin = (x >= vlo) & (x <= vup)
        mn = np.where(vin, x, np.inf).min(-1, keepdims=True)
        mx = np.where(vin, x, -np.inf).max(-1, keepdims=True)
        off = (mx + mn) / 2
        vr = (mx - mn) / 2
        vxn = np.where(vr > 0, (x - off) / np.where(vr > 0, vr, 1), 0.0)[vin]
        vcb = kmeans1d(vxn, 2 ** bits_v)
        tens["layers.%d.k_lower" % li] = lo.astype(np.float32)
        tens["layers.%d.k_upper" % li] = up.astype(np.float32)
        tens["layers.%d.k_codebook" % li] = kcb.astype(np.float32)
        tens["layers.%d.v_codebook" % li] = vcb.astype(np.float32)
        extras.append(dict(k_range=float(K.max() - K.min()), k_norm_range=float(xn.max() - xn.min()),
                           v_norm_range=float(vxn.max() - vxn.min()), n_k=int(xn.size), n_v=int(vxn.size)))
    meta = dict(method="kvquant", kv_bits_k=str(bits_k), kv_bits_v=str(bits_v), sink=str(sink),
                outlier_percent="%g" % outlier_percent, trajectory="ar")
    return tens, meta, extras


def read_pairs(path):
    pairs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                pairs.append(json.loads(line))
    return pairs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("calibrate", help="numpy KVQuant calibration (trajectory ar)")
    c.add_argument("-m", "--model", required=True)
    c.add_argument("--data", required=True, help="JSONL with prompt_ids / answer_ids per line")
    c.add_argument("--kv-bits", type=int, required=True)
    c.add_argument("--kv-bits-v", type=int)
    c.add_argument("--outlier-percent", type=float, default=1.0)
    c.add_argument("--sink", type=int, default=1)
    c.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    import ref_forward as rf  # noqa: E402
    model = rf.RefModel(a.model)
    tens, meta, _ = calibrate_kvquant(model, read_pairs(a.data), a.kv_bits, a.kv_bits_v, a.outlier_percent, a.sink)
    st.write_safetensors(a.out, tens, metadata=meta, dtype="f32")
    print("wrote %s (%d tensors)" % (a.out, len(tens)))


if __name__ == "__main__":
    main()
