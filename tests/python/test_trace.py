#!/usr/bin/python3
"""--trace-cache against the numpy reference: the reused K/V error the trace reports must equal
the error between the K/V of the block-start (refresh) canvas and a full recompute on the canvas
of that step, per layer, for LLaDA and Dream, prefix and dual caches.

Usage: test_trace.py --dllmq BIN --workdir DIR   (last line: 'N passed, N failed')
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
import ref_forward as rf  # noqa: E402

PASSED, FAILED = [], []


def check(name, ok, detail=""):
    (PASSED if ok else FAILED).append(name)
    print(("PASS " if ok else "FAIL ") + name + (" " + detail if detail else ""))


def rel(a, b):
    return float(np.sqrt(((a - b) ** 2).sum() / (b ** 2).sum()))


def run_case(binary, work, arch, cache):
    model = os.path.join(work, arch)
    if not os.path.exists(os.path.join(model, "config.json")):
        subprocess.check_call([sys.executable, os.path.join(HERE, "..", "..", "tools", "make_tiny_checkpoint.py"),
                               "--arch", arch, "--out", model, "--seed", "7"], stdout=subprocess.DEVNULL)
    prompt = [5, 17, 33, 2, 64, 90, 11]
    G, B = 16, 8
    trace = os.path.join(work, f"trace-{arch}-{cache}.jsonl")
    out = subprocess.check_output([binary, "generate", "-m", model, "--prompt-ids", ",".join(map(str, prompt)),
                                   "--gen-length", str(G), "--block-length", str(B), "--steps", str(G),
                                   "--cache", cache, "--kv", "fp32", "--trace-cache", trace, "--json"],
                                  stderr=subprocess.DEVNULL)
    res = json.loads(out)
    rows = [json.loads(l) for l in open(trace)]
    ref = rf.load_model(model)
    n_layers = len(ref.layers)
    P, N, mask = len(prompt), len(prompt) + G, ref.mask_id
    canvas = np.array(prompt + [mask] * G)
    steps, blocks = res["reveal_steps"], res["step_blocks"]

    def canvas_after(n_steps):  # the canvas once the first n_steps reveal steps are applied
        c = np.array(prompt + [mask] * G)
        for revealed in steps[:n_steps]:
            for p in revealed:
                c[p] = res["tokens"][p - P]
        return c

    forwards = sorted({r["nfe"] for r in rows})
    worst, checked = 0.0, 0
    for nfe in forwards:
        got = {r["layer"]: r for r in rows if r["nfe"] == nfe}
        step, b = got[0]["step"], got[0]["block"]
        s, e = P + b * B, P + (b + 1) * B
        # Cached rows come from the refresh forward, run on the canvas before the block's first step.
        first = blocks.index(b)
        _, kv_stale = ref.forward(canvas_after(first), return_kv=True)
        _, kv_now = ref.forward(canvas_after(step), return_kv=True)
        cached = np.r_[0:s] if cache == "prefix" else np.r_[0:s, e:N]
        for l in range(n_layers):
            want_k = rel(kv_stale[l][0][cached], kv_now[l][0][cached])
            want_v = rel(kv_stale[l][1][cached], kv_now[l][1][cached])
            gk, gv = got[l]["k_rel_err"], got[l]["v_rel_err"]
            worst = max(worst, abs(gk - want_k) / max(want_k, 1e-6), abs(gv - want_v) / max(want_v, 1e-6))
            checked += 1
    traced_steps = forwards
    check(f"{arch}/{cache}/rows", len(rows) == len(traced_steps) * n_layers and len(traced_steps) > 0,
          f"{len(rows)} rows, {len(traced_steps)} traced forwards")
    check(f"{arch}/{cache}/k-v-error-matches-reference", checked > 0 and worst < 1e-3,
          f"{checked} (step, layer) pairs, worst relative deviation {worst:.2e}")
    attn = [r["attn_rel_err"] for r in rows]
    check(f"{arch}/{cache}/attn-error-positive", all(np.isfinite(attn)) and max(attn) > 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dllmq", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    for arch in ("llada", "dream"):
        for cache in ("prefix", "dual"):
            try:
                run_case(a.dllmq, a.workdir, arch, cache)
            except Exception as ex:  # a crash is a failure, not an abort of the suite
                check(f"{arch}/{cache}", False, repr(ex))
    print(f"{len(PASSED)} passed, {len(FAILED)} failed")
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
