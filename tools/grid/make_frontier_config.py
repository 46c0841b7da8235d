#!/usr/bin/python3
"""Writes configs/frontier_synth.json: every KV method swept along its own knob on both embedded
models under the prefix and the dual cache (docs/eval.md, "Frontier and paired statistics").

    make_frontier_config.py > configs/frontier_synth.json
    make_frontier_config.py --regime long > configs/frontier_kshot.json   (the k-shot model)

- fp16 (the ceiling);
- KIVI: group 16, 32, 64, 128 x bits 2, 3, 4;
- KVQuant (TRACE, Fisher): bits 2, 3, 4 x outlier percent 0.5, 1, 2;
- dLLM-KVQ (TRACE) on the KIVI base and on the KVQuant base (--kv-base kvquant, the 1% KVQuant
  artifact of the same bits and cache mode): fp16 K-channel budget 0, 2, 5, 10, 20% x bits 2, 4.
A method's default setting (KIVI g32, KVQuant 1%, dLLM-KVQ 5%) at 4 and 2 bits keeps the name
methods_synth.json gives it ("kivi-2"); the other cells are named "<method>@<setting>-<bits>",
so the grid's paper-form average uses the defaults and the frontier every cell.
"""
import json
import sys

CALIB = ["--data", "data/synth/validation.jsonl", "--chat", "--limit", "64", "--gen-length", "48",
         "--block-length", "16", "--threshold", "0.9", "--threads", "1"]
CACHES = ["prefix", "dual"]
KIVI_GROUPS = [16, 32, 64, 128]
BITS = [4, 3, 2]
OUTLIERS = [0.5, 1, 2]
BUDGETS = [0, 0.02, 0.05, 0.1, 0.2]
DLLM_BITS = [4, 2]


def pct(x):
    return ("%g" % (100 * x)).replace(".", "p")


def kvq_art(cache, b, o):
    return "{out}/calib/{model}/kvquant-trace-%s-%d-o%s.safetensors" % (cache, b, ("%g" % o).replace(".", "p"))


def dllm_art(base, cache, b, h):
    return "{out}/calib/{model}/dllm-kvq-%strace-%s-%d-h%s.safetensors" % (
        "" if base == "kivi" else "kvquant-", cache, b, pct(h))


# The long regime (issue 30): k-shot prompts of 700-800 tokens (training/make_kshot.py --suffix
# _kshot_long: the top of the 400-800 the model was trained on, where KIVI-2 comes within 0.5 bits
# of its 1,024-row figure in both cache modes) on the
# k-shot fine-tune of the LLaDA model, calibrated on the k-shot validation split. A k-shot problem
# costs ~20x a short one, so this regime sweeps the methods' defaults at 4/3/2 bits (the paper-form
# cells) and KIVI's group size, not every knob.
LONG = {"out": "runs/frontier-kshot", "test": "data/synth/test_kshot_long.jsonl",
        "calib_data": "data/synth/validation_kshot_long.jsonl", "models": ["synth-llada-kshot"]}


def long_regime():
    calib = list(CALIB)
    calib[calib.index("--data") + 1] = LONG["calib_data"]
    calibrate, kv = [], [{"name": "fp16", "kv": "fp16"}]
    for b in BITS:
        for g in (32, 128):
            kv.append({"name": "kivi-%d" % b if g == 32 and b != 3 else "kivi@g%d-%d" % (g, b), "kv": "kivi",
                       "kv-bits": b, "kv-group": g})
    for b in BITS:
        for cache in CACHES:
            calibrate.append({"out": kvq_art(cache, b, 1), "args": calib + [
                "--method", "kvquant", "--trajectory", "trace", "--cache", cache, "--kv-bits", str(b),
                "--outlier-percent", "1"]})
            calibrate.append({"out": dllm_art("kivi", cache, b, 0.05), "args": calib + [
                "--method", "dllm-kvq", "--trajectory", "trace", "--cache", cache, "--kv-bits", str(b),
                "--budget", "0.05"]})
        # named as in the short regime's config (a 3-bit cell is not a paper-form default)
        kv.append({"name": "kvquant-trace-%d" % b if b != 3 else "kvquant-trace@o1-3", "kv": "kvquant",
                   "calib": kvq_art("{cache}", b, 1)})
        kv.append({"name": "dllm-kvq-trace-%d" % b if b != 3 else "dllm-kvq-trace@h5-3", "kv": "dllm-kvq",
                   "calib": dllm_art("kivi", "{cache}", b, 0.05)})
    return {"out": LONG["out"], "calibrate": calibrate,
            "tasks": [{"task": "synth", "data": LONG["test"]}],
            "fixed": {"gen-length": 48, "block-length": 16, "threshold": 0.9},
            "grid": {"cache": CACHES, "kv": kv, "model": LONG["models"]},
            "args": ["--threads", "1"]}


def main():
    if "--regime" in sys.argv and sys.argv[sys.argv.index("--regime") + 1] == "long":
        json.dump(long_regime(), sys.stdout, indent=1)
        print()
        return
    calibrate = []
    for cache in CACHES:
        for b in BITS:
            for o in OUTLIERS:
                calibrate.append({"out": kvq_art(cache, b, o), "args": CALIB + [
                    "--method", "kvquant", "--trajectory", "trace", "--cache", cache, "--kv-bits", str(b),
                    "--outlier-percent", "%g" % o]})
    for base in ("kivi", "kvquant"):
        for cache in CACHES:
            for b in DLLM_BITS:
                for h in BUDGETS:
                    args = CALIB + ["--method", "dllm-kvq", "--trajectory", "trace", "--cache", cache,
                                    "--kv-bits", str(b), "--budget", "%g" % h]
                    if base == "kvquant":
                        args += ["--kv-base", "kvquant", "--kv-base-calib", kvq_art(cache, b, 1)]
                    calibrate.append({"out": dllm_art(base, cache, b, h), "args": args})
    kv = [{"name": "fp16", "kv": "fp16"}]
    for b in BITS:
        for g in KIVI_GROUPS:
            name = "kivi-%d" % b if g == 32 and b != 3 else "kivi@g%d-%d" % (g, b)
            kv.append({"name": name, "kv": "kivi", "kv-bits": b, "kv-group": g})
    for b in BITS:
        for o in OUTLIERS:
            name = "kvquant-trace-%d" % b if o == 1 and b != 3 else "kvquant-trace@o%s-%d" % (
                ("%g" % o).replace(".", "p"), b)
            kv.append({"name": name, "kv": "kvquant", "calib": kvq_art("{cache}", b, o)})
    for base in ("kivi", "kvquant"):
        fam = "dllm-kvq-trace" if base == "kivi" else "dllm-kvq-kvquant-trace"
        for b in DLLM_BITS:
            for h in BUDGETS:
                name = "%s-%d" % (fam, b) if h == 0.05 else "%s@h%s-%d" % (fam, pct(h), b)
                e = {"name": name, "kv": "dllm-kvq", "calib": dllm_art(base, "{cache}", b, h)}
                if base == "kvquant":
                    e["kv-base"] = "kvquant"
                    e["kv-base-calib"] = kvq_art("{cache}", b, 1)
                kv.append(e)
    cfg = {"out": "runs/frontier-synth", "calibrate": calibrate,
           "tasks": [{"task": "synth", "data": "data/synth/test.jsonl"}],
           "fixed": {"gen-length": 48, "block-length": 16, "threshold": 0.9},
           "grid": {"cache": CACHES, "kv": kv, "model": ["synth-llada", "synth-dream"]},
           "args": ["--threads", "1"]}
    json.dump(cfg, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
