#!/usr/bin/python3
"""CI guard for the embedded model (issue 6): greedy dual-cache threshold decoding on the first
problems of the synthetic test set must stay within 5 points of the accuracy recorded in
models/dllmq-synth-tiny/ci_guard.json. Deterministic; fails if a change breaks decoding.

Usage: test_synth_model.py --dllmq BIN --workdir DIR   (last line: 'N passed, N failed')
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dllmq", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    model = os.path.join(ROOT, "models", "dllmq-synth-tiny")
    guard = json.load(open(os.path.join(model, "ci_guard.json")))
    out = os.path.join(a.workdir, "run")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(a.workdir, exist_ok=True)
    cmd = [a.dllmq, "eval", "--task", "synth", "-m", model, "--out", out, "--limit", str(guard["limit"]),
           "--json"] + guard["flags"]
    res = json.loads(subprocess.check_output(cmd, stderr=subprocess.DEVNULL).decode().strip().splitlines()[-1])
    acc = res[guard["metric"]]
    floor = guard["accuracy"] - 0.05
    ok = res["n"] == guard["limit"] and acc >= floor
    print(("PASS" if ok else "FAIL") + f" synth {guard['metric']} {acc:.3f} on {res['n']} problems with "
          f"{' '.join(guard['flags'])} (recorded {guard['accuracy']:.3f}, floor {floor:.3f})")
    print(f"{int(ok)} passed, {int(not ok)} failed")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
