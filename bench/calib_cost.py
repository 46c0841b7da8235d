#!/usr/bin/python3
"""Calibration cost on LLaDA-8B-shaped layers, extrapolated to LLaDA-8B (issue 13's performance
figures): time and peak memory of `dllmq calibrate` per pair, per trajectory and method.

    bench/calib_cost.py [--dllmq build/dllmq] [--work /tmp/calib_cost] [--prompt-length P]
                        [--gen-length 256] [--block-length 32] [--steps 64] [--pairs 1]

What it does:
  1. Writes two random checkpoints in LLaDA-8B geometry (d 4096, 32 heads of 128, MHA, SwiGLU
     12288, vocab 126464, bf16) with 1 and 2 layers (float32 RNG, so no 8 GB float64
     temporaries).
  2. Calibrates on random-id pairs of the given prompt length (default: the mean length of
     lm-eval's 5-shot GSM8K prompt for the first 128 GSM8K train records under the Qwen2 BPE
     table of ../shared/data, if present; else 1,000) and gen length, dual cache, quota schedule
     (--steps: the default 64 reveals 4 tokens a step, the NFE a tau-0.9 run of LLaDA reaches
     on GSM8K according to Fast-dLLM):
       kvquant trace, Fisher on;  kvquant trace, --fisher none;
       dllm-kvq trace (with the layer-sensitivity pass);  dllm-kvq trace --no-sensitivity
     and records wall seconds, CPU seconds (children's rusage) and peak RSS of each run.
  3. Extrapolates to 32 layers: every cost but the sensitivity pass is a + b * layers (from the
     1- and 2-layer runs); the sensitivity pass re-runs each cached step once per layer, each
     run a whole forward, so it is layers * (share of a trajectory) * base(layers); all from CPU
     seconds (see the comment at the extrapolation). Peak memory: the 2-layer RSS minus
     its weight bytes gives the state per layer, added to 32 layers of bf16 weights.
Prints a Markdown table and writes results.json in --work.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import make_tiny_checkpoint as mk  # noqa: E402
import safetensors_np as st  # noqa: E402

D, H, F, V = 4096, 32, 12288, 126464
MASK, EOS = 126336, 126081


def write_checkpoint(out, layers, seed=0):
    if os.path.exists(os.path.join(out, "config.json")):
        return
    rng = np.random.default_rng(seed)

    def w(*shape, std=0.02):  # bf16 bit patterns (truncated f32), generated in row chunks
        out = np.empty(shape, np.uint16)
        for r0 in range(0, shape[0], 4096):
            x = rng.standard_normal((min(4096, shape[0] - r0),) + shape[1:], dtype=np.float32)
            out[r0:r0 + len(x)] = (x * np.float32(std)).view(np.uint32) >> 16
        return out

    def ones(n):
        return np.full(n, 0x3F80, np.uint16)  # bf16 1.0

    p = "model.transformer."
    t = {p + "wte.weight": w(V, D, std=0.5)}
    for i in range(layers):
        b = p + "blocks.%d." % i
        t[b + "attn_norm.weight"] = ones(D)
        for n, shape in (("q_proj", (D, D)), ("k_proj", (D, D)), ("v_proj", (D, D)),
                         ("attn_out", (D, D)), ("ff_proj", (F, D)), ("up_proj", (F, D)),
                         ("ff_out", (D, F))):
            t[b + n + ".weight"] = w(*shape)
        t[b + "ff_norm.weight"] = ones(D)
    t[p + "ln_f.weight"] = ones(D)
    t[p + "ff_out.weight"] = w(V, D)
    os.makedirs(out, exist_ok=True)
    st.write_sharded(out, t, 1, dtype="bf16-bits")
    cfg = mk.llada_config(layers, D, H, H, F, V, MASK, EOS, False, "bf16")
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)


def gsm8k_prompt_length(dllmq, work):
    data = os.path.join(ROOT, "..", "shared", "data", "gsm8k", "train.jsonl")
    tik = os.path.join(ROOT, "..", "shared", "data", "tokenizers", "qwen", "qwen.tiktoken")
    if not (os.path.exists(data) and os.path.exists(tik)):
        return None
    pairs = os.path.join(work, "gsm8k_pairs.jsonl")
    subprocess.run([dllmq, "make-pairs", "--task", "gsm8k", "--data", data, "--limit", "128", "--out", pairs],
                   check=True, capture_output=True)
    lens = []
    for line in open(pairs):
        text = json.loads(line)["prompt"]
        r = subprocess.run([dllmq, "tokenize", "--tokenizer", tik, "--text", text, "--ids-only"],
                           check=True, capture_output=True, text=True)
        lens.append(len([x for x in r.stdout.strip().split(",") if x]))
    return int(round(float(np.mean(lens))))


def run(cmd):
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    err = p.stderr.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(cmd), err[-800:]))
    return dict(wall_s=wall, cpu_s=ru.ru_utime + ru.ru_stime, rss_mib=ru.ru_maxrss / 1024.0)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dllmq", default=os.path.join(ROOT, "build", "dllmq"))
    ap.add_argument("--work", default="/tmp/calib_cost")
    ap.add_argument("--prompt-length", type=int)
    ap.add_argument("--gen-length", type=int, default=256)
    ap.add_argument("--block-length", type=int, default=32)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--pairs", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args(argv)
    os.makedirs(a.work, exist_ok=True)
    P = a.prompt_length or gsm8k_prompt_length(a.dllmq, a.work) or 1000
    print("prompt length %d, gen %d, block %d, steps %d, %d pair(s), %d threads" %
          (P, a.gen_length, a.block_length, a.steps, a.pairs, a.threads), flush=True)
    rng = np.random.default_rng(1)
    pairs = os.path.join(a.work, "pairs_P%d.jsonl" % P)
    with open(pairs, "w") as f:
        for _ in range(a.pairs):
            f.write(json.dumps({"prompt_ids": [int(x) for x in rng.integers(0, 126000, P)],
                                "answer_ids": [int(x) for x in rng.integers(0, 126000, a.gen_length)]}) + "\n")
    configs = {
        "kvquant-trace-fisher": ["--method", "kvquant"],
        "kvquant-trace-noF": ["--method", "kvquant", "--fisher", "none"],
        "dllm-kvq-trace": ["--method", "dllm-kvq"],
        "dllm-kvq-trace-nosens": ["--method", "dllm-kvq", "--no-sensitivity"],
    }
    # Finished runs are kept in partial.json and skipped on a rerun; the binary is copied first, so
    # a rebuild during the hour this takes cannot pull it away.
    partial = os.path.join(a.work, "partial.json")
    res = json.load(open(partial)) if os.path.exists(partial) else {}
    exe = os.path.join(a.work, "dllmq")
    shutil.copy2(a.dllmq, exe)
    for layers in (1, 2):
        d = os.path.join(a.work, "llada8b_shape_%dl" % layers)
        write_checkpoint(d, layers)
        weight_bytes = sum(os.path.getsize(os.path.join(d, x)) for x in os.listdir(d) if x.endswith(".safetensors"))
        for name, extra in configs.items():
            if "%s/%d" % (name, layers) in res:
                continue
            cmd = [exe, "calibrate", "-m", d, "--data", pairs, "--trajectory", "trace", "--cache", "dual",
                   "--gen-length", str(a.gen_length), "--block-length", str(a.block_length), "--steps", str(a.steps),
                   "--kv-bits", "2", "--threads", str(a.threads), "--out", os.path.join(a.work, "out.safetensors")] + extra
            r = run(cmd)
            r["weight_mib"] = weight_bytes / 2 ** 20
            res["%s/%d" % (name, layers)] = r
            with open(partial + ".tmp", "w") as f:
                json.dump(res, f, indent=1)
            os.replace(partial + ".tmp", partial)
            print("%-24s layers %d: wall %.1f s, CPU %.1f s, peak RSS %.0f MiB (weights %.0f MiB)" %
                  (name, layers, r["wall_s"], r["cpu_s"], r["rss_mib"], r["weight_mib"]), flush=True)
    # Extrapolation from CPU seconds: with --threads 1 they are the work done, which a machine shared
    # with other jobs distorts far less than wall time (both are kept in results.json).
    L = 32
    w8b = (D * V * 2 + L * (4 * D * D + 3 * D * F) + 2 * D) * 2 / 2 ** 20  # bf16 weights, MiB
    rows = []
    for name in configs:
        one, two = res[name + "/1"], res[name + "/2"]
        t1, t2 = one["cpu_s"] / a.pairs, two["cpu_s"] / a.pairs
        out = dict(cpu_1l=t1, cpu_2l=t2)
        if name == "dllm-kvq-trace":
            # The sensitivity pass (the difference to --no-sensitivity) replays the cached steps once
            # per layer, each replay costing a fixed share of a trajectory at that depth:
            # s(L) = L * share * base(L). Two points cannot fit a quadratic's two coefficients
            # through the noise; the share is taken at 2 layers (nearer 32 layers: a 1-layer
            # replay is dominated by the LM head), and the 1-layer share's figure is printed as the
            # upper end.
            b1 = res["dllm-kvq-trace-nosens/1"]["cpu_s"] / a.pairs
            b2 = res["dllm-kvq-trace-nosens/2"]["cpu_s"] / a.pairs
            base = b1 + (L - 1) * (b2 - b1)
            share1, share = (t1 - b1) / b1, (t2 - b2) / (2 * b2)
            out["sens_share_1l"], out["sens_share_2l"] = share1, share
            out["sens_32l"] = L * share * base
            out["cpu_s"] = base + out["sens_32l"]
            print("sensitivity pass: one layer's replay costs %.3f of a trajectory at 1 layer, %.3f at 2 "
                  "layers; with the 1-layer share 32 layers would take %.0f CPU s/pair" %
                  (share1, share, base + L * share1 * base))
        else:
            out["cpu_s"] = t1 + (L - 1) * (t2 - t1)
        per_layer_state = max(0.0, (two["rss_mib"] - two["weight_mib"]) - (one["rss_mib"] - one["weight_mib"]))
        out["rss_mib"] = w8b + (one["rss_mib"] - one["weight_mib"]) + (L - 1) * per_layer_state
        res["extrapolated/" + name] = out
        rows.append("| %s | %.1f | %.1f | %.0f | %.1f | %.0f |" % (
            name, t1, t2, out["cpu_s"], out["cpu_s"] * 128 / 3600, out["rss_mib"] / 1024))
    print("\n| method (trace, dual) | CPU s/pair, 1 layer | CPU s/pair, 2 layers | CPU s/pair, 32 layers "
          "(extrap.) | core-hours for 128 pairs | peak GiB (extrap.) |\n|---|---|---|---|---|---|")
    print("\n".join(rows))
    with open(os.path.join(a.work, "results.json"), "w") as f:
        json.dump(dict(prompt_length=P, args=vars(a), results=res), f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
