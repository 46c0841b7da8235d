#!/usr/bin/python3
"""CI guard for the embedded model (issue 6): greedy dual-cache threshold decoding on the first
problems of the synthetic test set must stay within 5 points of the accuracy recorded in
models/dllmq-synth-tiny/ci_guard.json. Deterministic; fails if a change breaks decoding.
Also runs the README's first command the way scripts/demo.sh does (no -m, no length flags: the
embedded model and its generation_config.json lengths) and checks that it answers the demo problem
(its '#### ' line; the right number once ci_guard.json records "demo_answer_correct").

Usage: test_synth_model.py --dllmq BIN --workdir DIR   (last line: 'N passed, N failed')
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

# scripts/demo.sh's default prompt: 23 + 14 = 37, 37 - 9 = 28.
DEMO_PROMPT = ("Mia has 23 marbles. She buys 14 more marbles. Then she gives away 9 marbles. "
               "How many marbles does Mia have now?")
DEMO_ANSWER = 28
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

    # The demo: default model, lengths from generation_config.json, the demo's decoding flags.
    env = {k: v for k, v in os.environ.items() if k != "DLLMQ_MODEL"}
    gen_cfg = json.load(open(os.path.join(model, "generation_config.json")))
    demo = subprocess.run([a.dllmq, "generate", "--chat", "-p", DEMO_PROMPT, "--cache", "dual", "--threshold", "0.9",
                           "--json"], env=env, capture_output=True, text=True)
    # The answer must be right once the model card records that it is (ci_guard.json).
    want = f"#### {DEMO_ANSWER}" if guard.get("demo_answer_correct") else "#### "
    demo_ok = demo.returncode == 0
    if demo_ok:
        out = json.loads(demo.stdout)
        demo_ok = len(out["tokens"]) == gen_cfg["max_new_tokens"] and want in out["text"]
        detail = f"{len(out['tokens'])} tokens, text {out['text']!r}"
    else:
        detail = f"exit {demo.returncode}: {demo.stderr.strip()[-300:]}"
    print(("PASS" if demo_ok else "FAIL") + f" demo problem (expects {want!r}, "
          f"{gen_cfg['max_new_tokens']} tokens): {detail}")
    n_ok = int(ok) + int(demo_ok)
    print(f"{n_ok} passed, {2 - n_ok} failed")
    sys.exit(0 if n_ok == 2 else 1)


if __name__ == "__main__":
    main()
