#!/usr/bin/python3
"""Times `dllmq eval --task math` on 5,000 responses made from the MATH test golds (the whole
test set): 40% the gold answer, 30% an equivalent rewrite, 20% a wrong answer, 10% empty or
malformed. Prints the scores and the wall time of the scoring run.

    tools/eval/time_math_scoring.py [--dllmq build/dllmq] [--data ../shared/data] [--workers 2]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import math_equiv as me  # noqa: E402  (the boxed-answer helpers, no sympy needed)


def response(k, gold):
    r = k % 10
    if r < 4:
        ans = gold
    elif r < 7:
        ans = ["x = " + gold, gold.replace("\\frac", "\\dfrac"), " %s " % gold][r - 4]
    elif r < 9:
        ans = gold + "+1" if r == 7 else "0"
    else:
        return "" if k % 20 == 9 else "Final Answer: The final answer is $\\frac{1}{$"
    return "So we are done.\nFinal Answer: The final answer is $%s$. I hope it is correct." % ans


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dllmq", default=os.path.join(ROOT, "build", "dllmq"))
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data"))
    ap.add_argument("--workers", default="2")
    a = ap.parse_args()
    path = os.path.join(a.data, "math", "test.jsonl")
    docs = [json.loads(x) for x in open(path, encoding="utf-8") if x.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        resp = os.path.join(tmp, "responses.jsonl")
        with open(resp, "w") as f:
            for k, d in enumerate(docs):
                gold = me.remove_boxed(me.last_boxed_only_string(d["solution"])).replace("\n", " ")
                f.write(json.dumps({"task_id": k, "response": response(k, gold)}) + "\n")
        t0 = time.time()
        p = subprocess.run([a.dllmq, "eval", "--task", "math", "--data", path, "--responses", resp,
                            "--json", "--workers", a.workers], capture_output=True, text=True)
        dt = time.time() - t0
    if p.returncode != 0:
        sys.exit(p.stderr[-2000:])
    s = json.loads(p.stdout)
    print(json.dumps({k: s[k] for k in ("n", "exact_match", "math_verify", "string_equiv")}))
    print("scored %d MATH responses in %.1f s with %s helper processes (%.1f ms per response)"
          % (s["n"], dt, a.workers, 1000 * dt / s["n"]))


if __name__ == "__main__":
    main()
