#!/usr/bin/python3
"""The frontier statistics of `dllmq grid` (cli/grid_frontier.cpp, eval/paired_stats.cpp) against
independent numpy / scipy references, and a reduced frontier sweep (configs/frontier_synth.json).

    test_frontier.py [--dllmq build/dllmq] [--workdir DIR] [--no-sweep] [-v]

Part A: a synthetic OUT/cells.json (two models x two cache modes, five methods, one of them
dominating another, 200 problems with a few missing from one cell) -> `dllmq grid --reduce`:
- per-cell 95% bootstrap intervals == numpy percentiles of the resampled means, the resampler
  rebuilt here from its definition (splitmix64; draw i of replicate b is output b*n + i,
  index floor(((z >> 11) * 2^-53) * n));
- the Pareto frontier flags == a brute-force dominance check (a cell another cell of its
  method dominates is off the frontier); a method that dominates another (fewer bits, more
  problems right in every cell) is above it at every budget both reach and leads at 4 bits;
- matched-budget values == numpy.interp along the frontier (None below its first cell), their
  intervals from the same replicates;
- McNemar p-values == scipy.stats.binomtest(min(b, c), b + c, 0.5), two-sided;
- the paper-form averages (4 and 2 bits, default cells only), their intervals, the best method
  named and the significance of its lead == numpy;
- bad input: --reduce without cells.json, a malformed cells.json, --budgets 0, --bootstrap 5.
Part B (binary, embedded model): a reduced frontier sweep on synth-llada (a few problems per
cell) -> every cell has effective K and V bits, cells.json / frontier.json / one PNG per setting;
two sweep cells re-run as single `dllmq eval` commands give the same per-problem responses,
correctness and KV bytes.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from scipy import stats

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results import Results  # noqa: E402

M64 = (1 << 64) - 1


# ------------------------------------------------------------------ references
def splitmix_stream(seed, count):
    """First `count` outputs of splitmix64 from state `seed` (python ints, exact)."""
    out = np.empty(count, dtype=np.uint64)
    s = seed & M64
    for k in range(count):
        s = (s + 0x9E3779B97F4A7C15) & M64
        z = s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        out[k] = z ^ (z >> 31)
    return out


def bootstrap_indices(n, B, seed):
    z = splitmix_stream(seed, n * B)
    u = (z >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
    return np.minimum((u * n).astype(np.int64), n - 1).reshape(B, n)


def pareto(bits, acc):
    keep = []
    for i in range(len(bits)):
        dom = False
        for j in range(len(bits)):
            if j == i:
                continue
            if bits[j] <= bits[i] and acc[j] >= acc[i] and (bits[j] < bits[i] or acc[j] > acc[i] or j < i):
                dom = True
        if not dom:
            keep.append(i)
    return sorted(keep, key=lambda i: bits[i])


def interp(xs, ys, b):
    if b < xs[0]:
        return None
    return float(np.interp(b, xs, ys))


# ------------------------------------------------------------------ part A
def synthetic_cells(rng):
    n = 200
    ids = ["synth/%04d" % i for i in range(n)]
    cells = []
    # method -> list of (name, eff bits, accuracy target, nominal bits, quantized)
    methods = {
        "fp16": [("fp16", 16.0, 0.90, 16, False)],
        "kivi": [("kivi-4", 6.8, 0.88, 4, True), ("kivi-2", 4.9, 0.80, 2, True),
                 ("kivi@g64-2", 4.2, 0.74, 2, True), ("kivi@g16-4", 9.0, 0.87, 4, True)],
        "kvq": [("kvq-4", 7.2, 0.89, 4, True), ("kvq-2", 5.1, 0.84, 2, True), ("kvq@o2-3", 6.0, 0.86, 3, True)],
        # "dom" dominates "sub": fewer bits and better answers on every cell
        "dom": [("dom-4", 5.5, 0.89, 4, True), ("dom-2", 3.2, 0.86, 2, True)],
        "sub": [("sub-4", 6.5, 0.70, 4, True), ("sub-2", 4.5, 0.60, 2, True), ("sub@x-2", 4.6, 0.55, 2, True)],
    }
    for model in ("m-llada", "m-dream"):
        base = rng.random(n)  # problem difficulty shared by methods: paired data
        for cache in ("prefix", "dual"):
            for fam, lst in methods.items():
                for name, bits, acc, nb, q in lst:
                    noise = rng.random(n) * 0.3
                    corr = ((base * 0.7 + noise) < acc * 1.0).astype(int)
                    if fam == "dom":
                        corr = np.maximum(corr, (base < 0.8).astype(int))
                    my_ids = list(ids)
                    my_corr = list(map(int, corr))
                    if name == "kivi-2" and model == "m-dream" and cache == "dual":
                        my_ids, my_corr = my_ids[5:], my_corr[5:]  # 5 problems missing
                    jitter = 0.01 * (model == "m-dream") + 0.02 * (cache == "dual")
                    cells.append(dict(model=model, cache=cache, task="synth", name=name, family=fam,
                                      nominal_bits=nb, quantized=q, paper="@" not in name,
                                      eff_bits=bits + jitter, eff_bits_k=bits + jitter + 0.5,
                                      eff_bits_v=bits + jitter - 0.5, ids=my_ids, correct=my_corr))
    return cells


def reference(cells, B, seed, budgets):
    # Universe: problems every cell has.
    common = sorted(set.intersection(*[set(c["ids"]) for c in cells]))
    n = len(common)
    X = np.array([[dict(zip(c["ids"], c["correct"]))[i] for i in common] for c in cells], dtype=np.float64)
    idx = bootstrap_indices(n, B, seed)
    acc = X.mean(axis=1)
    rep = X[:, idx].mean(axis=2)  # [cells, B]
    return common, X, acc, rep


def run(cmd, timeout=600):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def close(a, b, tol=1e-9):
    return a is not None and b is not None and abs(a - b) <= tol


def part_a(res, dllmq, work, verbose):
    rng = np.random.default_rng(5)
    cells = synthetic_cells(rng)
    out = os.path.join(work, "reduce")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "cells.json"), "w") as f:
        json.dump({"format": "dllmq-grid-cells", "version": 1, "cells": cells}, f)
    B, seed, budgets = 400, 7, [3.0, 4.0, 5.0, 6.5]
    rc, so, se = run([dllmq, "grid", "--reduce", "--out", out, "--bootstrap", str(B), "--bootstrap-seed",
                      str(seed), "--budgets", ",".join("%g" % b for b in budgets)])
    res.check("reduce/run", rc == 0, se[-500:] if rc else "")
    if rc:
        return
    if verbose:
        print(so)
    fj = json.load(open(os.path.join(out, "frontier.json")))
    common, X, acc, rep = reference(cells, B, seed, budgets)
    res.check("reduce/universe", fj["problems"]["synth"] == len(common) == 195, "%s" % fj["problems"])
    lo_ref = np.percentile(rep, 2.5, axis=1)
    hi_ref = np.percentile(rep, 97.5, axis=1)
    by_key = {(c["model"], c["cache"], c["name"]): k for k, c in enumerate(cells)}
    worst = 0.0
    n_pts = 0
    front_ok = True
    matched_ok = True
    dominance_ok = True
    mcn_ok = True
    n_mcn = 0
    for s in fj["settings"]:
        model, cache = s["model"], s["cache"]
        fr = {}
        for ser in s["series"]:
            ks = [by_key[(model, cache, p["name"])] for p in ser["points"]]
            for p, k in zip(ser["points"], ks):
                worst = max(worst, abs(p["y"] - acc[k]), abs(p["lo"] - lo_ref[k]), abs(p["hi"] - hi_ref[k]))
                n_pts += 1
            bits = [cells[k]["eff_bits"] for k in ks]
            want = pareto(bits, [acc[k] for k in ks])
            got = sorted([i for i, p in enumerate(ser["points"]) if p["frontier"]], key=lambda i: bits[i])
            if got != want:
                front_ok = False
                res.check("reduce/frontier/%s/%s/%s" % (model, cache, ser["name"]), False,
                          "got %s want %s" % (got, want))
            fr[ser["name"]] = [ks[i] for i in want]
        for row in s["matched"]:
            f = fr[row["method"]]
            xs = [cells[k]["eff_bits"] for k in f]
            for b, v in zip(budgets, row["values"]):
                w = interp(xs, [acc[k] for k in f], b)
                if (w is None) != (v is None):
                    matched_ok = False
                    continue
                if w is None:
                    continue
                r = np.array([np.interp(b, xs, rep[f, j]) for j in range(B)])
                if not (close(v["acc"], w) and close(v["lo"], np.percentile(r, 2.5))
                        and close(v["hi"], np.percentile(r, 97.5))):
                    matched_ok = False
                    res.check("reduce/matched/%s/%s/%s/%g" % (model, cache, row["method"], b), False,
                              "got %s want %s" % (v, w))
        vals = {row["method"]: row["values"] for row in s["matched"]}
        for j, b in enumerate(budgets):
            d, u = vals["dom"][j], vals["sub"][j]
            if u is not None and (d is None or d["acc"] <= u["acc"]):
                dominance_ok = False
        lead = [l for l in s["leads"] if l["budget"] == 4.0]
        if not lead or lead[0]["best"] != "dom":
            dominance_ok = False
        exp_pairs = set()
        fams = list(fr)
        for x in range(len(fams)):
            for y in range(x + 1, len(fams)):
                for i in fr[fams[x]]:
                    for j in fr[fams[y]]:
                        if abs(cells[i]["eff_bits"] - cells[j]["eff_bits"]) <= 0.25:
                            exp_pairs.add(frozenset((cells[i]["name"], cells[j]["name"])))
        if exp_pairs != {frozenset((t["a"], t["b"])) for t in s["mcnemar"]}:
            mcn_ok = False
        for t in s["mcnemar"]:
            i, j = by_key[(model, cache, t["a"])], by_key[(model, cache, t["b"])]
            b_ = int(((X[i] > 0.5) & (X[j] < 0.5)).sum())
            c_ = int(((X[i] < 0.5) & (X[j] > 0.5)).sum())
            p = 1.0 if b_ + c_ == 0 else stats.binomtest(min(b_, c_), b_ + c_, 0.5).pvalue
            n_mcn += 1
            if t["a_only"] != b_ or t["b_only"] != c_ or not close(t["p"], p, 1e-9 * max(1.0, p)):
                mcn_ok = False
                res.check("reduce/mcnemar/%s/%s/%s-%s" % (model, cache, t["a"], t["b"]), False,
                          "got %s want %d/%d p %g" % (t, b_, c_, p))
            if abs(cells[i]["eff_bits"] - cells[j]["eff_bits"]) > 0.25:
                mcn_ok = False
    res.check("reduce/bootstrap-intervals", worst <= 1e-12, "%d points, worst |diff| %.3g" % (n_pts, worst))
    res.check("reduce/frontier-flags", front_ok)
    res.check("reduce/matched-budgets", matched_ok)
    res.check("reduce/dominating-method", dominance_ok)
    res.check("reduce/mcnemar", mcn_ok and n_mcn > 0, "%d tests" % n_mcn)
    # Paper-form average
    pa = {r["method"]: r for r in fj["paper_average"]}
    ok = True
    want = {}
    for fam in ("fp16", "kivi", "kvq", "dom", "sub"):
        ks = [k for k, c in enumerate(cells) if c["family"] == fam and c["paper"]
              and (not c["quantized"] or c["nominal_bits"] in (2, 4))]
        v = acc[ks].mean()
        r = rep[ks].mean(axis=0)
        want[fam] = r
        g = pa.get(fam)
        if g is None or not (close(g["average"], v) and close(g["lo"], np.percentile(r, 2.5))
                             and close(g["hi"], np.percentile(r, 97.5))) or g["cells"] != len(ks):
            ok = False
            res.check("reduce/paper/" + fam, False, "got %s want %g" % (g, v))
    res.check("reduce/paper-average", ok)
    order = sorted(("kivi", "kvq", "dom", "sub"), key=lambda f: -want[f].mean())
    d = want[order[0]] - want[order[1]]
    best = fj.get("best", {})
    sig = bool(np.percentile(d, 2.5) > 0)
    res.check("reduce/best-method", best.get("method") == order[0] == "dom" and best.get("second") == order[1]
              and best.get("significant") == sig and close(best.get("lo"), np.percentile(d, 2.5)),
              "got %s want %s over %s significant %s" % (best, order[0], order[1], sig))
    res.check("reduce/printed", "Paper-form average" in so and "Best quantized method: **dom**" in so
              and "4 bits: best dom" in so, so[-300:])
    pngs = fj.get("plots", [])
    res.check("reduce/plots", len(pngs) == 4 and all(os.path.getsize(os.path.join(out, p)) > 10000 for p in pngs),
              "%s" % pngs)
    # bad input
    empty = os.path.join(work, "empty")
    os.makedirs(empty, exist_ok=True)
    bad = os.path.join(work, "bad")
    os.makedirs(bad, exist_ok=True)
    c2 = json.loads(json.dumps(cells[:3]))
    c2[1]["correct"] = c2[1]["correct"][:-1]
    with open(os.path.join(bad, "cells.json"), "w") as f:
        json.dump({"format": "dllmq-grid-cells", "version": 1, "cells": c2}, f)
    for nm, args, needle in (("no-cells", ["--out", empty], "cells.json"),
                             ("malformed", ["--out", bad], "cells[1].correct"),
                             ("budget-0", ["--out", out, "--budgets", "0,4"], "--budgets"),
                             ("budget-text", ["--out", out, "--budgets", "4,x"], "--budgets"),
                             ("bootstrap-5", ["--out", out, "--bootstrap", "5"], "--bootstrap")):
        rc, so2, se2 = run([dllmq, "grid", "--reduce"] + args)
        # dllmq's errors, or CLI11's range refusal ("--bootstrap: '5' is not an integer in ...")
        el = "\n".join(l for l in (so2 + se2).splitlines()
                       if "error" in l.lower() or " is not " in l)
        res.check("reduce/err/" + nm, rc != 0 and needle in el and "terminate" not in se2,
                  "rc %d: %s" % (rc, el[-200:]))


# ------------------------------------------------------------------ part B
CI_KV = ("fp16,kivi-2,kivi-4,kivi@g64-3,kvquant-trace-2,kvquant-trace-4,kvquant-trace@o2-2,dllm-kvq-trace-2,"
         "dllm-kvq-trace-4,dllm-kvq-trace@h0-2,dllm-kvq-kvquant-trace-2,dllm-kvq-kvquant-trace-4,"
         "dllm-kvq-kvquant-trace@h20-2")


def part_b(res, dllmq, work, verbose):
    cfg_path = os.path.join(work, "frontier_ci.json")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "grid", "reduce_config.py"),
                        os.path.join(ROOT, "configs", "frontier_synth.json"), "--calib-limit", "2", "--limit", "3",
                        "--models", "synth-llada", "--kv", CI_KV], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    res.check("sweep/reduce-config", p.returncode == 0, p.stderr.decode()[-300:])
    if p.returncode:
        return
    cfg = json.loads(p.stdout)
    # The generated config is what tools/grid/make_frontier_config.py writes.
    g = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "grid", "make_frontier_config.py")],
                       stdout=subprocess.PIPE)
    res.check("sweep/config-generated", json.loads(g.stdout) == json.load(
        open(os.path.join(ROOT, "configs", "frontier_synth.json"))))
    out = os.path.join(work, "sweep")
    # A fresh sweep and fresh single runs each time (a kept --workdir from an earlier run would
    # resume them instead, and the single runs refuse an --out holding other results).
    for d in os.listdir(work):
        if d == "sweep" or d.startswith("single-"):
            shutil.rmtree(os.path.join(work, d))
    cfg["out"] = out
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    rc, so, se = run([dllmq, "grid", "--config", cfg_path, "--bootstrap", "200"], timeout=1800)
    res.check("sweep/run", rc == 0, se[-800:] if rc else "")
    if rc:
        return
    if verbose:
        print(so)
    import csv
    rows = list(csv.DictReader(open(os.path.join(out, "grid.csv"))))
    ok = len(rows) == 2 * len(CI_KV.split(",")) and all(
        r["effective_bits_k"] and r["effective_bits_v"] and r["strict_match"] and r["n"] == "3" for r in rows)
    res.check("sweep/cells-have-accuracy-and-kv-bits", ok, "%d rows" % len(rows))
    kvq = [r for r in rows if r["kv"] == "dllm-kvq-kvquant-trace-2"]
    res.check("sweep/kvquant-base-bits", bool(kvq) and all(float(r["effective_bits_k"]) > 2 for r in kvq))
    fj = json.load(open(os.path.join(out, "frontier.json")))
    res.check("sweep/frontier-outputs", len(fj["settings"]) == 2 and len(fj["plots"]) == 2
              and all(os.path.isfile(os.path.join(out, p)) for p in fj["plots"])
              and os.path.isfile(os.path.join(out, "cells.json")) and "Paper-form average" in so,
              "%s" % fj.get("plots"))
    names = {r["method"] for r in fj["paper_average"]}
    res.check("sweep/paper-methods", {"fp16", "kivi", "kvquant-trace", "dllm-kvq-trace",
                                      "dllm-kvq-kvquant-trace"} <= names, "%s" % names)
    # A sweep cell == one `dllmq eval` with the same flags.
    for name in ("dllm-kvq-kvquant-trace@h20-2", "kivi@g64-3"):
        cache = "dual"
        cell = os.path.join(out, "synth", "cache=%s,kv=%s,model=synth-llada" % (cache, name))
        bundle = [v for v in cfg["grid"]["kv"] if v["name"] == name][0]
        cmd = [dllmq, "eval", "--task", "synth", "--data", cfg["tasks"][0]["data"], "--limit", "3",
               "--out", os.path.join(work, "single-" + name.replace("@", "_")), "--json", "-m", "synth-llada",
               "--gen-length", "48", "--block-length", "16", "--threshold", "0.9", "--cache", cache,
               "--threads", "1"]
        for k, v in bundle.items():
            if k != "name":
                cmd += ["--" + k, str(v).replace("{out}", out).replace("{model}", "synth-llada").replace(
                    "{cache}", cache)]
        rc, so3, se3 = run(cmd)
        if rc:
            res.check("sweep/cell-equals-eval/" + name, False, se3[-400:])
            continue

        def samples(d):
            keep = ("task_id", "response", "correct", "kv_bytes", "kv_bytes_k", "kv_bytes_v", "kv_bytes_fp16",
                    "nfe", "kv_method")
            return [{k: r.get(k) for k in keep} for r in map(json.loads, open(os.path.join(d, "samples.jsonl")))]

        a, b = samples(cell), samples(cmd[cmd.index("--out") + 1])
        res.check("sweep/cell-equals-eval/" + name, a == b and len(a) == 3,
                  "" if a == b else "cell %s vs eval %s" % (a[:1], b[:1]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dllmq", default=os.path.join(ROOT, "build", "dllmq"))
    ap.add_argument("--workdir")
    ap.add_argument("--no-sweep", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    work = a.workdir or tempfile.mkdtemp(prefix="dllmq_frontier_")
    os.makedirs(work, exist_ok=True)
    res = Results()
    try:
        part_a(res, a.dllmq, work, a.verbose)
        if not a.no_sweep:
            part_b(res, a.dllmq, work, a.verbose)
    finally:
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)
    if res.fail_names:
        print("failed: " + ", ".join(res.fail_names))
    print("%d passed, %d failed" % (res.passed, res.failed))
    return 0 if res.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
