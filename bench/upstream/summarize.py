#!/usr/bin/env python3
"""Summarize a compare.sh output dir: median tok/s per mode for dllmq and upstream, ratio, NFE,
token agreement. Prints a markdown table.

tok/s = generated tokens / median wall seconds of the generate call. CPU s = median process CPU
seconds (user+sys): dllmq's is the whole process (model load included, well under 1 s), upstream's
is the generate call alone. Ratios are upstream / dllmq time (> 1: dllmq faster)."""
import glob
import json
import os
import re
import statistics
import sys

out = sys.argv[1]
rows = {}
for path in sorted(glob.glob(os.path.join(out, "*_*_*.json"))):
    m = re.match(r"(dllmq|up)_(\w+)_(\d+)\.json$", os.path.basename(path))
    if not m:
        continue
    impl, mode, rep = m.group(1), m.group(2), int(m.group(3))
    try:
        j = json.load(open(path))
    except ValueError:
        continue  # unfinished run
    if impl == "dllmq":
        rec = {"tokens": j["tokens"], "nfe": j["nfe"], "time_s": j["time_s"]}
        tf = path[:-5] + ".time"
        if os.path.exists(tf):
            u, s, _ = open(tf).read().split()[-3:]
            rec["cpu_s"] = float(u) + float(s)  # whole process (includes model load)
    else:
        r = j["modes"][0]
        rec = {"tokens": r["tokens"], "nfe": r["nfe"], "time_s": r["time_s"], "cpu_s": r["cpu_s"]}
    rows.setdefault(mode, {}).setdefault(impl, {})[rep] = rec

print("| mode | dllmq tok/s | upstream tok/s | ratio (dllmq/upstream) | dllmq CPU s | upstream CPU s "
      "| CPU ratio | NFE (dllmq / upstream) | tokens agree? | runs |")
print("|---|---|---|---|---|---|---|---|---|---|")
for mode in ["none", "prefix", "dual"]:
    if mode not in rows:
        continue
    d, u = rows[mode].get("dllmq", {}), rows[mode].get("up", {})
    if not d or not u:
        continue
    gen = len(next(iter(d.values()))["tokens"])
    dt = statistics.median(r["time_s"] for r in d.values())
    ut = statistics.median(r["time_s"] for r in u.values())
    dc = [r["cpu_s"] for r in d.values() if "cpu_s" in r]
    uc = [r["cpu_s"] for r in u.values()]
    toks = [r["tokens"] for r in list(d.values()) + list(u.values())]
    agree = all(t == toks[0] for t in toks)
    if not agree:
        ref = next(iter(d.values()))["tokens"]
        diff = [sum(a != b for a, b in zip(ref, r["tokens"])) for r in u.values()]
        agree_s = f"no ({diff} of {gen} differ)"
    else:
        agree_s = "yes"
    nfe = f"{sorted({r['nfe'] for r in d.values()})} / {sorted({r['nfe'] for r in u.values()})}"
    dcm = statistics.median(dc) if dc else float("nan")
    ucm = statistics.median(uc)
    print(f"| {mode} | {gen / dt:.2f} | {gen / ut:.2f} | {ut / dt:.2f}x | "
          f"{dcm:.1f} | {ucm:.1f} | {ucm / dcm:.2f}x | {nfe} | {agree_s} | "
          f"{len(d)} / {len(u)} |")
print()
print("Per run wall seconds (dllmq | upstream):")
for mode in ["none", "prefix", "dual"]:
    if mode in rows:
        d, u = rows[mode].get("dllmq", {}), rows[mode].get("up", {})
        print(f"- {mode}: " + ", ".join(f"{d[k]['time_s']:.1f}" for k in sorted(d)) + " | "
              + ", ".join(f"{u[k]['time_s']:.1f}" for k in sorted(u)))
