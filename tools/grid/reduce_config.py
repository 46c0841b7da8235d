#!/usr/bin/python3
"""A grid config cut down in size, same methods, bits, cache modes and models: every calibration
on its first CALIB_LIMIT pairs, every task on its first LIMIT problems; data paths made absolute
(so the config works from any directory).

    reduce_config.py configs/methods_synth.json --calib-limit 8 --limit 12 > reduced.json

Used for the Slurm-against-local measurement in docs/cluster.md.
"""
import argparse
import json
import os
import sys

ap = argparse.ArgumentParser()
ap.add_argument("config")
ap.add_argument("--calib-limit", type=int, required=True)
ap.add_argument("--limit", type=int, required=True)
a = ap.parse_args()
root = os.path.dirname(os.path.abspath(a.config))
cfg = json.load(open(a.config))
base = os.path.dirname(root)  # the configs' data paths are relative to the repository root
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
