#!/usr/bin/python3
"""The long-prompt synth splits of issue 30 (data/synth/{test,validation}_kshot.jsonl, written by
training/make_kshot.py) are what they claim to be, and they put the cache in the long regime:

- row i is row i of the short split (same answer) preceded by 4-8 solved problems, and no shot is a
  test or validation question (shots come from the train split only);
- every prompt has 400-800 tokens under the embedded LLaDA model's chat template. The counts in the
  files were recorded with HF `tokenizers` when the files were written; `dllmq tokenize` must give
  the same counts (an independent check of the tokenizer on long inputs, too);
- KIVI-2 (group 32) on these prompts holds within 0.5 bits of the 3.0 effective bits that the same
  store holds at 1,024 cached rows in LLaDA-8B geometry (docs/results.md, "Memory at 1,024 cached
  rows"), which the ~90-row short prompts miss by 2-4 bits: with the dual cache on the 400-800-token
  files, and with both caches on the 700-800-token ones (the frontier's long regime,
  {test,validation}_kshot_long.jsonl; the prefix cache holds fewer rows than the dual one).

Usage: test_kshot_data.py --dllmq BIN --workdir DIR   (last line: 'N passed, N failed')
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results import Results, run_all  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DATA = os.path.join(ROOT, "data", "synth")
KIVI2_AT_1024_ROWS = 3.0


def load(name):
    with open(os.path.join(DATA, name)) as f:
        return [json.loads(line) for line in f if line.strip()]


def shot_questions(question):
    """The shots' questions: every 'Question: ...' paragraph except the last (the asked one)."""
    parts = question.split("Question: ")[1:]
    return [p.split("\nAnswer: ")[0] for p in parts[:-1]], parts[-1]


def check_split(R, split, held_out, suffix="_kshot", lo=400, hi=800):
    base, long = load(f"{split}.jsonl"), load(f"{split}{suffix}.jsonl")
    split = split + suffix
    R.check(f"{split}/row count", len(long) == len(base), f"{len(long)} vs {len(base)}")
    bad_tail, bad_answer, bad_shots, leaked, bad_len = [], [], [], [], []
    for i, (b, r) in enumerate(zip(base, long)):
        shots, asked = shot_questions(r["question"])
        if asked != b["question"]:
            bad_tail.append(i)
        if r["answer"] != b["answer"]:
            bad_answer.append(i)
        if not 4 <= len(shots) <= 8 or len(shots) != r["shots"]:
            bad_shots.append(i)
        if any(s in held_out for s in shots):
            leaked.append(i)
        if not lo <= r["prompt_tokens"] <= hi:
            bad_len.append(i)
    R.check(f"{split}/asked question is the short split's", not bad_tail, str(bad_tail[:5]))
    R.check(f"{split}/answers unchanged", not bad_answer, str(bad_answer[:5]))
    R.check(f"{split}/4-8 shots, as recorded", not bad_shots, str(bad_shots[:5]))
    R.check(f"{split}/no shot is a test or validation question", not leaked, str(leaked[:5]))
    R.check(f"{split}/{lo}-{hi} prompt tokens recorded", not bad_len, str(bad_len[:5]))
    return long


def check_token_counts(R, dllmq, rows, label="test"):
    """dllmq's tokenizer + chat template against the counts HF tokenizers recorded."""
    step = max(1, len(rows) // 12)
    for i in range(0, len(rows), step):
        r = rows[i]
        p = subprocess.run([dllmq, "tokenize", "-m", "synth-llada", "--chat", "--text", r["question"], "--json"],
                           capture_output=True, text=True)
        n = json.loads(p.stdout)["n_tokens"] if p.returncode == 0 else None
        R.check(f"tokens/{label} row {i}", n == r["prompt_tokens"], f"dllmq {n}, recorded {r['prompt_tokens']}")


def check_regime(R, dllmq, work, name, cache):
    out = os.path.join(work, f"kivi2-{name}-{cache}")
    shutil.rmtree(out, ignore_errors=True)
    p = subprocess.run([dllmq, "eval", "--task", "synth", "--data", os.path.join(DATA, f"{name}.jsonl"),
                        "--limit", "3", "--cache", cache, "--threshold", "0.9", "--kv", "kivi", "--kv-bits", "2",
                        "--out", out, "--json"], capture_output=True, text=True)
    if p.returncode != 0:
        R.check(f"regime/{name}/{cache}: eval runs", False, p.stderr[-300:])
        return
    s = json.loads(p.stdout.strip().splitlines()[-1])
    bits = s["kv_bits_effective"]
    R.check(f"regime/{name}/{cache}: KIVI-2 within 0.5 bits of its 1,024-row figure",
            abs(bits - KIVI2_AT_1024_ROWS) <= 0.5,
            f"{bits:.3f} effective bits (K {s['kv_bits_effective_k']:.3f}, V {s['kv_bits_effective_v']:.3f})")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--dllmq", default=os.path.join(ROOT, "build", "dllmq"))
    ap.add_argument("--workdir")
    a = ap.parse_args(argv)
    work = a.workdir or tempfile.mkdtemp(prefix="dllmq_kshot_")
    os.makedirs(work, exist_ok=True)
    R = Results()
    held_out = {r["question"] for r in load("test.jsonl") + load("validation.jsonl")}
    rows = {}

    def splits():
        for split in ("test", "validation"):
            rows[split] = check_split(R, split, held_out)
            # the frontier's long regime: the top of the range (make_kshot.py --suffix _kshot_long)
            rows[split + "_long"] = check_split(R, split, held_out, "_kshot_long", 700, 800)

    return run_all(R, [splits, lambda: check_token_counts(R, a.dllmq, rows["test"]),
                       lambda: check_token_counts(R, a.dllmq, rows["test_long"], "test_long"),
                       lambda: check_regime(R, a.dllmq, work, "test_kshot", "dual"),
                       lambda: check_regime(R, a.dllmq, work, "test_kshot_long", "dual"),
                       lambda: check_regime(R, a.dllmq, work, "test_kshot_long", "prefix")])


if __name__ == "__main__":
    sys.exit(main())
