#!/usr/bin/python3
"""LLaDA-MoE cost: a MoE model against a dense LLaDA-layout model of the same active size, and a
LLaDA-MoE-7B-A1B-shaped layer against a LLaDA-8B-shaped one.

    bench/moe_bench.py [--dllmq build/dllmq] [--workdir DIR] [--rounds 3] [--skip-layers]

1. pair: random bf16 checkpoints (tools/make_tiny_checkpoint.py), same attention, LM head and
   depth; the MoE model's FFN is E experts top-k of width W (k*W = the dense MLP width, so the
   active parameters agree up to the router's E x d). `dllmq bench` (dual, prefix and no
   cache; no threshold) on each, alternating, ROUNDS times; the best tokens/s of each and their
   ratio, and the median / min / max of the per-round ratios (each MoE run against the dense run
   just before it) (--weights f32 stores both in f32, so no product widens bf16 panels). Also the
   peak RSS of each run against the checkpoint's bytes (weights are memory-mapped).
2. layers: one-layer checkpoints shaped like a LLaDA-MoE-7B-A1B layer (d 2048, 16 heads x 128,
   64 experts top-8 of width 1024, QK norm) and a LLaDA-8B layer (d 4096, 32 heads, MLP 12288),
   vocab 256; `dllmq bench` with a 1-token prompt and a 32-token block in dual mode runs
   forwards of 32-33 rows: seconds per forward = seconds per layer at 32 rows; x 16 resp. x 32
   layers = the layers' share of one dual-cache step (the LM head on 32 rows comes on top).
The machine may be shared: the pair alternates so both see the same load; say so with the
numbers. Prints one JSON object.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import make_tiny_checkpoint as mk  # noqa: E402

PAIR = dict(layers=4, d_model=1024, heads=16, kv_heads=16, vocab=4096)
MOE = dict(experts=32, top_k=4, expert_mlp=512)  # active FFN width 2048
DENSE_MLP = 2048


def bench(dllmq, d, args):
    cmd = [dllmq, "bench", "-m", d, "--json"] + args
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=3600)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.decode(errors="replace")[-500:])
    return json.loads(p.stdout.decode())


def ckpt_bytes(d):
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".safetensors"))


def pair(dllmq, work, rounds, weights):
    moe = os.path.join(work, "moe_" + weights)
    dense = os.path.join(work, "dense_" + weights)
    mk.make_checkpoint("lladamoe", moe, seed=1, mlp=DENSE_MLP, dtype=weights, **PAIR, **MOE)
    mk.make_checkpoint("llada", dense, seed=2, mlp=DENSE_MLP, dtype=weights, **PAIR)
    args = ["--prompt-length", "64", "--gen-length", "64", "--block-length", "32", "--steps", "64",
            "--modes", "dual,prefix,none"]
    best = {"moe": {}, "dense": {}}
    per_round = {"moe": {}, "dense": {}}  # mode -> tokens/s of every round
    rss = {}
    for _ in range(rounds):
        for name, d in (("dense", dense), ("moe", moe)):
            j = bench(dllmq, d, args)
            for m in j["modes"]:
                best[name][m["cache"]] = max(best[name].get(m["cache"], 0.0), m["tokens_per_s"])
                per_round[name].setdefault(m["cache"], []).append(m["tokens_per_s"])
            rss[name] = j["peak_rss_bytes"]
    # Each round's MoE run against the dense run just before it (the same load, roughly).
    round_ratios = {m: [a / b for a, b in zip(per_round["moe"][m], per_round["dense"][m])]
                    for m in per_round["dense"]}
    info = json.loads(subprocess.run([dllmq, "inspect", "-m", moe, "--json"], stdout=subprocess.PIPE).stdout)
    dinfo = json.loads(subprocess.run([dllmq, "inspect", "-m", dense, "--json"], stdout=subprocess.PIPE).stdout)
    return {
        "moe_params": info["n_params"], "moe_active_params": info["n_active_params"],
        "dense_params": dinfo["n_params"],
        "tokens_per_s": best,
        "ratio_moe_over_dense": {m: best["moe"][m] / best["dense"][m] for m in best["dense"]},
        "tokens_per_s_per_round": per_round,
        "round_ratios": {m: {"median": statistics.median(r), "min": min(r), "max": max(r)}
                         for m, r in round_ratios.items()},
        "peak_rss_bytes": rss,
        "weight_bytes": {"moe": ckpt_bytes(moe), "dense": ckpt_bytes(dense)},
        "settings": " ".join(args) + " (fp32 compute, %s weights)" % weights,
        "threads": info["threads"],
    }


def layers(dllmq, work):
    out = {}
    shapes = {
        "llada-moe-7b-a1b": ("lladamoe", dict(layers=1, d_model=2048, heads=16, vocab=256, experts=64, top_k=8,
                                              expert_mlp=1024, w_std=0.02, emb_std=0.02), 16),
        "llada-8b": ("llada", dict(layers=1, d_model=4096, heads=32, vocab=256, mlp=12288, w_std=0.02,
                                   emb_std=0.02), 32),
    }
    for name, (arch, kw, n_layers) in shapes.items():
        d = os.path.join(work, name)
        mk.make_checkpoint(arch, d, seed=3, **kw)
        args = ["--prompt-length", "1", "--gen-length", "32", "--block-length", "32", "--steps", "32",
                "--modes", "dual"]
        bench(dllmq, d, args)  # page the weights in
        j = bench(dllmq, d, args)
        mode = j["modes"][0]
        per_forward = mode["time_s"] / mode["nfe"]
        out[name] = {"seconds_per_layer_32_rows": per_forward, "layers": n_layers,
                     "implied_layers_seconds_per_dual_step": per_forward * n_layers,
                     "weight_bytes": ckpt_bytes(d), "peak_rss_bytes": j["peak_rss_bytes"]}
        shutil.rmtree(d, ignore_errors=True)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dllmq", default=os.path.join(ROOT, "build", "dllmq"))
    ap.add_argument("--workdir")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--skip-layers", action="store_true")
    ap.add_argument("--skip-pair", action="store_true")
    ap.add_argument("--weights", default="bf16", choices=["bf16", "f32"],
                    help="stored dtype of the pair (f32: no widening of the weights per product)")
    a = ap.parse_args(argv)
    work = a.workdir or tempfile.mkdtemp(prefix="dllmq_moe_bench_")
    res = {}
    try:
        if not a.skip_pair:
            res["pair"] = pair(a.dllmq, work, a.rounds, a.weights)
        if not a.skip_layers:
            res["layers"] = layers(a.dllmq, work)
    finally:
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
