#!/usr/bin/python3
"""CI guard for the embedded models (issues 6 and 15): greedy dual-cache threshold decoding on the
first problems of the synthetic test set must stay within 5 points of the accuracy recorded in each
model's ci_guard.json (models/dllmq-synth-tiny: LLaDA, models/dllmq-synth-dream-tiny: Dream,
models/dllmq-synth-kshot: the LLaDA model fine-tuned on k-shot prompts, guarded on the k-shot test set
its ci_guard.json names as "data"). The eval runs select the models by their short names (-m
synth-llada, -m synth-dream, -m synth-llada-kshot).
Deterministic; fails if a change breaks decoding of either architecture.
Also runs the README's first command the way scripts/demo.sh does (no -m, no length flags: the
embedded LLaDA model and its generation_config.json lengths; for Dream `-m synth-dream`) and checks
that it answers the demo problem (its '#### ' line; the right number once ci_guard.json records
"demo_answer_correct").

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
# (short name, folder, -m for the demo: [] = the default model, None = no demo: the k-shot model is
# guarded on its own prompt format only)
MODELS = [("synth-llada", "dllmq-synth-tiny", []), ("synth-dream", "dllmq-synth-dream-tiny", ["-m", "synth-dream"]),
          ("synth-llada-kshot", "dllmq-synth-kshot", None)]


def guard_accuracy(dllmq, workdir, short, guard):
    out = os.path.join(workdir, "run-" + short)
    shutil.rmtree(out, ignore_errors=True)
    cmd = [dllmq, "eval", "--task", "synth", "-m", short, "--out", out, "--limit", str(guard["limit"]),
           "--json"] + guard["flags"]
    if "data" in guard:  # repository-relative test set
        cmd += ["--data", os.path.join(ROOT, guard["data"])]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        print(f"FAIL {short}: {' '.join(cmd[1:])} exited {run.returncode}: {run.stderr.strip()[-300:]}")
        return False
    res = json.loads(run.stdout.strip().splitlines()[-1])
    acc = res[guard["metric"]]
    floor = guard["accuracy"] - 0.05
    ok = res["n"] == guard["limit"] and acc >= floor
    print(("PASS" if ok else "FAIL") + f" {short} synth {guard['metric']} {acc:.3f} on {res['n']} problems with "
          f"{' '.join(guard['flags'])} (recorded {guard['accuracy']:.3f}, floor {floor:.3f})")
    return ok


def demo(dllmq, short, model, m_args, guard):
    """The demo: lengths from generation_config.json, the demo's decoding flags."""
    env = {k: v for k, v in os.environ.items() if k != "DLLMQ_MODEL"}
    gen_cfg = json.load(open(os.path.join(model, "generation_config.json")))
    run = subprocess.run([dllmq, "generate"] + m_args + ["--chat", "-p", DEMO_PROMPT, "--cache", "dual",
                                                         "--threshold", "0.9", "--json"],
                         env=env, capture_output=True, text=True)
    # The answer must be right once the model card records that it is (ci_guard.json).
    want = f"#### {DEMO_ANSWER}" if guard.get("demo_answer_correct") else "#### "
    ok = run.returncode == 0
    if ok:
        out = json.loads(run.stdout)
        ok = len(out["tokens"]) == gen_cfg["max_new_tokens"] and want in out["text"]
        detail = f"{len(out['tokens'])} tokens, text {out['text']!r}"
    else:
        detail = f"exit {run.returncode}: {run.stderr.strip()[-300:]}"
    how = " ".join(m_args) or "default model"
    print(("PASS" if ok else "FAIL") + f" {short} demo problem ({how}; expects {want!r}, "
          f"{gen_cfg['max_new_tokens']} tokens): {detail}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dllmq", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    results = []
    for short, folder, m_args in MODELS:
        model = os.path.join(ROOT, "models", folder)
        guard = json.load(open(os.path.join(model, "ci_guard.json")))
        results.append(guard_accuracy(a.dllmq, a.workdir, short, guard))
        if m_args is not None:
            results.append(demo(a.dllmq, short, model, m_args, guard))
    n_ok = sum(results)
    print(f"{n_ok} passed, {len(results) - n_ok} failed")
    sys.exit(0 if n_ok == len(results) else 1)


if __name__ == "__main__":
    main()
