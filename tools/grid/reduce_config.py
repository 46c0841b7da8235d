#!/usr/bin/python3
"""A grid config cut down in size: every calibration on its first CALIB_LIMIT pairs, every task
on its first LIMIT problems; data paths made absolute (so the config works from any directory).
Optionally only some models, cache modes and kv settings (calibrations no kept setting uses are
dropped).

    reduce_config.py configs/methods_synth.json --calib-limit 8 --limit 12 > reduced.json
    reduce_config.py configs/frontier_synth.json --calib-limit 3 --limit 4 \\
        --models synth-llada --kv fp16,kivi-2,kvquant-trace-2 > ci.json

Used for the Slurm-against-local measurement in docs/cluster.md and the CI sweeps.
"""
import argparse
import json
import os
import sys

ap = argparse.ArgumentParser()
ap.add_argument("config")
ap.add_argument("--calib-limit", type=int, required=True)
ap.add_argument("--limit", type=int, required=True)
ap.add_argument("--models", help="comma-separated: keep only these values of the model axis")
ap.add_argument("--caches", help="comma-separated: keep only these values of the cache axis")
ap.add_argument("--kv", help="comma-separated: keep only the kv settings of these names")
a = ap.parse_args()
root = os.path.dirname(os.path.abspath(a.config))
cfg = json.load(open(a.config))
base = os.path.dirname(root)  # the configs' data paths are relative to the repository root
grid = cfg.get("grid", {})


def keep_axis(axis, wanted):
    if not wanted:
        return
    names = wanted.split(",")
    vals = grid.get(axis, [])
    kept = [v for v in vals if (v.get("name") if isinstance(v, dict) else v) in names]
    missing = set(names) - {(v.get("name") if isinstance(v, dict) else v) for v in kept}
    if missing:
        sys.exit("reduce_config: no %s value named %s" % (axis, ", ".join(sorted(missing))))
    grid[axis] = kept


keep_axis("model", a.models)
if a.models and "quantize" in cfg:  # weight-quantized copies only for the models kept
    cfg["quantize"] = [q for q in cfg["quantize"] if q["out"] in grid["model"]]
keep_axis("cache", a.caches)
keep_axis("kv", a.kv)
if a.kv or a.caches:
    # A calibration stays if a kept kv setting (at a kept cache mode) names its artifact.
    used = set()
    for v in grid.get("kv", []):
        if not isinstance(v, dict):
            continue
        for s in v.values():
            if isinstance(s, str):
                for c in grid.get("cache", ["none"]):
                    used.add(s.replace("{cache}", c))
    cfg["calibrate"] = [c for c in cfg.get("calibrate", []) if c["out"] in used or any(
        c["out"] in arg for e in cfg.get("calibrate", []) if e["out"] in used for arg in e.get("args", []))]
for c in cfg.get("calibrate", []):
    args = list(c["args"])
    if "--limit" in args:
        args[args.index("--limit") + 1] = str(a.calib_limit)
    else:
        args += ["--limit", str(a.calib_limit)]
    if "--data" in args:
        i = args.index("--data") + 1
        args[i] = os.path.normpath(os.path.join(base, args[i]))
    c["args"] = args
for t in cfg["tasks"]:
    t["limit"] = a.limit
    t["data"] = os.path.normpath(os.path.join(base, t["data"]))
json.dump(cfg, sys.stdout, indent=1)
print()
