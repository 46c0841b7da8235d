#!/usr/bin/python3
"""Fisher weights of `dllmq calibrate` (METHODS.md §2; docs/methods.md "Fisher weights") against an
independent float64 numpy reference (tools/ref_fisher.py), on tiny random LLaDA, Dream (GQA,
q/k/v biases, logits shift) and LLaDA-MoE (QK norm, routed experts top-2 of 4 with router bias,
a shared expert, a dense layer) checkpoints.

    test_fisher.py [--dllmq build/dllmq] [--workdir DIR] [--arch llada|dream|lladamoe ...]

For every calibration below, the state dump (--dump-states) holds each scored forward's loss
terms, its loss value and the gradients d loss / d K (pre-RoPE) and d V of every row it read.
  - loss terms: exactly the masked generated positions whose raw logits row the forward computes
    (the model's logits shift applied), targets the reference ids, weights 1 / (masked generated
    positions), recomputed here from the canvas the dump's forwards show;
  - loss value: equal to the numpy loss of the same forward (cached rows as the store held them);
  - gradients: central finite differences of the numpy loss (float64, h = 1e-4) at sampled
    elements (the largest and random ones, cached and fresh rows, K and V, every layer) equal
    dllmq's backward within 1% of the layer's largest gradient (on LLaDA-MoE the gradient flows
    through the experts and the routing weights; an element whose +h and -h forwards route any
    row differently is a kink of the loss and is replaced by another);
  - Fisher-weighted KVQuant codebooks and thresholds equal numpy's weighted k-means
    (ref_kvquant.kmeans1d with weights g^2 * range^2) over the dumped rows and gradients, and
    differ from the unweighted ones;
  - dLLM-KVQ --score-weight fisher channel scores equal numpy's E_step[sum_rows (g_c e_c)^2]
    (g the post-RoPE K gradient, e = K - KIVI(K) of the rows as held).
Trajectories: TRACE with no cache, prefix and dual caches (quota and threshold schedules), and
`ar` (whose weights come from a masked copy of the pair, dumped as forward -1).
Last line "N passed, N failed".
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
import ref_fisher as rfi  # noqa: E402
import ref_forward as rf  # noqa: E402
import ref_kvquant as rk  # noqa: E402
import safetensors_np as st  # noqa: E402
from results import Results  # noqa: E402

GEN, BL, PROMPT_LEN, N_PAIRS = 16, 8, 6, 2
KV_GROUP = 8
FD_H = 1e-4
FD_TOL = 1e-2      # |dllmq - finite difference| / the layer's largest |gradient|
CB_TOL = 1e-3      # codebook / threshold difference relative to the data range


class Dump:
    """--dump-states grouped per pair: forwards (rows per layer), fisher records and gradients
    keyed by forward index (-1: the ar masked copy), reveal steps."""

    def __init__(self, path):
        self.pairs = []
        for line in open(path):
            r = json.loads(line)
            k = r["kind"]
            if k == "pair":
                self.pairs.append(dict(r, forwards=[], fisher={}, grads={}))
            elif k == "forward":
                self.pairs[-1]["forwards"].append(dict(r, rows={}))
            elif k == "rows":
                self.pairs[-1]["forwards"][-1]["rows"][r["layer"]] = r
            elif k == "fisher":
                self.pairs[-1]["fisher"][r["forward"]] = r
            elif k == "grads":
                self.pairs[-1]["grads"].setdefault(r["forward"], {})[r["layer"]] = r


def canvases(model, pr):
    """The canvas each forward of a pair saw (rows outside a forward as they stood)."""
    P, N = len(pr["prompt"]), pr["canvas_length"]
    canvas = list(pr["prompt"]) + [model.mask_id] * (N - P)
    out = []
    for f in pr["forwards"]:
        canvas[f["pos0"]:f["pos0"] + len(f["ids"])] = f["ids"]
        out.append(list(canvas))
    return out


def cached_rows(model, f, L):
    """Per layer (pos, k_pre, v) of the cached rows a forward read, as the dump recorded them."""
    nc = sum(b - a for a, b in f["cached"])
    if nc == 0:
        return None
    out = []
    for l in range(L):
        r = f["rows"][l]
        out.append((np.array(r["pos"][:nc]), np.array(r["k"][:nc], np.float64),
                    np.array(r["v"][:nc], np.float64)))
    return out


def check_pair_fisher(model, pr, res, name, rng, fd_every, worst):
    """Terms, loss value and finite differences of every scored forward of one pair."""
    L, shift = model.n_layers, (1 if model.shift_logits else 0)
    P = len(pr["prompt"])
    target = pr["target"]
    bad = []
    records = []  # (forward index, ids, pos0, cached, terms, fisher record)
    if -1 in pr["fisher"]:  # ar: the masked copy of prompt + answer
        fr = pr["fisher"][-1]
        want = rfi.diffusion_terms(fr["ids"], P, target, model.mask_id, shift, 0, len(fr["ids"]))
        records.append((-1, fr["ids"], 0, None, want, fr))
    for i, (f, canvas) in enumerate(zip(pr["forwards"], canvases(model, pr))):
        if f["forward"] not in pr["fisher"]:
            continue
        fr = pr["fisher"][f["forward"]]
        want = rfi.diffusion_terms(canvas, P, target, model.mask_id, shift, f["pos0"], len(f["ids"]))
        records.append((f["forward"], f["ids"], f["pos0"], cached_rows(model, f, L), want, fr))
    if pr["trajectory"] != "ar" and len(records) != len(pr["forwards"]):
        bad.append("%d of %d forwards scored" % (len(records), len(pr["forwards"])))
    for j, (fi, ids, pos0, cached, want, fr) in enumerate(records):
        got = [(int(a), int(b), float(w)) for a, b, w in fr["loss"]]
        if [(a, b) for a, b, _ in got] != [(a, b) for a, b, _ in want] or \
                any(abs(w1 - w2) > 1e-12 for (_, _, w1), (_, _, w2) in zip(got, want)):
            bad.append("forward %d: loss terms %s, want %s" % (fi, got[:6], want[:6]))
            continue
        value = rfi.step_loss(model, ids, pos0, cached, want)
        worst["loss"] = max(worst["loss"], abs(value - fr["value"]) / max(abs(value), 1e-12))
        if j % fd_every:
            continue
        for l in range(L):
            g = pr["grads"][fi][l]
            want_pos = ([] if cached is None else list(cached[0][0])) + list(range(pos0, pos0 + len(ids)))
            if g["pos"] != want_pos:
                bad.append("forward %d layer %d: gradient rows %s, want %s" % (fi, l, g["pos"][:20], want_pos[:20]))
                continue
            nc = 0 if cached is None else len(cached[0][0])
            for which in ("k", "v"):
                G = np.array(g["g" + which], np.float64)
                scale = np.abs(G).max()
                if scale == 0:
                    continue
                picks = set(zip(*np.unravel_index(np.argsort(-np.abs(G), axis=None)[:2], G.shape)))
                for lo, hi in ((0, nc), (nc, G.shape[0])):  # a random cached and a random fresh row
                    if hi > lo:
                        picks.add((int(rng.integers(lo, hi)), int(rng.integers(0, G.shape[1]))))
                for r, c in picks:
                    fd = fd_smooth(model, ids, pos0, cached, want, l, want_pos[r], which, int(c), worst)
                    if fd is None:  # a routing kink at this element: another one in the same row
                        fd = fd_smooth(model, ids, pos0, cached, want, l, want_pos[r], which,
                                       int(rng.integers(0, G.shape[1])), worst)
                        if fd is None:
                            continue
                    worst["fd"] = max(worst["fd"], abs(fd - G[r, c]) / scale)
                    worst["n"] += 1
    res.check(name + "/terms-and-rows", not bad, "; ".join(bad[:3]))


def fd_smooth(model, ids, pos0, cached, want, layer, pos, which, channel, worst):
    """rfi.fd_gradient, or None when the +h and -h forwards routed some row to other experts (the
    loss is not differentiable there; counted in worst["kinks"])."""
    if not model.moe_layers:
        return rfi.fd_gradient(model, ids, pos0, cached, want, layer, pos, which, channel, FD_H)
    logs = []
    for h in (FD_H, -FD_H):
        model.route_log = []
        logs.append((rfi.step_loss(model, ids, pos0, cached, want, (layer, pos, which, channel, h)),
                     model.route_log))
    model.route_log = None
    (up, r_up), (dn, r_dn) = logs
    if any(not np.array_equal(a, b) for a, b in zip(r_up, r_dn)):
        worst["kinks"] += 1
        return None
    return (up - dn) / (2 * FD_H)


def weighted_codebooks(model, dump, sink=1, outlier_percent=1.0, bits=2):
    """numpy of the Fisher-weighted KVQuant calibration from the dumped rows and gradients."""
    L, KV, hd = model.n_layers, model.n_kv, model.hd
    K = [[] for _ in range(L)]
    V = [[] for _ in range(L)]
    K2 = [[] for _ in range(L)]
    V2 = [[] for _ in range(L)]
    for pr in dump.pairs:
        for f in pr["forwards"]:
            gi = -1 if pr["trajectory"] == "ar" else f["forward"]
            for l in range(L):
                rows, g = f["rows"][l], pr["grads"][gi][l]
                gpos = {p: i for i, p in enumerate(g["pos"])}
                for i, p in enumerate(rows["pos"]):
                    if p < sink:
                        continue
                    K[l].append(rows["k"][i])
                    V[l].append(rows["v"][i])
                    K2[l].append(np.square(np.float64(g["gk"][gpos[p]])))
                    V2[l].append(np.square(np.float64(g["gv"][gpos[p]])))
    out = []
    for l in range(L):
        Kl, Vl = np.array(K[l], np.float64), np.array(V[l], np.float64)
        K2l, V2l = np.array(K2[l]), np.array(V2[l])
        lo = np.percentile(Kl, outlier_percent / 2.0, axis=0)
        up = np.percentile(Kl, 100.0 - outlier_percent / 2.0, axis=0)
        zp, rg = (up + lo) / 2, (up - lo) / 2
        inl = (Kl >= lo) & (Kl <= up)
        xn = np.where(rg > 0, (Kl - zp) / np.where(rg > 0, rg, 1), 0.0)
        wk = K2l * rg[None, :] ** 2
        # the engine pools channel by channel: order does not change a weighted k-means
        kcb = rk.kmeans1d(xn.T[inl.T], 2 ** bits, weights=wk.T[inl.T])
        x = Vl.reshape(len(Vl), KV, hd)
        w2 = V2l.reshape(len(Vl), KV, hd)
        vlo = np.percentile(x, outlier_percent / 2.0, axis=-1, keepdims=True)
        vup = np.percentile(x, 100.0 - outlier_percent / 2.0, axis=-1, keepdims=True)
        vin = (x >= vlo) & (x <= vup)
        mn = np.where(vin, x, np.inf).min(-1, keepdims=True)
        mx = np.where(vin, x, -np.inf).max(-1, keepdims=True)
        off, vr = (mx + mn) / 2, (mx - mn) / 2
        vxn = np.where(vr > 0, (x - off) / np.where(vr > 0, vr, 1), 0.0)
        vcb = rk.kmeans1d(vxn[vin], 2 ** bits, weights=(w2 * vr ** 2)[vin])
        out.append(dict(k_lower=lo, k_upper=up, k_codebook=kcb, v_codebook=vcb,
                        k_range=float(Kl.max() - Kl.min())))
    return out


def check_codebooks(model, dump, art, art_nof, res, name):
    t, meta = st.read_safetensors(art)
    tn, _ = st.read_safetensors(art_nof)
    want = weighted_codebooks(model, dump)
    worst, moved = 0.0, 0.0
    for l, w in enumerate(want):
        for key, span in (("k_lower", w["k_range"]), ("k_upper", w["k_range"]), ("k_codebook", 2.0),
                          ("v_codebook", 2.0)):
            got = np.asarray(t["layers.%d.%s" % (l, key)], np.float64).reshape(-1)
            worst = max(worst, float(np.abs(got - w[key]).max()) / span)
        for key in ("k_codebook", "v_codebook"):
            moved = max(moved, float(np.abs(np.asarray(t["layers.%d.%s" % (l, key)], np.float64) -
                                            np.asarray(tn["layers.%d.%s" % (l, key)], np.float64)).max()))
    res.check(name + "/weighted-codebooks-equal-numpy", worst < CB_TOL and meta.get("fisher") == "diffusion",
              "max difference %.1e of the range; fisher=%s" % (worst, meta.get("fisher")))
    res.check(name + "/weights-move-the-codebooks", moved > 1e-3, "largest centroid change vs noF %.3f" % moved)


def fisher_scores(model, dump, bits, G):
    """numpy of dLLM-KVQ's --score-weight fisher: at every cached forward, sum over its cached
    rows of (g_post_c * e_c)^2, e = K - KIVI(K) post-RoPE of the rows as the refresh wrote them;
    averaged over cached forwards."""
    L, KV, hd = model.n_layers, model.n_kv, model.hd
    sums, cnt = np.zeros((L, KV * hd)), 0
    for pr in dump.pairs:
        N = pr["canvas_length"]
        err = [np.zeros((N, KV, hd)) for _ in range(L)]
        for f in pr["forwards"]:
            nc = sum(b - a for a, b in f["cached"])
            for l in range(L):
                rows = f["rows"][l]
                pos = np.array(rows["pos"])
                k_post = model.rope(np.array(rows["k"], np.float32).reshape(-1, KV, hd).astype(np.float64), pos)
                w0, w1 = f["write"]
                if w1 > w0:
                    sel = [i for i, p in enumerate(pos) if w0 <= p < w1]
                    kw = k_post[sel].astype(np.float32)
                    err[l][w0:w1] = kw.astype(np.float64) - rk.kivi_k(kw, bits, G)
                if nc:
                    g = pr["grads"][f["forward"]][l]
                    cpos = np.array(g["pos"][:nc])
                    gpost = model.rope(np.array(g["gk"][:nc], np.float64).reshape(nc, KV, hd), cpos)
                    sums[l] += ((gpost * err[l][cpos]) ** 2).sum(0).reshape(-1)
            cnt += 1 if nc else 0
    return sums / max(cnt, 1)


def check_fisher_scores(model, dump, art, res, name):
    t, meta = st.read_safetensors(art)
    got = np.array([np.asarray(t["layers.%d.k_channel_scores" % l], np.float64).reshape(-1)
                    for l in range(model.n_layers)])
    want = fisher_scores(model, dump, 2, KV_GROUP)
    err = max(float(np.linalg.norm(got[l] - want[l]) / max(np.linalg.norm(want[l]), 1e-30))
              for l in range(model.n_layers))
    res.check(name + "/fisher-scores-equal-numpy",
              err < 1e-3 and want.max() > 0 and meta.get("score_weight") == "fisher",
              "relative L2 per layer up to %.1e" % err)


def make_pairs(model, path, seed):
    rows = []
    for i in range(N_PAIRS):
        r = np.random.default_rng(seed + i)
        prompt = [int(t) for t in r.integers(0, model.mask_id, PROMPT_LEN)]
        ans = [int(t) for t in r.integers(0, model.mask_id, GEN - 3 - i)]
        rows.append({"prompt_ids": prompt, "answer_ids": ans})
    with open(path, "w") as f:
        for x in rows:
            f.write(json.dumps(x) + "\n")


def calibrate(a, model_dir, pairs, out, dump, *args):
    cmd = [a.dllmq, "calibrate", "-m", model_dir, "--data", pairs, "--gen-length", str(GEN),
           "--block-length", str(BL), "--threads", "1", "--kv-bits", "2", "--out", out] + \
          (["--dump-states", dump] if dump else []) + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError("calibrate %s: %s" % (" ".join(args), r.stderr.strip()[-600:]))


def run_arch(arch, a, res, work):
    d = os.path.join(work, arch)
    moe = dict(layers=3, dense_layers=(1,), experts=4, top_k=2, expert_mlp=48, shared_mlp=32,
               expert_bias=True, router_std=1.0) if arch == "lladamoe" else {}
    mk.make_checkpoint(arch, d, seed=33, w_std=0.2, lm_head_std=0.8, emb_std=0.3, zero_mask_logit=True, **moe)
    model = rf.RefModel(d)
    model.moe_layers = sum(L.moe is not None for L in model.layers)
    pairs = os.path.join(work, arch + "-pairs.jsonl")
    make_pairs(model, pairs, 900)
    rng = np.random.default_rng(5)
    quota = ["--steps", str(GEN // 2)]
    thr = ["--steps", str(GEN), "--threshold", "0.3"]
    cases = [("kvquant-trace-none", ["--method", "kvquant", "--trajectory", "trace", "--cache", "none"] + quota),
             ("kvquant-trace-prefix-thr", ["--method", "kvquant", "--trajectory", "trace", "--cache", "prefix"] + thr),
             ("kvquant-trace-dual", ["--method", "kvquant", "--trajectory", "trace", "--cache", "dual"] + quota),
             ("kvquant-random-dual", ["--method", "kvquant", "--trajectory", "random", "--cache", "dual"] + quota),
             ("kvquant-ar", ["--method", "kvquant", "--trajectory", "ar"] + quota),
             ("dllmkvq-trace-dual-fisher", ["--method", "dllm-kvq", "--trajectory", "trace", "--cache", "dual",
                                            "--kv-group", str(KV_GROUP), "--score-weight", "fisher"] + quota)]
    for tag, args in cases:
        name = "%s/%s" % (arch, tag)
        try:
            out = os.path.join(work, "%s-%s.safetensors" % (arch, tag))
            dump_path = os.path.join(work, "%s-%s.states.jsonl" % (arch, tag))
            calibrate(a, d, pairs, out, dump_path, *args)
            dump = Dump(dump_path)
            worst = {"loss": 0.0, "fd": 0.0, "n": 0, "kinks": 0}
            for pr in dump.pairs:
                check_pair_fisher(model, pr, res, "%s/pair%d" % (name, pr["pair"]), rng, 2, worst)
            res.check(name + "/loss-value", worst["loss"] < 1e-5, "relative difference up to %.1e" % worst["loss"])
            res.check(name + "/finite-differences", worst["n"] >= 8 and worst["fd"] < FD_TOL,
                      "%d elements, |dllmq - FD| up to %.2e of the layer's largest gradient%s"
                      % (worst["n"], worst["fd"], ", %d routing kinks skipped" % worst["kinks"] if worst["kinks"] else ""))
            if tag.startswith("kvquant"):
                nof = out.replace(".safetensors", "-noF.safetensors")
                calibrate(a, d, pairs, nof, None, *args, "--fisher", "none")
                check_codebooks(model, dump, out, nof, res, name)
            else:
                check_fisher_scores(model, dump, out, res, name)
        except Exception as e:  # noqa: BLE001
            res.check(name, False, repr(e))
    # flags that do not combine
    for tag, args, needle in (
            ("fisher-with-dllmkvq", ["--method", "dllm-kvq", "--trajectory", "trace", "--cache", "dual",
                                     "--fisher", "diffusion"], "--fisher"),
            ("fisher-score-with-ar", ["--method", "dllm-kvq", "--trajectory", "ar", "--score-weight", "fisher"],
             "--score-weight"),
            ("fisher-bad-value", ["--method", "kvquant", "--fisher", "yes"], "--fisher")):
        r = subprocess.run([a.dllmq, "calibrate", "-m", d, "--data", pairs, "--out", os.path.join(work, "x.st")]
                           + args, capture_output=True, text=True, timeout=120)
        res.check("%s/err/%s" % (arch, tag), r.returncode != 0 and needle in r.stderr, r.stderr.strip()[-200:])


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--dllmq", default=os.path.join(ROOT, "build", "dllmq"))
    ap.add_argument("--workdir")
    ap.add_argument("--arch", action="append", choices=("llada", "dream", "lladamoe"),
                    help="only this architecture (repeatable; default all three)")
    a = ap.parse_args(argv)
    a.dllmq = os.path.abspath(a.dllmq)
    work = a.workdir or tempfile.mkdtemp(prefix="dllmq_fisher_")
    os.makedirs(work, exist_ok=True)
    res = Results()
    for arch in a.arch or ("llada", "dream", "lladamoe"):
        run_arch(arch, a, res, work)
    print(f"{res.passed} passed, {res.failed} failed")
    return 1 if res.failed else 0


if __name__ == "__main__":
    sys.exit(main())
