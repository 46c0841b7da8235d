#!/usr/bin/python3
"""The method comparison (configs/methods_synth.json, METHODS.md §5) end to end at a small size.

    test_methods_grid.py --dllmq build/dllmq --workdir DIR

Rewrites the shipped grid config to 3 calibration pairs per artifact and 4 test problems per
cell (same methods, bits and cache modes), runs `dllmq grid` on the embedded model, and checks:
every calibration artifact was made and loads in `calib-report`, every cell ran, the table has
all 26 cells of both embedded models (synth-llada, synth-dream: the grid's "model" axis, one set
of artifacts per model) and their averages, effective bits fall as bits fall, and grid.png was
drawn.
Then reruns the grid and checks finished cells and artifacts are skipped.
Last line "N passed, N failed".
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results import Results  # noqa: E402


def small_config(work):
    cfg = json.load(open(os.path.join(ROOT, "configs", "methods_synth.json")))
    out = os.path.join(work, "grid")
    cal = os.path.join(work, "calib")
    for c in cfg["calibrate"]:
        args = list(c["args"])
        args[args.index("--limit") + 1] = "3"
        c["args"] = args
        c["out"] = c["out"].replace("{out}/calib", cal)
    for b in cfg["grid"]["kv"]:
        if "calib" in b:
            b["calib"] = b["calib"].replace("{out}/calib", cal)
    cfg["out"] = out
    cfg["tasks"][0]["limit"] = 4
    cfg["tasks"][0]["data"] = os.path.join(ROOT, cfg["tasks"][0]["data"])
    for c in cfg["calibrate"]:
        i = c["args"].index("--data")
        c["args"][i + 1] = os.path.join(ROOT, c["args"][i + 1])
    path = os.path.join(work, "grid.json")
    json.dump(cfg, open(path, "w"), indent=1)
    return cfg, path


def check_benchmarks_config(a, res):
    """configs/methods_benchmarks.json (the four benchmarks, for a model you give): refused
    without -m; with -m and --out, every calibration and cell command names that model and
    puts its artifacts under that run directory (dry run: nothing is computed)."""
    path = os.path.join(ROOT, "configs", "methods_benchmarks.json")
    r = subprocess.run([a.dllmq, "grid", "--config", path, "--dry-run"], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    res.check("benchmarks grid needs -m", r.returncode != 0 and "-m MODEL_DIR" in r.stderr, r.stderr[-200:])
    out = os.path.join(a.workdir, "bench-dry")
    r = subprocess.run([a.dllmq, "grid", "--config", path, "--dry-run", "-m", "/models/LLaDA-8B-Instruct",
                        "--out", out], capture_output=True, text=True, timeout=120, cwd=ROOT)
    lines = [l for l in r.stderr.splitlines() if l.startswith("dllmq grid: ")]
    cal = [l for l in lines if " calibrate " in l or l.startswith("dllmq grid: calibrate")]
    ev = [l for l in lines if l.startswith("dllmq grid: eval")]
    ok = (r.returncode == 0 and len(cal) == 16 and len(ev) == 4 * 26
          and all("--model /models/LLaDA-8B-Instruct" in l for l in cal + ev)
          and all((out + "/calib/") in l for l in cal)
          and all("{out}" not in l for l in lines)
          and all("--task gsm8k" in l for l in cal))
    res.check("benchmarks grid dry run: 16 calibrations + 4 tasks x 26 cells for the given model", ok,
              "rc=%d, %d calibrations, %d evals; %s" % (r.returncode, len(cal), len(ev), r.stderr[-300:]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dllmq", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    # A fresh grid each time: the workdir outlives the run, and a grid resumes what it finds.
    for d in ("grid", "calib", "bench-dry"):
        shutil.rmtree(os.path.join(a.workdir, d), ignore_errors=True)
    res = Results()
    cfg, path = small_config(a.workdir)
    run = subprocess.run([a.dllmq, "grid", "--config", path], capture_output=True, text=True,
                         timeout=3000)
    res.check("grid-runs", run.returncode == 0, run.stderr[-800:] if run.returncode else "")
    models = cfg["grid"]["model"]
    for c in cfg["calibrate"]:
        for model in models:  # one artifact per model
            out = c["out"].replace("{model}", model)
            ok = os.path.exists(out)
            rep = subprocess.run([a.dllmq, "calib-report", out], capture_output=True, text=True)
            res.check("calibrated %s/%s" % (model, os.path.basename(out)), ok and rep.returncode == 0,
                      rep.stderr[-300:])
    # The heat map of one dLLM-KVQ artifact: a real PNG of a readable size (matplotlib draws it).
    dk = [c["out"].replace("{model}", models[0]) for c in cfg["calibrate"] if "dllm" in c["out"]]
    if dk and os.path.exists(dk[0]):
        png = os.path.join(a.workdir, "heatmap.png")
        rep = subprocess.run([a.dllmq, "calib-report", dk[0], "--png", png], capture_output=True,
                             text=True)
        head = open(png, "rb").read(24) if os.path.exists(png) else b""
        w, h = struct.unpack(">II", head[16:24]) if len(head) == 24 else (0, 0)
        res.check("calib-report-png", rep.returncode == 0 and head[:8] == b"\x89PNG\r\n\x1a\n"
                  and w >= 400 and h >= 300 and os.path.getsize(png) > 10000,
                  "%dx%d %s" % (w, h, rep.stderr[-300:]))
    else:
        res.check("calib-report-png", False, "no dllm-kvq artifact in the small grid")
    md = open(os.path.join(cfg["out"], "grid.md")).read() if os.path.exists(
        os.path.join(cfg["out"], "grid.md")) else ""
    names = [b["name"] for b in cfg["grid"]["kv"]]
    for cache in cfg["grid"]["cache"]:
        for n in names:
            for model in models:
                label = f"cache={cache},kv={n},model={model}"
                res.check("cell " + label, f"| synth | {label} |" in md and f"| average | {label} |" in md)
    rows = list(open(os.path.join(cfg["out"], "grid.csv")))[1:] if os.path.exists(
        os.path.join(cfg["out"], "grid.csv")) else []
    header = open(os.path.join(cfg["out"], "grid.csv")).readline().strip().split(",") if rows else []
    bits = {}
    for r in rows:
        f = r.strip().split(",")
        d = dict(zip(header, f))
        bits[(d.get("cache"), d.get("kv"), d.get("model"))] = \
            float(d["effective_bits"]) if d.get("effective_bits") else None
    for model in models:
        for cache in cfg["grid"]["cache"]:
            for m in ("kivi", "kvquant-ar", "dllm-kvq-trace"):
                b4, b2 = bits.get((cache, f"{m}-4", model)), bits.get((cache, f"{m}-2", model))
                res.check(f"bits {model}/{cache}/{m}: 2-bit below 4-bit below fp16",
                          b4 is not None and b2 is not None and b2 < b4 < bits.get((cache, "fp16", model), 0),
                          f"{b2} / {b4}")
    png = os.path.join(cfg["out"], "grid.png")
    res.check("grid.png", os.path.exists(png) and os.path.getsize(png) > 10000)
    again = subprocess.run([a.dllmq, "grid", "--config", path], capture_output=True, text=True,
                           timeout=600)
    res.check("rerun skips finished work",
              again.returncode == 0 and "not recalibrated" in again.stderr, again.stderr[-300:])
    for cache in cfg["grid"]["cache"]:
        label = f"cache={cache},kv=kivi-2,model={models[0]}"
        row = [l for l in md.splitlines() if l.startswith(f"| synth | {label} |")]
        cells = row[0].split("|") if row else []
        res.check("grid.md row has effective bits and KV bytes " + label,
                  len(cells) == 10 and float(cells[5]) > 0 and int(cells[6]) > 0, row[:1])
    check_benchmarks_config(a, res)
    print(f"{res.passed} passed, {res.failed} failed")
    return 1 if res.failed else 0


if __name__ == "__main__":
    sys.exit(main())
