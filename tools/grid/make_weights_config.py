#!/usr/bin/python3
"""Writes configs/weights_synth.json: weight formats x KV caches x cache modes on both embedded
models (issue 34's grid; docs/results.md, "Weights x KV").

    make_weights_config.py > configs/weights_synth.json

- Weights: the stored bf16, int8 (per output channel) and int4 (groups of 128), both symmetric,
  as `dllmq quantize` writes them by default. The grid's "quantize" list makes the copies once
  ({out}/models/...), and its "model" axis runs them beside the originals.
- Caches: fp16, KIVI-4/2 (g32), KVQuant-4/2 (TRACE, Fisher, 1% outliers) and dLLM-KVQ-4/2 (TRACE,
  5% fp16 K channels), the defaults methods_synth.json names the same way; x {prefix, dual}.
- KVQuant and dLLM-KVQ are calibrated on each weight format's own model, as a user who quantizes
  the weights first would calibrate.
Each cell's grid.csv row carries weight_bytes, kv_bytes and their sum (total_bytes);
tools/grid/plot_weights.py draws accuracy against total bytes and writes the table.
"""
import json
import sys

CALIB = ["--data", "data/synth/validation.jsonl", "--chat", "--limit", "64", "--gen-length", "48",
         "--block-length", "16", "--threshold", "0.9", "--threads", "1"]
CACHES = ["prefix", "dual"]
MODELS = ["synth-llada", "synth-dream"]
WEIGHTS = [("int8", {}), ("int4", {"group": 128})]
BITS = [4, 2]


def quantized(model, fmt):
    return "{out}/models/%s-%s" % (model, fmt)


def main():
    quantize = [dict(out=quantized(m, f), model=m, weights=f, **extra) for m in MODELS for f, extra in WEIGHTS]
    calibrate = []
    for method in ("kvquant", "dllm-kvq"):
        for cache in CACHES:
            for b in BITS:
                calibrate.append({"out": "{out}/calib/{model}/%s-trace-%s-%d.safetensors" % (method, cache, b),
                                  "args": CALIB + ["--method", method, "--trajectory", "trace", "--cache", cache,
                                                   "--kv-bits", str(b)]})
    kv = [{"name": "fp16", "kv": "fp16"}]
    for b in BITS:
        kv.append({"name": "kivi-%d" % b, "kv": "kivi", "kv-bits": b})
        for method in ("kvquant", "dllm-kvq"):
            kv.append({"name": "%s-trace-%d" % (method, b), "kv": method,
                       "calib": "{out}/calib/{model}/%s-trace-{cache}-%d.safetensors" % (method, b)})
    models = [x for m in MODELS for x in [m] + [quantized(m, f) for f, _ in WEIGHTS]]
    cfg = {"out": "runs/weights-synth", "quantize": quantize, "calibrate": calibrate,
           "tasks": [{"task": "synth", "data": "data/synth/test.jsonl"}],
           "fixed": {"gen-length": 48, "block-length": 16, "threshold": 0.9},
           "grid": {"cache": CACHES, "kv": kv, "model": models},
           "args": ["--threads", "1"]}
    json.dump(cfg, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
