#!/usr/bin/python3
"""Observer-level tests of calibration: the states `dllmq calibrate` records (--dump-states) and
the trajectory statistics it reports (--stats), held against the float64 numpy reference
(tools/ref_forward.py), on tiny random LLaDA and Dream checkpoints.

    test_calib_states.py [--dllmq build/dllmq] [--workdir DIR]

States (every forward, layer, row read and active query of the dump, replayed in numpy):
  - TRACE with --cache none: every forward is a full forward over the current canvas, and the
    recorded K (pre-RoPE), V and queries equal a full recompute of that canvas;
  - TRACE with prefix / dual caches: the cached rows recorded are the rows the store holds (the
    numpy forward of the block's refresh canvas), not a recompute; the fresh rows and queries
    equal the numpy cached forward (tools/ref_forward.py's `past`) over exactly those rows;
  - `ar` (dllm-kvq: one full forward, then dual steps over the rows as held; kvquant: one full
    forward over prompt + answer): every state equals one full forward of the revealed canvas;
  - region labels (prompt / decoded prefix / active block / masked suffix) and --stats equal the
    per-region minima and maxima numpy computes from the reference rows.
dLLM-KVQ's channel scores (unweighted and --score-weight attention) equal a numpy computation
from the dumped states (ref_kvquant.kivi_k for the low-bit error).
Reveal steps, as the calibrator's own run records them (LLaDA): only masked positions of the
active block, blocks in order, the quota counts of get_num_transfer_tokens or the threshold rule
(all >= tau, at least one), the positions chosen by the reference token's probability computed
in numpy from that step's forward, and a final canvas equal to the answer padded with EOS.
TRACE vs ar statistics (per-layer K/V range differences are printed): they differ measurably
under the dual cache; where the cache is exact they coincide: at layer 0 a row depends on its
token only, so every cached row equals the recompute and TRACE's prompt / decoded-prefix ranges
equal ar's over the same positions exactly; with a logit-independent (random) reveal order, the
dual-cache and no-cache runs follow one trajectory and their layer-0 statistics are identical
in every region, while deeper layers differ. Last line "N passed, N failed".
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny_checkpoint as mk  # noqa: E402
import ref_decode as rd  # noqa: E402
import ref_forward as rf  # noqa: E402
import ref_kvquant as rk  # noqa: E402
import safetensors_np as st  # noqa: E402
from results import Results  # noqa: E402

GEN, BL, PROMPT_LEN, N_PAIRS = 24, 8, 7, 3
TOL = 2e-4     # relative L2 error of float32 states against float64 (~1e-6 seen)
P_TOL = 1e-6   # probability slack when checking the reveal choices
REGIONS = ["prompt", "decoded_prefix", "active_block", "masked_suffix"]
KV_GROUP = 8   # dllm-kvq's KIVI group: canvases of 31 positions hold 3 complete groups


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def region_of(pos, P, active):
    if pos < P:
        return 0
    if active[1] <= active[0] or pos < active[0]:
        return 1
    return 2 if pos < active[1] else 3


class Dump:
    """A --dump-states file grouped per pair: pair record, forwards (with rows/queries per layer)
    and the step that followed each forward."""

    def __init__(self, path):
        self.pairs = []
        for line in open(path):
            r = json.loads(line)
            k = r["kind"]
            if k == "pair":
                self.pairs.append(dict(r, forwards=[]))
            elif k == "forward":
                self.pairs[-1]["forwards"].append(dict(r, rows={}, queries={}, step=None))
            elif k == "rows":
                self.pairs[-1]["forwards"][-1]["rows"][r["layer"]] = r
            elif k == "queries":
                self.pairs[-1]["forwards"][-1]["queries"][r["layer"]] = r
            elif k == "step":
                self.pairs[-1]["forwards"][-1]["step"] = r


def replay(model, dump, res, name, sched=None, check_states=True, answers=None):
    """Replays every forward of the dump in numpy; checks states (and reveal steps when `sched`;
    the targets against `answers` padded with EOS). Returns the reference rows read (pair,
    forward, layer, pos, region, k_pre, v) and the largest cached-vs-recompute differences at
    layer 0 and deeper."""
    L, mask, N_layers = model.n_layers, model.mask_id, model.n_layers
    worst = {"cached": 0.0, "fresh": 0.0, "q": 0.0}
    bad = []
    stale_l0, stale_deep = 0.0, 0.0   # cached rows vs recompute: layer 0 and deeper layers
    ref_rows = []                     # (pair, forward, layer, pos, region, k_pre, v) as numpy says
    ar_full = 0.0                     # ar: every state against one full forward
    for pr in dump.pairs:
        prompt, target = pr["prompt"], pr["target"]
        P, N = len(prompt), pr["canvas_length"]
        ar = pr["trajectory"] == "ar"
        if answers is not None:
            ans = answers[pr["pair"]]
            want_t = (ans + [model.eos_id] * GEN)[:GEN] if N == P + GEN else ans
            if target != want_t:
                bad.append("pair %d: target is not the answer padded with EOS" % pr["pair"])
        canvas = list(prompt) + (list(target) if ar else [mask] * (N - P))
        if ar:
            _, kv_one, q_one = model.forward(canvas, return_kv=True, return_k_prerope=True, return_q=True)
        held = None  # per layer: (K post-RoPE, V, K pre-RoPE) [N, KV, hd], as the store holds them
        block_steps = {}
        last_block = -1
        for f in pr["forwards"]:
            pos0, ids = f["pos0"], f["ids"]
            n = len(ids)
            if ids != canvas[pos0:pos0 + n]:
                bad.append("pair %d forward %d: ids differ from the canvas" % (pr["pair"], f["forward"]))
                break
            positions = np.arange(pos0, pos0 + n)
            cached_pos = np.array([p for a, b in f["cached"] for p in range(a, b)], dtype=np.int64)
            past = None
            if len(cached_pos):
                past = [(held[l][0][cached_pos], held[l][1][cached_pos], cached_pos) for l in range(L)]
            logits, kv, qs = model.forward(ids, positions, past=past, return_kv=True, return_k_prerope=True,
                                           return_q=True)
            # The same canvas recomputed in full: what an exact cache would hand out.
            if len(cached_pos) and check_states:
                _, kv_full = model.forward(canvas, return_kv=True, return_k_prerope=True)
                for l in range(L):
                    d = rel(held[l][2][cached_pos], kv_full[l][2][cached_pos])
                    if l == 0:
                        stale_l0 = max(stale_l0, d)
                    else:
                        stale_deep = max(stale_deep, d)
            for l in range(L):
                rows = f["rows"].get(l)
                want_pos = list(cached_pos) + list(positions)
                want_fresh = [0] * len(cached_pos) + [1] * n
                if rows is None or rows["pos"] != want_pos or rows["fresh"] != want_fresh:
                    bad.append("pair %d forward %d layer %d: rows read %s, want %s" % (
                        pr["pair"], f["forward"], l, None if rows is None else rows["pos"][:40], want_pos[:40]))
                    continue
                want_reg = [region_of(p, P, f["active"]) for p in want_pos]
                if rows["region"] != want_reg:
                    bad.append("pair %d forward %d layer %d: regions" % (pr["pair"], f["forward"], l))
                k_pre_fresh = kv[l][2].reshape(n, -1)
                v_fresh = kv[l][1].reshape(n, -1)
                got_k, got_v = np.array(rows["k"]), np.array(rows["v"])
                nc = len(cached_pos)
                if nc:
                    want_kc = held[l][2][cached_pos].reshape(nc, -1)
                    want_vc = held[l][1][cached_pos].reshape(nc, -1)
                    worst["cached"] = max(worst["cached"], rel(got_k[:nc], want_kc), rel(got_v[:nc], want_vc))
                worst["fresh"] = max(worst["fresh"], rel(got_k[nc:], k_pre_fresh), rel(got_v[nc:], v_fresh))
                if ar:
                    ar_full = max(ar_full, rel(got_k, kv_one[l][2][want_pos].reshape(len(want_pos), -1)),
                                  rel(got_v, kv_one[l][1][want_pos].reshape(len(want_pos), -1)))
                for i, p in enumerate(want_pos):
                    # copies: `held` is rewritten in place by later refreshes
                    k_ref = (held[l][2][p] if i < nc else kv[l][2][i - nc]).reshape(-1).copy()
                    v_ref = (held[l][1][p] if i < nc else kv[l][1][i - nc]).reshape(-1).copy()
                    ref_rows.append((pr["pair"], f["forward"], l, p, want_reg[i], k_ref, v_ref))
                a0, a1 = max(f["active"][0], pos0), min(f["active"][1], pos0 + n)
                q = f["queries"].get(l)
                if a1 > a0:
                    if q is None or q["pos"] != list(range(a0, a1)):
                        bad.append("pair %d forward %d layer %d: queries" % (pr["pair"], f["forward"], l))
                    else:
                        worst["q"] = max(worst["q"], rel(np.array(q["q"]), qs[l][a0 - pos0:a1 - pos0].reshape(a1 - a0, -1)))
                        if ar:
                            ar_full = max(ar_full, rel(np.array(q["q"]), q_one[l][a0:a1].reshape(a1 - a0, -1)))
            w0, w1 = f["write"]
            if w1 > w0:
                if held is None:
                    held = [(np.zeros((N,) + kv[l][0].shape[1:]), np.zeros((N,) + kv[l][1].shape[1:]),
                             np.zeros((N,) + kv[l][2].shape[1:])) for l in range(L)]
                for l in range(L):
                    for t in range(3):
                        held[l][t][w0:w1] = kv[l][t][w0 - pos0:w1 - pos0]
            st = f["step"]
            if st is not None:
                b = st["block"]
                s, e = P + b * BL, P + (b + 1) * BL
                if b < last_block:
                    bad.append("step %d: block %d after %d" % (st["step"], b, last_block))
                last_block = b
                if model.arch == "llada" and list(f["active"]) != [s, e]:  # Dream's refresh decodes s only
                    bad.append("step %d: forward's active %s is not block %d" % (st["step"], f["active"], b))
                cand = [p for p in range(s, e) if canvas[p] == mask]
                rev = sorted(st["revealed"])
                if not set(rev) <= set(cand) or len(set(rev)) != len(rev):
                    bad.append("step %d: revealed %s outside the masked block positions %s" % (st["step"], rev, cand))
                if sched is not None and model.arch == "llada" and cand:
                    pref = {p: rd.softmax64(logits[p - pos0])[target[p - P]] for p in cand}
                    chosen, rest = [pref[p] for p in rev], [pref[p] for p in cand if p not in rev]
                    j = block_steps.get(b, 0)
                    if sched.get("threshold") is None:
                        quota = rd.num_transfer_tokens(BL, sched["steps"] // (GEN // BL))
                        if len(rev) != quota[j]:
                            bad.append("step %d: %d revealed, quota %d" % (st["step"], len(rev), quota[j]))
                    else:
                        tau = sched["threshold"]
                        top = max(pref.values())
                        if not rev or any(x >= tau + P_TOL for x in rest) or \
                                any(x < tau - P_TOL and abs(x - top) > P_TOL for x in chosen):
                            bad.append("step %d: threshold rule broken (%s vs %s)" % (st["step"], chosen, rest))
                    if chosen and rest and min(chosen) < max(rest) - P_TOL:
                        bad.append("step %d: a lower reference probability was revealed first" % st["step"])
                block_steps[b] = block_steps.get(b, 0) + 1
                for p in rev:
                    canvas[p] = target[p - P]
                if st["canvas"] != canvas:
                    bad.append("step %d: canvas after the step differs" % st["step"])
        if not ar and pr["forwards"] and pr["forwards"][0]["step"] is not None:
            if canvas[P:] != list(target):
                bad.append("pair %d: final canvas differs from the target" % pr["pair"])
            if sched is not None and sched.get("threshold") is None:
                if sorted(block_steps.values()) != [sched["steps"] // (GEN // BL)] * (GEN // BL):
                    bad.append("pair %d: steps per block %s" % (pr["pair"], block_steps))
    ok = not bad and max(worst.values()) < TOL
    res.check(name + "/states", ok, "worst rel err cached %.1e fresh %.1e queries %.1e%s" % (
        worst["cached"], worst["fresh"], worst["q"], ("; " + "; ".join(bad[:3])) if bad else ""))
    if any(p["trajectory"] == "ar" for p in dump.pairs):
        res.check(name + "/equals-one-full-forward", ar_full < TOL,
                  "every row and query vs the full forward of the revealed canvas: %.1e" % ar_full)
    return ref_rows, stale_l0, stale_deep


def ref_scores(model, dump, bits, G, weighted):
    """dLLM-KVQ's attention-level channel score (METHODS §4.1) in numpy from the dumped states:
    e = K - KIVI(K) (post-RoPE, ref_kvquant.kivi_k over the rows each refresh wrote); at every
    cached forward, t = (q_c e_c)^2 for each active query, query head and cached row of its KV
    head. Unweighted: the mean of t over (query, head, cached row). Weighted: per (query, head)
    the sum over cached rows of a * t, a the softmax of q.k / sqrt(hd) over every row read,
    averaged over (query, head)."""
    L, KV, hd, H = model.n_layers, model.n_kv, model.hd, model.n_heads
    rep = H // KV
    sums, cnt = np.zeros((L, KV * hd)), np.zeros(L)
    for pr in dump.pairs:
        N = pr["canvas_length"]
        err = [np.zeros((N, KV, hd)) for _ in range(L)]
        for f in pr["forwards"]:
            for l in range(L):
                rows = f["rows"][l]
                pos = np.array(rows["pos"])
                k_post = model.rope(np.array(rows["k"], np.float32).reshape(-1, KV, hd).astype(np.float64), pos)
                w0, w1 = f["write"]
                if w1 > w0:  # a refresh writes [0, W): the low-bit store re-quantizes those rows
                    sel = [i for i, p in enumerate(pos) if w0 <= p < w1]
                    kw = k_post[sel].astype(np.float32)
                    err[l][w0:w1] = kw.astype(np.float64) - rk.kivi_k(kw, bits, G)
                nc = sum(b - a for a, b in f["cached"])
                q = f["queries"].get(l)
                if not nc or q is None:
                    continue
                qs = np.array(q["q"], np.float64).reshape(-1, H, hd)
                cpos = pos[:nc]
                for h in range(H):
                    g = h // rep
                    e = err[l][cpos, g]                           # [nc, hd]
                    t = (qs[:, h, None, :] * e[None]) ** 2         # [nq, nc, hd]
                    if weighted:
                        logit = qs[:, h] @ k_post[:, g].T / np.sqrt(hd)  # [nq, rows read]
                        a = np.exp(logit - logit.max(1, keepdims=True))
                        a /= a.sum(1, keepdims=True)
                        sums[l, g * hd:(g + 1) * hd] += (a[:, :nc, None] * t).sum((0, 1))
                    else:
                        sums[l, g * hd:(g + 1) * hd] += t.sum((0, 1))
                cnt[l] += len(qs) * rep * (1 if weighted else nc)
    return sums / np.maximum(cnt, 1)[:, None]


def check_scores(model, dump_path, art_path, weighted, res, name):
    t, _ = st.read_safetensors(art_path)
    got = np.array([np.asarray(t["layers.%d.k_channel_scores" % l], np.float64).reshape(-1)
                    for l in range(model.n_layers)])
    want = ref_scores(model, Dump(dump_path), 2, KV_GROUP, weighted)
    err = max(rel(got[l], want[l]) for l in range(model.n_layers))
    same_top = all(list(np.argsort(-got[l], kind="stable")[:4]) == list(np.argsort(-want[l], kind="stable")[:4])
                   for l in range(model.n_layers))
    res.check(name + "/channel-scores-equal-numpy", err < 1e-3 and same_top and want.max() > 0,
              "relative L2 per layer up to %.1e" % err)


def stats_from_rows(rows, n_layers):
    """Per layer and region: rows, per-channel min/max of K and V (numpy, from reference rows)."""
    out = [{r: None for r in REGIONS} for _ in range(n_layers)]
    acc = {}
    for _, _, l, _, reg, k, v in rows:
        acc.setdefault((l, reg), []).append((k, v))
    for (l, reg), kv in acc.items():
        K = np.array([x[0] for x in kv])
        V = np.array([x[1] for x in kv])
        out[l][REGIONS[reg]] = dict(rows=len(kv), k_min=K.min(0), k_max=K.max(0), v_min=V.min(0), v_max=V.max(0))
    return out


def check_stats_file(path, rows, n_layers, res, name):
    got = json.load(open(path))["layers"]
    want = stats_from_rows(rows, n_layers)
    worst, bad = 0.0, []
    for l in range(n_layers):
        for r in REGIONS:
            g, w = got[l]["regions"][r], want[l][r]
            if w is None:
                if g["rows"] != 0 or g["k_min"] is not None:
                    bad.append("layer %d %s: rows %d, want none" % (l, r, g["rows"]))
                continue
            if g["rows"] != w["rows"]:
                bad.append("layer %d %s: rows %d, want %d" % (l, r, g["rows"], w["rows"]))
                continue
            for key in ("k_min", "k_max", "v_min", "v_max"):
                worst = max(worst, rel(g[key], w[key]))
    res.check(name + "/stats-file", not bad and worst < TOL, "worst rel err %.1e %s" % (worst, "; ".join(bad[:3])))


def pooled(stats_layer, regions=REGIONS):
    """Per-channel K and V ranges (max - min) over the given regions of one --stats layer."""
    rs = [stats_layer["regions"][r] for r in regions if stats_layer["regions"][r]["rows"]]
    kmin = np.min([r["k_min"] for r in rs], 0)
    kmax = np.max([r["k_max"] for r in rs], 0)
    vmin = np.min([r["v_min"] for r in rs], 0)
    vmax = np.max([r["v_max"] for r in rs], 0)
    return kmax - kmin, vmax - vmin, (kmin, kmax, vmin, vmax)


def range_diff(a_layer, b_layer, regions=REGIONS):
    """Mean over channels of |range_a - range_b| / range_b (K, V); 0 where both ranges are 0
    (a region of one token kind, e.g. all-mask rows at layer 0)."""
    ka, va, _ = pooled(a_layer, regions)
    kb, vb, _ = pooled(b_layer, regions)

    def d(x, y):
        return float(np.mean(np.where(y > 0, np.abs(x - y) / np.where(y > 0, y, 1), np.abs(x - y))))
    return d(ka, kb), d(va, vb)


class Runner:
    def __init__(self, dllmq, work, model_dir, pairs):
        self.dllmq, self.work, self.model_dir, self.pairs = dllmq, work, model_dir, pairs

    def calibrate(self, tag, *args, pairs=None):
        dump = os.path.join(self.work, tag + ".states.jsonl")
        stats = os.path.join(self.work, tag + ".stats.json")
        out = os.path.join(self.work, tag + ".safetensors")
        cmd = [self.dllmq, "calibrate", "-m", self.model_dir, "--data", pairs or self.pairs,
               "--gen-length", str(GEN), "--block-length", str(BL), "--threads", "1",
               "--dump-states", dump, "--stats", stats, "--out", out] + list(args)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError("calibrate %s: %s" % (tag, r.stderr.strip()[-500:]))
        self.last_out = out
        return dump, stats


def make_pairs(model, path_short, path_padded, seed):
    """Prompts with the model's own greedy answer, every fourth token changed (so ranking by the
    reference token differs from ranking by confidence), cut 5 short: EOS padding is exercised.
    The second file holds the same answers padded with EOS to GEN (for ar over the same canvas)."""
    rows_s, rows_p = [], []
    for i in range(N_PAIRS):
        prompt = [int(t) for t in np.random.default_rng(seed + i).integers(0, model.mask_id, PROMPT_LEN)]
        g = rd.generate(model, prompt, GEN, GEN, GEN, cache="none")["tokens"][:GEN - 5]
        ans = [(x + 1) % model.mask_id if j % 4 == 3 else x for j, x in enumerate(g)]
        rows_s.append({"prompt_ids": prompt, "answer_ids": ans})
        rows_p.append({"prompt_ids": prompt, "answer_ids": ans + [model.eos_id] * 5})
    for path, rows in ((path_short, rows_s), (path_padded, rows_p)):
        with open(path, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


def run_arch(arch, a, res, work):
    d = os.path.join(work, arch)
    kw = dict(seed=21, w_std=0.2, lm_head_std=0.8, emb_std=0.3, zero_mask_logit=True)
    mk.make_checkpoint(arch, d, **kw)
    model = rf.RefModel(d)
    short, padded = os.path.join(work, arch + "-pairs.jsonl"), os.path.join(work, arch + "-pairs-padded.jsonl")
    make_pairs(model, short, padded, 700)
    run = Runner(a.dllmq, work, d, short)
    answers = [json.loads(l)["answer_ids"] for l in open(short)]
    L = model.n_layers
    quota = {"steps": GEN // 2}
    thr = {"steps": GEN, "threshold": 0.5}

    def sched_args(s):
        return ["--steps", str(s["steps"])] + (["--threshold", str(s["threshold"])] if "threshold" in s else [])

    llada = arch == "llada"
    cases = [("trace-none-quota", "kvquant", "trace", "none", quota, [])] if llada else []
    dk = ["--kv-group", str(KV_GROUP)]
    cases += [("trace-prefix-thr", "kvquant", "trace", "prefix", thr, []),
              ("trace-dual-quota", "kvquant", "trace", "dual", quota, []),
              ("trace-dual-thr-dllmkvq", "dllm-kvq", "trace", "dual", thr, dk),
              ("trace-prefix-quota-dllmkvq-attn", "dllm-kvq", "trace", "prefix", quota,
               dk + ["--score-weight", "attention"]),
              ("trace-dual-thr-dllmkvq-attn", "dllm-kvq", "trace", "dual", thr, dk + ["--score-weight", "attention"]),
              ("ar-dllmkvq", "dllm-kvq", "ar", "dual", quota, dk)]
    stale = {}
    for tag, method, traj, cache, sched, extra in cases:
        name = "%s/%s" % (arch, tag)
        try:
            dump, stats = run.calibrate(name.replace("/", "-"), "--method", method, "--trajectory", traj,
                                        "--cache", cache, "--kv-bits", "2", *sched_args(sched), *extra)
            if method == "dllm-kvq":
                check_scores(model, dump, run.last_out, "--score-weight" in extra, res, name)
            rows, s0, sd = replay(model, Dump(dump), res, name, sched=sched if traj != "ar" else None,
                                  answers=answers)
            check_stats_file(stats, rows, L, res, name)
            stale[tag] = (s0, sd)
        except Exception as e:  # noqa: BLE001
            res.check(name, False, repr(e))
    # kvquant ar: one full forward over prompt + answer (as given, unpadded)
    name = arch + "/ar-kvquant"
    try:
        dump, stats = run.calibrate(name.replace("/", "-"), "--method", "kvquant", "--trajectory", "ar", "--kv-bits", "2")
        dd = Dump(dump)
        one = all(len(p["forwards"]) == 1 and p["forwards"][0]["pos0"] == 0 and
                  p["canvas_length"] == len(p["prompt"]) + GEN - 5 for p in dd.pairs)
        res.check(name + "/one-full-forward", one)
        rows, _, _ = replay(model, dd, res, name, answers=answers)
        check_stats_file(stats, rows, L, res, name)
    except Exception as e:  # noqa: BLE001
        res.check(name, False, repr(e))
    # The cache is exact at layer 0 (a row depends on its token only) and stale deeper.
    for tag in ("trace-prefix-thr", "trace-dual-quota"):
        if tag in stale:
            s0, sd = stale[tag]
            res.check("%s/%s/cached-rows-exact-at-layer-0-stale-deeper" % (arch, tag), s0 < TOL and sd > 1e-3,
                      "cached vs recompute: layer 0 %.1e, deeper layers up to %.2e" % (s0, sd))

    # ---- TRACE vs ar statistics --------------------------------------------------------------
    try:
        run_p = Runner(a.dllmq, work, d, padded)
        t_dump, t_stats = run_p.calibrate(arch + "-stats-trace-dual", "--method", "kvquant", "--trajectory", "trace",
                                          "--cache", "dual", "--kv-bits", "2", *sched_args(quota))
        a_dump, a_stats = run_p.calibrate(arch + "-stats-ar", "--method", "kvquant", "--trajectory", "ar",
                                          "--kv-bits", "2")
        T, A = json.load(open(t_stats))["layers"], json.load(open(a_stats))["layers"]
        print("  %s TRACE(dual) vs ar, per layer: mean over channels of |range_trace - range_ar| / range_ar" % arch)
        diffs = []
        for l in range(L):
            dk, dv = range_diff(T[l], A[l])
            pk, pv = range_diff(T[l], A[l], ["prompt"])
            diffs.append((dk, dv, pk, pv))
            print("    layer %d: all rows K %.3f V %.3f | prompt rows K %.3f V %.3f" % (l, dk, dv, pk, pv))
        deep = max(max(x[0], x[1]) for x in diffs[1:])
        res.check(arch + "/trace-vs-ar/differ-under-dual", deep > 0.01,
                  "largest per-layer range difference beyond layer 0: %.3f" % deep)
        # Layer 0: TRACE's prompt and decoded-prefix rows equal ar's rows at the same positions.
        ar_rows = {}
        for p in Dump(a_dump).pairs:
            f = p["forwards"][0]
            r = f["rows"][0]
            for pos, k, v in zip(r["pos"], r["k"], r["v"]):
                ar_rows[(p["pair"], pos)] = (np.array(k), np.array(v))
        t_rows = {}
        for p in Dump(t_dump).pairs:
            for f in p["forwards"]:
                r = f["rows"][0]
                for pos, reg, k, v in zip(r["pos"], r["region"], r["k"], r["v"]):
                    if reg in (0, 1):
                        t_rows.setdefault((p["pair"], pos), []).append((np.array(k), np.array(v)))
        worst = max(max(rel(k, ar_rows[key][0]), rel(v, ar_rows[key][1])) for key, lst in t_rows.items() for k, v in lst)
        want = {reg: [ar_rows[key] for key in t_rows if (key[1] < PROMPT_LEN) == (reg == "prompt")]
                for reg in ("prompt", "decoded_prefix")}
        wr = 0.0
        for reg, lst in want.items():
            K, V = np.array([x[0] for x in lst]), np.array([x[1] for x in lst])
            g = T[0]["regions"][reg]
            for got, w in ((g["k_min"], K.min(0)), (g["k_max"], K.max(0)), (g["v_min"], V.min(0)), (g["v_max"], V.max(0))):
                wr = max(wr, rel(got, w))
        res.check(arch + "/trace-vs-ar/coincide-at-layer-0-prompt-and-prefix", worst < 1e-6 and wr < 1e-6,
                  "rows %.1e, region ranges %.1e (%d positions)" % (worst, wr, len(t_rows)))
    except Exception as e:  # noqa: BLE001
        res.check(arch + "/trace-vs-ar", False, repr(e))

    # ---- the cache's own effect: one trajectory with and without the cache -----------------
    if llada:
        try:
            run_p = Runner(a.dllmq, work, d, padded)
            stats, dumps = {}, {}
            for cache in ("none", "dual"):
                dumps[cache], stats[cache] = run_p.calibrate(arch + "-random-" + cache, "--method", "kvquant",
                                                             "--trajectory", "random", "--cache", cache,
                                                             "--kv-bits", "2", "--seed", "5", *sched_args(quota))
            steps = {c: [(f["step"]["revealed"]) for p in Dump(dumps[c]).pairs for f in p["forwards"] if f["step"]]
                     for c in dumps}
            res.check(arch + "/random/same-trajectory-with-and-without-cache", steps["none"] == steps["dual"],
                      "%d steps" % len(steps["none"]))
            N_, D_ = json.load(open(stats["none"]))["layers"], json.load(open(stats["dual"]))["layers"]
            print("  %s random order, dual cache vs no cache (same trajectory), per layer and region:" % arch)
            l0 = 0.0
            deep = 0.0
            for l in range(L):
                parts = []
                for r in REGIONS:
                    dk, dv = range_diff(D_[l], N_[l], [r])
                    parts.append("%s K %.3f V %.3f" % (r, dk, dv))
                    if l == 0:
                        for key in ("k_min", "k_max", "v_min", "v_max"):
                            l0 = max(l0, rel(D_[0]["regions"][r][key], N_[0]["regions"][r][key]))
                    elif r != "active_block":
                        deep = max(deep, dk, dv)
                print("    layer %d: %s" % (l, " | ".join(parts)))
            res.check(arch + "/random/cache-exact-at-layer-0-coincide", l0 < 1e-6, "layer 0 worst rel %.1e" % l0)
            res.check(arch + "/random/cache-stale-deeper-differ", deep > 1e-3, "deeper layers up to %.3f" % deep)
        except Exception as e:  # noqa: BLE001
            res.check(arch + "/random", False, repr(e))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--dllmq", default=os.path.join(ROOT, "build", "dllmq"))
    ap.add_argument("--workdir")
    a = ap.parse_args(argv)
    a.dllmq = os.path.abspath(a.dllmq)
    work = a.workdir or tempfile.mkdtemp(prefix="dllmq_calib_states_")
    os.makedirs(work, exist_ok=True)
    res = Results()
    for arch in ("llada", "dream"):
        run_arch(arch, a, res, work)
    print(f"{res.passed} passed, {res.failed} failed")
    return 1 if res.failed else 0


if __name__ == "__main__":
    sys.exit(main())
