#!/usr/bin/python3
"""End-to-end decoding speed of each KV store side by side (issue: quantized stores >= 0.9x fp16).

    /usr/bin/python3 bench/kv_e2e.py -m MODEL --calib2 K2.safetensors --calib4 K4.safetensors \
        [--prompt-length 1024] [--gen-length 128] [--block-length 32] [--cache dual] \
        [--rounds 3] [--threads 2] [--dllmq build/dllmq] [--out OUT.json]

Stores are run in alternation (round r runs every store once) so machine noise hits them alike;
each store's best round is reported with its ratio to fp16. Every run is `dllmq bench --json`
(one mode, one generate timed, model loading excluded). Also prints the OpenMP thread count and
the load average before each run, so a busy machine shows.
"""
import argparse
import json
import os
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--calib2")
    ap.add_argument("--calib4")
    ap.add_argument("--prompt-length", type=int, default=1024)
    ap.add_argument("--gen-length", type=int, default=128)
    ap.add_argument("--block-length", type=int, default=32)
    ap.add_argument("--cache", default="dual")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dllmq", default="build/dllmq")
    ap.add_argument("--out")
    a = ap.parse_args()
    stores = [("fp32", ["--kv", "fp32"]), ("fp16", ["--kv", "fp16"]),
              ("kivi-4", ["--kv", "kivi", "--kv-bits", "4"]),
              ("kivi-2", ["--kv", "kivi", "--kv-bits", "2"])]
    if a.calib4:
        stores.append(("kvquant-4", ["--kv", "kvquant", "--calib", a.calib4]))
    if a.calib2:
        stores.append(("kvquant-2", ["--kv", "kvquant", "--calib", a.calib2]))
    best = {}
    for r in range(a.rounds):
        for name, flags in stores:
            cmd = [a.dllmq, "bench", "-m", a.model, "--prompt-length", str(a.prompt_length),
                   "--gen-length", str(a.gen_length), "--block-length", str(a.block_length),
                   "--modes", a.cache, "--threads", str(a.threads), "--json"] + flags
            load = open("/proc/loadavg").read().split()[:3]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"{name}: {out.stderr}")
            row = json.loads(out.stdout)["modes"][0]
            row["peak_rss_bytes"] = json.loads(out.stdout)["peak_rss_bytes"]
            print(f"round {r} {name:10s} {row['tokens_per_s']:8.2f} tok/s  load {' '.join(load)}",
                  file=sys.stderr)
            if name not in best or row["tokens_per_s"] > best[name]["tokens_per_s"]:
                best[name] = row
    base = best["fp16"]["tokens_per_s"]
    print(f"| store | tokens/s | vs fp16 | KV bytes | KV bits K/V | peak RSS MiB |")
    print(f"|---|---|---|---|---|---|")
    for name, _ in stores:
        b = best[name]
        print(f"| {name} | {b['tokens_per_s']:.2f} | {b['tokens_per_s'] / base:.2f} | "
              f"{b['kv_bytes']} | {b['kv_bits_effective_k']:.2f} / {b['kv_bits_effective_v']:.2f} | "
              f"{b['peak_rss_bytes'] / 2**20:.1f} |")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"args": vars(a), "best": best}, f, indent=1)


if __name__ == "__main__":
    main()
