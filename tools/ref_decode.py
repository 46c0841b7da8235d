#!/usr/bin/python3
"""Independent numpy reference of the dLLM samplers and of Fast-dLLM's prefix/dual KV cache.

Written from docs/reference/dllm-models-and-fast-dllm.md §2.5, §3, §4.3-4.6 and §8, with the
open details settled by reading the upstream sources (NVlabs/Fast-dLLM @ 24cc59e:
llada/generate.py, dream/model/generation_utils.py, dream/model/generation_utils_block.py,
dream/model/modeling_dream.py, llada/model/modeling_llada.py; a later llada/generate.py
that adds `factor`; ML-GSAI/LLaDA generate.py).  Nothing here is copied; every rule that
was resolved from upstream is written down next to the code as "UPSTREAM:".

Model forwards come from tools/ref_forward.py (float64).  The KV cache is real: a cached
forward computes only the query rows and attends to stored K/V rows taken from the
forward that produced them, so stale rows are reproduced exactly.  NFE counts every
model forward actually run (block-start refresh forwards included, forwards whose step
commits nothing included).

Entry point:  generate(model, prompt_ids, gen_length, block_length, steps, cache=...,
                       threshold=..., factor=..., alg=..., ...) -> dict
  tokens : generated ids (length gen_length; may still hold the mask id in the Dream
           block-mode quirk cases described below)
  nfe    : number of model forwards
  trace  : one record per forward: {"nfe", "kind", "block", "revealed": [[pos, tok, conf]],
           "margin": smallest decision margin of that step (see _margins) }
  kv_quant (optional): fake-quantized cache (tools/ref_kvquant.py).  Right after each
           block-start refresh builds the cache (prefix: rows [0, s), dual: all L rows) the
           stored K/V are replaced by quantized-then-dequantized values; cached forwards attend
           to those, while the rows they compute themselves (the active block, and the suffix
           in prefix mode) stay exact.  None (default) = unchanged behaviour.

LLaDA (no logit shift):
  canvas x = prompt + MASK*G; blocks [s, e) of block_length; spb = steps / n_blocks.
  quota  : get_num_transfer_tokens(#mask in block, spb): base = m // spb, the first m % spb
           steps take one more.
  per step: x0 = argmax(logits) (Gumbel noise only if temperature > 0); conf = softmax in
           float64 of the logits at x0 (low_confidence) or uniform random (random);
           candidates = MASK positions inside the current block only.
  rules  : quota topk(conf, n[j]); threshold: keep rank 0, add every other with conf >= tau;
           factor f: sorted confidences c1 >= c2 >= ...; thr_1 = -1, thr_n = 1 - f/(n+1);
           first n with c_n < thr_n -> reveal n-1; if the loop ends at the last rank
           (fails there or never fails) reveal all (UPSTREAM quirk `top_i == len-1`).
  cache none  : full forward each step; steps continue while the block has a MASK.
  cache prefix: block start = full forward over the canvas (commits with quota n[0] /
           threshold / factor); cache = K/V of [0, s) from THAT forward; then while the block
           has a MASK: queries = x[s:L] (block + whole suffix) attending to cached [0, s) plus
           their own fresh K/V; only block rows are candidates.
  cache dual  : block start = full forward, cache = K/V of all L positions; then while the
           block has a MASK: queries = x[s:e] only, their fresh K/V replace rows [s, e),
           suffix rows [e, L) stay as computed by the block-start forward.
  UPSTREAM (later llada/generate.py with `factor`): the in-block loop of prefix/dual checks
  "block has no MASK -> break" BEFORE running a forward.  (The 24cc59e version checked
  after, which ran one useless forward when the refresh already filled the block, and
  indexed past the quota array when spb == 1.)  This reference uses check-first.
  cfg_scale > 0 (cache none only, LLaDA generate.py): unconditional canvas = x with prompt
  positions set to MASK; logits = un + (cfg+1)(cond - un); one NFE per step (the batched
  pair is one forward call upstream; counted once).
  logits_eos_inf: logits[eos] = -inf before argmax.  confidence_eos_eot_inf (UPSTREAM
  chained assignment `lwn[..., EOS] = logits[..., EOT] = -inf` AFTER x0 is taken): at
  temperature 0 `lwn` IS `logits`, so both EOS and EoT logits become -inf for the softmax
  (x0 unchanged; conf of an EOS/EoT x0 becomes 0); at T > 0 only EoT is removed from the
  softmax.

Dream (logit shift: shifted position i uses raw output i-1 of the same forward window,
position 0 of the window copies its own raw row):
  cache none, no threshold -> Dream `_sample` over the whole canvas (block_length ignored,
           the upstream sampler has no blocks): t = linspace(1, eps, steps+1); each step
           one full forward; conf: maskgit_plus = max prob, topk_margin = p1 - p2, entropy =
           sum p log(p + 1e-10); k = int(|M| * (1 - s/t)) for i < steps-1, else |M|; topk.
           origin: each masked position revealed with prob 1 - s/t (1 at the last step).
           NFE = steps.
  cache none + threshold -> Fast-dLLM global `confidence_threshold` (generation_utils.py):
           assert #mask % steps == 0; q = #mask // steps; carry = 0; while i < steps:
           forward; conf = max prob; k = q + carry; carry = 0; take topk(conf, k); keep rank 0;
           each other rank with conf < tau is dropped: carry += 1, and if i >= steps-1 at
           that moment (live value of steps) also q = 0 and steps += 1.  UPSTREAM: the test
           uses the already-incremented steps for the later ranks, so steps grows by exactly
           one per final step that drops anything; the extra step reveals rank 0 of the
           carried tokens plus those >= tau, and so on.  NFE = final value of steps.
  cache prefix/dual (generation_utils_block.py):
           per block: full forward, shifted; commit argmax at position s UNCONDITIONALLY
           (only that one position); cache as for LLaDA (Dream stores K/V [B, L, kv*hd]; same
           rows).  Then repeat (do-while, UPSTREAM):
             forward over the window (prefix: [s, L), dual: [s, e)); shift inside the window
             (row s+j uses raw s+j-1; row s uses raw s but s is already committed);
             threshold: candidates = block masks; conf = max prob; keep rank 0, drop conf < tau.
             otherwise (UPSTREAM: ANY alg other than confidence_threshold uses neg-entropy
             here): t = linspace(1, eps, spb+1); the step counter i starts at 1 after the
             refresh; if i == spb: break (after the forward - counted); k = int(m*(1-t[i+1]/
             t[i])) if i < spb-1 else m (m = block masks); topk(neg-entropy); i += 1.
             stop when the block has no MASK.
           Consequences (reproduced): spb == 1 without threshold leaves the block's other
           positions MASK (the loop breaks at once after one extra forward); block_length
           == 1 runs one extra forward per block that commits nothing.
           `factor` for Dream is an extension (not upstream): used where threshold would be.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_forward as rf  # noqa: E402


# ------------------------------------------------------------------------------ math helpers
def softmax64(logits):
    l = np.asarray(logits, dtype=np.float64)
    z = l - l.max(axis=-1, keepdims=True)
    p = np.exp(z)
    return p / p.sum(axis=-1, keepdims=True)


def num_transfer_tokens(m, spb):
    base, rem = divmod(int(m), int(spb))
    return [base + (1 if j < rem else 0) for j in range(spb)]


def topk_desc(conf, k):
    """Indices of the k largest values, ordered largest first (ties: lower index first)."""
    conf = np.asarray(conf, dtype=np.float64)
    order = np.lexsort((np.arange(conf.shape[0]), -conf))
    return order[:k]


def factor_count(sorted_conf, factor):
    """Fast-dLLM get_transfer_index_dynamic: number of tokens to reveal."""
    n = len(sorted_conf)
    if n == 0:
        return 0
    thr = [1.0 - factor / (i + 2) for i in range(n)]  # rank i (0-based) is n = i+1
    thr[0] = -1.0
    top_i = 0
    for top_i in range(n):
        if sorted_conf[top_i] < thr[top_i]:
            break
    if top_i == 0 or top_i == n - 1:
        top_i += 1
    return top_i


class Counter:
    """Wraps a RefModel and counts forwards."""

    def __init__(self, model, prerope=False):
        self.m = model
        self.nfe = 0
        self.prerope = prerope  # full() also returns pre-RoPE K (entries (K, V, K_pre))

    def full(self, x):
        self.nfe += 1
        logits, kv = self.m.forward(np.asarray(x), np.arange(len(x)), return_kv=True,
                                    return_k_prerope=self.prerope)
        return logits, kv

    def cached(self, x_rows, positions, past):
        self.nfe += 1
        return self.m.forward(np.asarray(x_rows), np.asarray(positions), past=past)


def build_past(model, kv, W, kv_quant=None):
    """Cache rows [0, W) of a block-start refresh (prefix: W = s, dual: W = L).  With a
    fake-quant hook (tools/ref_kvquant.py) the stored rows are replaced by their
    quantized-then-dequantized values; fresh rows of later cached forwards stay exact."""
    if kv_quant is None:
        return [(e[0][:W], e[1][:W], np.arange(W)) for e in kv]
    q = kv_quant(model, [tuple(a[:W] for a in e) for e in kv], np.arange(W))
    return [(k, v, np.arange(W)) for (k, v) in q]


def _hook(kv_quant):
    if kv_quant is None:
        return None
    import ref_kvquant  # noqa: E402  (local: optional dependency)
    return ref_kvquant.make_hook(kv_quant)


def shift(raw):
    """Dream shift inside one forward window: row i uses raw row i-1, row 0 keeps its own."""
    return np.concatenate([raw[:1], raw[:-1]], axis=0)


# ------------------------------------------------------------------------------ selection
def _select(conf, cand, rule, k=None, tau=None, factor=None):
    """conf: float64 per candidate (same order as cand). Returns (chosen idx into cand, margin)."""
    n = len(cand)
    if n == 0:
        return [], float("inf")
    order = topk_desc(conf, n)
    sc = conf[order]
    if rule == "quota":
        k = min(int(k), n)
        chosen = list(order[:k])
        margin = float(sc[k - 1] - sc[k]) if 0 < k < n else float("inf")
        return chosen, margin
    if rule == "threshold":
        chosen = [order[0]] + [order[r] for r in range(1, n) if sc[r] >= tau]
        margin = float(sc[0] - sc[1]) if n > 1 else float("inf")  # rank-0 identity
        others = np.abs(sc[1:] - tau)
        if others.size:
            margin = min(margin, float(others.min()))
        return chosen, margin
    if rule == "factor":
        cnt = factor_count(list(sc), factor)
        chosen = list(order[:cnt])
        margin = float(sc[0] - sc[1]) if n > 1 else float("inf")
        for r in range(1, n):
            margin = min(margin, abs(float(sc[r]) - (1.0 - factor / (r + 2))))
        if 0 < cnt < n:
            margin = min(margin, float(sc[cnt - 1] - sc[cnt]))
        return chosen, margin
    raise ValueError(rule)


def _argmax_gap(lg):
    """Smallest top1 - top2 logit gap among rows (argmax tie risk)."""
    if lg.shape[0] == 0:
        return float("inf")
    part = np.partition(lg, -2, axis=-1)
    return float((part[:, -1] - part[:, -2]).min())


# ------------------------------------------------------------------------------ LLaDA
def _llada_step(lg_rows, x_rows, cand_local, rule, args, rng, eos_id, eot_id):
    """Decide one step for LLaDA. lg_rows: raw logits of candidate rows [n, V] (float64).
    Returns list of (local index, token, conf), margin, argmax gap."""
    lg = np.array(lg_rows, dtype=np.float64)
    if args["logits_eos_inf"] and eos_id is not None:
        lg[:, eos_id] = -np.inf
    T = args["temperature"]
    if T == 0:
        x0 = np.argmax(lg, axis=-1)
        lwn = lg
    else:
        u = rng.random(lg.shape)
        lwn = np.exp(lg) / (-np.log(u)) ** T
        x0 = np.argmax(lwn, axis=-1)
    lp = lg
    if args["confidence_eos_eot_inf"]:
        lp = lg.copy()
        if eot_id is not None:
            lp[:, eot_id] = -np.inf
        if T == 0 and eos_id is not None:  # lwn aliases logits at T == 0 (see module doc)
            lp[:, eos_id] = -np.inf
    if args["remasking"] == "low_confidence":
        p = softmax64(lp)
        conf = p[np.arange(len(x0)), x0]
    elif args["remasking"] == "random":
        conf = rng.random(len(x0))
    else:
        raise ValueError("remasking must be low_confidence or random")
    chosen, margin = _select(conf, cand_local, rule, k=args.get("_k"), tau=args["threshold"],
                             factor=args["factor"])
    gap = _argmax_gap(lg) if T == 0 else float("inf")
    return [(int(i), int(x0[i]), float(conf[i])) for i in chosen], margin, gap


def generate_llada(model, prompt, gen_length, block_length, steps, cache="none", threshold=None,
                   factor=None, remasking="low_confidence", temperature=0.0, cfg_scale=0.0,
                   logits_eos_inf=False, confidence_eos_eot_inf=False, eot_id=None, seed=0, kv_quant=None,
                   teacher=None, teacher_rank="reference"):
    """teacher: TRACE teacher forcing (METHODS.md §3): a list of gen_length reference ids.  Every
    revealed position takes its reference id; candidates are ranked by the probability of the
    reference id (teacher_rank "reference") or by the max probability ("confidence"), under the
    same schedule as inference."""
    kv_quant = _hook(kv_quant)
    mask = model.mask_id
    P = len(prompt)
    L = P + gen_length
    assert gen_length % block_length == 0, "gen_length must be a multiple of block_length"
    nb = gen_length // block_length
    assert steps % nb == 0, "steps must be a multiple of the number of blocks"
    spb = steps // nb
    if cfg_scale > 0 and cache != "none":
        raise ValueError("cfg_scale is only defined for cache none")
    rule = "threshold" if threshold is not None else ("factor" if factor is not None else "quota")
    rng = np.random.default_rng(seed)
    x = np.array(list(prompt) + [mask] * gen_length, dtype=np.int64)
    prompt_idx = np.zeros(L, dtype=bool)
    prompt_idx[:P] = True
    C = Counter(model, prerope=kv_quant is not None)
    trace = []
    args = dict(logits_eos_inf=logits_eos_inf, confidence_eos_eot_inf=confidence_eos_eot_inf,
                temperature=temperature, remasking=remasking, threshold=threshold, factor=factor)
    eos_id = model.eos_id

    max_fwd = 4 * block_length + 8

    def guard(j):
        if rule == "quota" and j >= spb:
            raise RuntimeError("quota exhausted with MASK left in the block: a step 'revealed' the mask id "
                               "(upstream would index past num_transfer_tokens)")
        if j > max_fwd:
            raise RuntimeError("no progress: the argmax keeps being the mask id")

    def commit(b, s, e, rows_logits, row0, kind, quota_j):
        # rows_logits: logits for canvas rows [row0, row0 + n); candidates = masks in [s, e)
        cand = [p for p in range(s, e) if x[p] == mask]
        if not cand:
            trace.append(dict(nfe=C.nfe, kind=kind, block=b, revealed=[], margin=float("inf")))
            return
        lg = rows_logits[[p - row0 for p in cand]]
        args["_k"] = quota_j
        if teacher is not None:
            prob = softmax64(np.asarray(lg, dtype=np.float64))
            toks = np.array([teacher[p - P] for p in cand])
            conf = prob[np.arange(len(cand)), toks] if teacher_rank == "reference" else prob.max(-1)
            chosen, margin = _select(conf, cand, rule, k=quota_j, tau=threshold, factor=factor)
            picks, gap = [(int(i), int(toks[i]), float(conf[i])) for i in chosen], float("inf")
        else:
            picks, margin, gap = _llada_step(lg, x, cand, rule, args, rng, eos_id, eot_id)
        rev = []
        for i, tok, cf in picks:
            x[cand[i]] = tok
            rev.append([cand[i], tok, cf])
        trace.append(dict(nfe=C.nfe, kind=kind, block=b, revealed=rev, margin=margin, argmax_gap=gap))

    for b in range(nb):
        s = P + b * block_length
        e = s + block_length
        quota = num_transfer_tokens(int((x[s:e] == mask).sum()), spb)
        j = 0
        if cache == "none":
            while (x[s:e] == mask).any():
                guard(j)
                logits, _ = C.full(x)
                if cfg_scale > 0:
                    un = x.copy()
                    un[prompt_idx] = mask
                    un_logits = model.forward(un)  # same NFE (batched with cond upstream)
                    logits = un_logits + (cfg_scale + 1.0) * (logits - un_logits)
                commit(b, s, e, logits, 0, "full", quota[j] if j < spb else 0)
                j += 1
            continue
        # block start: refresh forward over the whole canvas, also decodes
        logits, kv = C.full(x)
        commit(b, s, e, logits, 0, "refresh", quota[0])
        j = 1
        if cache == "prefix":
            past = build_past(model, kv, s, kv_quant)
        elif cache == "dual":
            past = build_past(model, kv, L, kv_quant)
        else:
            raise ValueError("cache must be none, prefix or dual")
        while (x[s:e] == mask).any():  # check-first (later upstream)
            guard(j)
            if cache == "prefix":
                lg = C.cached(x[s:], np.arange(s, L), past)
            else:
                lg = C.cached(x[s:e], np.arange(s, e), past)
            commit(b, s, e, lg, s, cache, quota[j] if j < spb else 0)
            j += 1
    return dict(tokens=x[P:].tolist(), nfe=C.nfe, trace=trace, canvas=x.tolist())


# ------------------------------------------------------------------------------ Dream
def _dream_sample_tokens(lg, temperature=0.0, top_p=None, top_k=None, rng=None, margin=False,
                         neg_entropy=False):
    """Dream sample_tokens on shifted logits rows [n, V]: returns (conf, x0) in float64."""
    lg = np.array(lg, dtype=np.float64)
    if temperature > 0:
        lg = lg / temperature
    if top_p is not None and top_p < 1:
        order = np.argsort(-lg, axis=-1, kind="stable")
        sl = np.take_along_axis(lg, order, -1)
        cp = np.cumsum(softmax64(sl), axis=-1)
        rm = cp > top_p
        rm[:, 1:] = rm[:, :-1].copy()
        rm[:, 0] = False
        full_rm = np.zeros_like(rm)
        np.put_along_axis(full_rm, order, rm, -1)
        lg = np.where(full_rm, np.finfo(np.float64).min, lg)
    if top_k is not None:
        kth = np.sort(lg, axis=-1)[:, -min(top_k, lg.shape[-1])][:, None]
        lg = np.where(lg < kth, np.finfo(np.float64).min, lg)
    p = softmax64(lg)
    if temperature > 0:
        cum = np.cumsum(p, axis=-1)
        u = rng.random((p.shape[0], 1))
        x0 = np.minimum((cum < u * cum[:, -1:]).sum(-1), p.shape[1] - 1)
        conf = p[np.arange(len(x0)), x0]
    else:
        x0 = np.argmax(p, axis=-1)
        conf = p[np.arange(len(x0)), x0]
    if margin:
        sp = np.sort(p, axis=-1)
        conf = sp[:, -1] - sp[:, -2]
    if neg_entropy:
        conf = np.sum(p * np.log(p + 1e-10), axis=-1)
    return conf, x0


def _dream_conf(lg, alg, temperature, top_p, top_k, rng):
    if alg in ("maskgit_plus", "confidence_threshold", "confidence", "low_confidence"):
        return _dream_sample_tokens(lg, temperature, top_p, top_k, rng)
    if alg == "topk_margin":
        return _dream_sample_tokens(lg, temperature, top_p, top_k, rng, margin=True)
    if alg == "entropy":
        return _dream_sample_tokens(lg, temperature, top_p, top_k, rng, neg_entropy=True)
    raise ValueError("unknown Dream alg %r" % alg)


def _near_int(v):
    return abs(v - round(v)) < 1e-6 and abs(v - round(v)) > 0


def generate_dream_global(model, prompt, gen_length, steps, threshold=None, alg="entropy", eps=1e-3,
                          temperature=0.0, top_p=None, top_k=None, alg_temp=None, seed=0):
    mask = model.mask_id
    P = len(prompt)
    x = np.array(list(prompt) + [mask] * gen_length, dtype=np.int64)
    rng = np.random.default_rng(seed)
    C = Counter(model)
    trace = []
    warnings = []
    ts = np.linspace(1.0, eps, steps + 1)
    if threshold is not None:
        n_mask = int((x == mask).sum())
        assert n_mask % steps == 0, "#mask must be divisible by steps (Fast-dLLM global threshold)"
        q = n_mask // steps
        carry = 0
        i = 0
        while i < steps:
            if i > 4 * gen_length + 8 * steps:
                raise RuntimeError("no progress in Dream global threshold (argmax is the mask id?)")
            raw, _ = C.full(x)
            lg = shift(raw)
            cand = np.nonzero(x == mask)[0]
            conf, x0 = _dream_sample_tokens(lg[cand], temperature, top_p, top_k, rng)
            k = q + carry
            carry = 0
            rev = []
            margin = float("inf")
            if k > 0 and len(cand):
                k = min(k, len(cand))
                order = topk_desc(conf, k)
                keep = [order[0]]
                for r in range(1, k):
                    if conf[order[r]] < threshold:
                        carry += 1
                        if i >= steps - 1:
                            q = 0
                            steps += 1
                    else:
                        keep.append(order[r])
                    margin = min(margin, abs(conf[order[r]] - threshold))
                allo = topk_desc(conf, len(cand))
                if len(cand) > k:
                    margin = min(margin, float(conf[allo[k - 1]] - conf[allo[k]]))
                for ci in keep:
                    x[cand[ci]] = x0[ci]
                    rev.append([int(cand[ci]), int(x0[ci]), float(conf[ci])])
            trace.append(dict(nfe=C.nfe, kind="full", block=0, revealed=rev, margin=margin,
                              argmax_gap=_argmax_gap(lg[[r[0] for r in rev]]) if rev else float("inf")))
            i += 1
        return dict(tokens=x[P:].tolist(), nfe=C.nfe, trace=trace, canvas=x.tolist(), warnings=warnings)

    for i in range(steps):
        raw, _ = C.full(x)
        lg = shift(raw)
        cand = np.nonzero(x == mask)[0]
        t, s = ts[i], ts[i + 1]
        rev = []
        margin = float("inf")
        if alg == "origin":
            p_tr = 1.0 - s / t if i < steps - 1 else 1.0
            sel = rng.random(len(cand)) < p_tr
            if sel.any():
                _, x0 = _dream_sample_tokens(lg[cand[sel]], temperature, top_p, top_k, rng)
                for pos, tok in zip(cand[sel], x0):
                    x[pos] = tok
                    rev.append([int(pos), int(tok), None])
        else:
            conf, x0 = _dream_conf(lg[cand], alg, temperature, top_p, top_k, rng)
            nm = float(len(cand))
            kf = nm * (1.0 - s / t)
            if i < steps - 1 and _near_int(kf):
                warnings.append("step %d: k=|M|*(1-s/t)=%r is within 1e-6 of an integer" % (i, kf))
            k = int(kf) if i < steps - 1 else int(nm)
            if k > 0:
                if alg_temp is None or alg_temp == 0:
                    chosen, margin = _select(conf, cand, "quota", k=k)
                else:
                    w = softmax64(conf / alg_temp)
                    chosen = list(rng.choice(len(cand), size=k, replace=False, p=w))
                for ci in chosen:
                    x[cand[ci]] = x0[ci]
                    rev.append([int(cand[ci]), int(x0[ci]), float(conf[ci])])
        trace.append(dict(nfe=C.nfe, kind="full", block=0, revealed=rev, margin=margin,
                          argmax_gap=_argmax_gap(lg[[r[0] for r in rev]]) if rev else float("inf")))
    return dict(tokens=x[P:].tolist(), nfe=C.nfe, trace=trace, canvas=x.tolist(), warnings=warnings)


def generate_dream_block(model, prompt, gen_length, block_length, steps, cache="prefix", threshold=None,
                         factor=None, alg="entropy", eps=1e-3, temperature=0.0, top_p=None, top_k=None,
                         alg_temp=None, seed=0, kv_quant=None):
    kv_quant = _hook(kv_quant)
    mask = model.mask_id
    P = len(prompt)
    L = P + gen_length
    assert gen_length % block_length == 0
    nb = gen_length // block_length
    assert steps % nb == 0
    spb = steps // nb
    ts = np.linspace(1.0, eps, spb + 1)
    x = np.array(list(prompt) + [mask] * gen_length, dtype=np.int64)
    rng = np.random.default_rng(seed)
    C = Counter(model, prerope=kv_quant is not None)
    trace = []
    warnings = []
    for b in range(nb):
        s = P + b * block_length
        e = s + block_length
        raw, kv = C.full(x)
        lg = shift(raw)
        _, x0 = _dream_sample_tokens(lg[s:s + 1], temperature, top_p, top_k, rng)
        x[s] = x0[0]
        p0 = softmax64(lg[s:s + 1])[0]
        trace.append(dict(nfe=C.nfe, kind="refresh", block=b, revealed=[[s, int(x0[0]), float(p0.max())]],
                          margin=float("inf"), argmax_gap=_argmax_gap(lg[s:s + 1])))
        if cache == "prefix":
            past = build_past(model, kv, s, kv_quant)
        elif cache == "dual":
            past = build_past(model, kv, L, kv_quant)
        else:
            raise ValueError("Dream block mode needs cache prefix or dual")
        i = 1
        n_fwd = 0
        while True:  # do-while, as upstream
            n_fwd += 1
            if n_fwd > 4 * block_length + 8:
                raise RuntimeError("no progress in Dream block mode (argmax is the mask id?)")
            if cache == "prefix":
                lgw = shift(C.cached(x[s:], np.arange(s, L), past))
            else:
                lgw = shift(C.cached(x[s:e], np.arange(s, e), past))
            cand = [p for p in range(s, e) if x[p] == mask]
            rows = lgw[[p - s for p in cand]] if cand else lgw[:0]
            rev = []
            margin = float("inf")
            if threshold is not None or factor is not None:
                if cand:
                    conf, x0 = _dream_sample_tokens(rows, temperature, top_p, top_k, rng)
                    if threshold is not None:
                        chosen, margin = _select(conf, cand, "threshold", tau=threshold)
                    else:
                        chosen, margin = _select(conf, cand, "factor", factor=factor)
                    for ci in chosen:
                        x[cand[ci]] = x0[ci]
                        rev.append([cand[ci], int(x0[ci]), float(conf[ci])])
            else:
                if i == spb:
                    trace.append(dict(nfe=C.nfe, kind=cache + "-break", block=b, revealed=[],
                                      margin=float("inf")))
                    break
                t, s_ = ts[i], ts[i + 1]
                m = float(len(cand))
                kf = m * (1.0 - s_ / t)
                if i < spb - 1 and _near_int(kf):
                    warnings.append("block %d step %d: k=%r within 1e-6 of an integer" % (b, i, kf))
                k = int(kf) if i < spb - 1 else int(m)
                if cand:
                    # UPSTREAM: neg-entropy whatever alg is (generation_utils_block.py)
                    conf, x0 = _dream_sample_tokens(rows, temperature, top_p, top_k, rng, neg_entropy=True)
                    if k > 0:
                        if alg_temp is None or alg_temp == 0:
                            chosen, margin = _select(conf, cand, "quota", k=k)
                        else:
                            w = softmax64(conf / alg_temp)
                            chosen = list(rng.choice(len(cand), size=k, replace=False, p=w))
                        for ci in chosen:
                            x[cand[ci]] = x0[ci]
                            rev.append([cand[ci], int(x0[ci]), float(conf[ci])])
                i += 1
            gap = _argmax_gap(lgw[[r[0] - s for r in rev]]) if rev else float("inf")
            trace.append(dict(nfe=C.nfe, kind=cache, block=b, revealed=rev, margin=margin, argmax_gap=gap))
            if not (x[s:e] == mask).any():
                break
    return dict(tokens=x[P:].tolist(), nfe=C.nfe, trace=trace, canvas=x.tolist(), warnings=warnings)


# ------------------------------------------------------------------------------ dispatcher
def generate(model, prompt, gen_length, block_length, steps, cache="none", threshold=None, factor=None,
             alg=None, temperature=0.0, cfg_scale=0.0, logits_eos_inf=False, confidence_eos_eot_inf=False,
             eot_id=None, eps=1e-3, top_p=None, top_k=None, alg_temp=None, seed=0, kv_quant=None,
             teacher=None, teacher_rank="reference"):
    """kv_quant: None (exact cache), a ref_kvquant.KVFakeQuant / callable hook, or a spec dict
    for ref_kvquant.KVFakeQuant (e.g. dict(method="kivi", bits=2, group=32)); applied to the
    cache rows of every block-start refresh (cache prefix/dual only; ignored without a cache)."""
    if isinstance(model, str):
        model = rf.load_model(model)
    if threshold is not None and factor is not None:
        raise ValueError("threshold and factor are exclusive")
    if eot_id is None:
        eot_id = getattr(model, "eot_id", None)
    if model.arch == "llada":
        remasking = alg or "low_confidence"
        return generate_llada(model, prompt, gen_length, block_length, steps, cache=cache, threshold=threshold,
                              factor=factor, remasking=remasking, temperature=temperature, cfg_scale=cfg_scale,
                              logits_eos_inf=logits_eos_inf, confidence_eos_eot_inf=confidence_eos_eot_inf,
                              eot_id=eot_id, seed=seed, kv_quant=kv_quant, teacher=teacher,
                              teacher_rank=teacher_rank)
    if teacher is not None:
        raise ValueError("teacher forcing is implemented for LLaDA in this reference")
    alg = alg or "entropy"
    if cache == "none":
        if factor is not None:
            raise ValueError("factor is not defined for Dream without cache")
        return generate_dream_global(model, prompt, gen_length, steps, threshold=threshold, alg=alg, eps=eps,
                                     temperature=temperature, top_p=top_p, top_k=top_k, alg_temp=alg_temp,
                                     seed=seed)
    return generate_dream_block(model, prompt, gen_length, block_length, steps, cache=cache, threshold=threshold,
                                factor=factor, alg=alg, eps=eps, temperature=temperature, top_p=top_p,
                                top_k=top_k, alg_temp=alg_temp, seed=seed, kv_quant=kv_quant)


def main(argv=None):
    ap = argparse.ArgumentParser(description="numpy reference of dllmq generate (prints JSON)")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--prompt-ids", required=True)
    ap.add_argument("--gen-length", type=int, required=True)
    ap.add_argument("--block-length", type=int)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--threshold", type=float)
    ap.add_argument("--factor", type=float)
    ap.add_argument("--cache", default="none", choices=["none", "prefix", "dual"])
    ap.add_argument("--alg")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--cfg-scale", type=float, default=0.0)
    ap.add_argument("--eps", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--logits-eos-inf", action="store_true")
    ap.add_argument("--confidence-eos-eot-inf", action="store_true")
    ap.add_argument("--top-p", type=float)
    ap.add_argument("--top-k", type=int)
    ap.add_argument("--alg-temp", type=float)
    ap.add_argument("--trace", action="store_true", help="include the per-forward trace")
    ap.add_argument("--kv", default="fp32", choices=["fp32", "fp16", "bf16", "kivi", "dllm-kvq", "kvquant"],
                    help="fake-quantize the cache rows of each refresh (tools/ref_kvquant.py)")
    ap.add_argument("--kv-bits", type=int, help="K and V bits (kivi/dllm-kvq; default 2)")
    ap.add_argument("--kv-group", type=int, default=32)
    ap.add_argument("--kv-channels", help="dllm-kvq fp16 K channels L:H:C,...")
    ap.add_argument("--calib", help="kvquant calibration artifact (.safetensors)")
    a = ap.parse_args(argv)
    prompt = [int(t) for t in a.prompt_ids.split(",") if t.strip()]
    kvq = None
    if a.kv != "fp32":
        kvq = dict(method=a.kv, bits=a.kv_bits, group=a.kv_group, channels=a.kv_channels, calib=a.calib)
    r = generate(a.model, prompt, a.gen_length, a.block_length or a.gen_length, a.steps, cache=a.cache,
                 threshold=a.threshold, factor=a.factor, alg=a.alg, temperature=a.temperature,
                 cfg_scale=a.cfg_scale, eps=a.eps, seed=a.seed, logits_eos_inf=a.logits_eos_inf,
                 confidence_eos_eot_inf=a.confidence_eos_eot_inf,
                 top_p=a.top_p if a.top_p is not None and a.top_p < 1 else None,
                 top_k=a.top_k if a.top_k else None, alg_temp=a.alg_temp, kv_quant=kvq)
    out = {"tokens": r["tokens"], "nfe": r["nfe"]}
    if a.trace:
        out["trace"] = r["trace"]
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
