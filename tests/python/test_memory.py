#!/usr/bin/python3
"""Weights stay bf16 and memory-mapped: the peak RSS of a generate run on a ~200 MB bf16
checkpoint stays close to the checkpoint size (an f32 copy of the weights would triple it).

Usage: test_memory.py --dllmq BIN --workdir DIR   (last line: 'N passed, N failed')
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dllmq", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    model = os.path.join(a.workdir, "llada-200mb")
    if not os.path.exists(os.path.join(model, "config.json")):
        subprocess.check_call([sys.executable, os.path.join(HERE, "..", "..", "tools", "make_tiny_checkpoint.py"),
                               "--arch", "llada", "--out", model, "--d-model", "1024", "--layers", "6",
                               "--heads", "8", "--mlp", "2816", "--vocab", "16384", "--dtype", "bf16"],
                              stdout=subprocess.DEVNULL)
    weight_bytes = sum(os.path.getsize(os.path.join(model, f)) for f in os.listdir(model) if f.endswith(".safetensors"))
    out = subprocess.check_output([a.dllmq, "generate", "-m", model, "--prompt-ids", ",".join(str(i) for i in range(1, 65)),
                                   "--gen-length", "32", "--block-length", "32", "--steps", "4", "--cache", "dual",
                                   "--json"], stderr=subprocess.DEVNULL)
    rss = json.loads(out)["peak_rss_bytes"]
    limit = 1.25 * weight_bytes + 96 * 2**20
    ok = 0 < rss <= limit
    print(("PASS" if ok else "FAIL") + f" peak RSS {rss / 2**20:.1f} MiB for {weight_bytes / 2**20:.1f} MiB of bf16 weights"
          f" (limit {limit / 2**20:.1f} MiB; an f32 copy would need {3 * weight_bytes / 2**20:.1f} MiB)")
    print(f"{int(ok)} passed, {int(not ok)} failed")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
