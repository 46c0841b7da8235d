#!/usr/bin/env python3
"""k-shot long-prompt splits of the synth task (issue 30's long regime).

Each row's question becomes K solved problems followed by the question itself:

    Question: <q1>
    Answer: <a1>

    ...

    Question: <q>

with K drawn uniformly from [--min-shots, --max-shots] and the shots drawn from the train split only
(never a validation or test question, never the row's own question). The answer is unchanged, so
`dllmq eval --task synth --data ...` scores the new files as it scores the short ones. The point is
the cache length: 400-800 prompt tokens, where cached rows (not the 48-token canvas) dominate the
KV bytes, as in LLaDA-8B runs with GSM8K's 8-shot prompts.

Usage (Debian's /usr/bin/python3 with `tokenizers`, for the token-length report):
  /usr/bin/python3 training/make_kshot.py --data data/synth
writes train_kshot.jsonl (not committed: 200k rows), validation_kshot.jsonl, test_kshot.jsonl and
prints the prompt-length distribution in model tokens. K and the shots are redrawn until the
rendered prompt has 400-800 tokens (--min-tokens/--max-tokens), so every row is in the regime.

The frontier's long regime (configs/frontier_kshot.json) reads the top of that range, where the
cache is longest (a mean of ~750 prompt tokens; KIVI-2's effective bits then come within 0.5 of
its 3.0 at 1,024 rows):
  /usr/bin/python3 training/make_kshot.py --splits validation,test --min-tokens 700 \
      --suffix _kshot_long
"""
import argparse
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def with_shots(row, pool, rng, a, n_tokens):
    """Draws K and the shots until the rendered prompt has --min-tokens..--max-tokens tokens."""
    for _ in range(1000):
        k = rng.randint(a.min_shots, a.max_shots)
        shots = []
        while len(shots) < k:
            s = pool[rng.randrange(len(pool))]
            if s["question"] != row["question"] and s not in shots:
                shots.append(s)
        text = "".join(f"Question: {s['question']}\nAnswer: {s['answer']}\n\n" for s in shots)
        q = text + f"Question: {row['question']}"
        n = n_tokens(q)
        if a.min_tokens <= n <= a.max_tokens:
            return {"question": q, "answer": row["answer"], "shots": k, "prompt_tokens": n}
    sys.exit(f"no {a.min_shots}-{a.max_shots} shots give {a.min_tokens}-{a.max_tokens} prompt tokens "
             f"for: {row['question']}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="data/synth")
    ap.add_argument("--min-shots", type=int, default=4)
    ap.add_argument("--max-shots", type=int, default=8)
    ap.add_argument("--min-tokens", type=int, default=400, help="prompt tokens (chat template included)")
    ap.add_argument("--max-tokens", type=int, default=800)
    ap.add_argument("--splits", default="train,validation,test")
    ap.add_argument("--n-train", type=int, default=40_000, help="rows of train_kshot.jsonl (the first N of "
                    "train.jsonl; each is ~600 tokens, so all 200k would not fit in memory as tokenized)")
    ap.add_argument("--model-dir", default="models/dllmq-synth-tiny", help="tokenizer for the length report")
    ap.add_argument("--seed", type=int, default=7007)
    ap.add_argument("--suffix", default="_kshot", help="output names: <split><suffix>.jsonl (e.g. _kshot_long "
                    "for a 700-800-token variant beside the default files)")
    a = ap.parse_args()
    if not 1 <= a.min_shots <= a.max_shots:
        sys.exit(f"--min-shots/--max-shots: need 1 <= min <= max, got {a.min_shots}, {a.max_shots}")
    pool = load(os.path.join(a.data, "train.jsonl"))
    sys.path.insert(0, os.path.join(HERE, "..", "tools"))
    from atomic_write import atomic_open
    from tokenizers import Tokenizer
    sys.path.insert(0, HERE)
    from model import render_prompt
    tok = Tokenizer.from_file(os.path.join(a.model_dir, "tokenizer.json"))

    def n_tokens(question):
        return len(tok.encode(render_prompt(question), add_special_tokens=False).ids)

    for i, split in enumerate(a.splits.split(",")):
        rng = random.Random(a.seed + i)  # one stream per split: adding a split changes no other
        base = load(os.path.join(a.data, f"{split}.jsonl"))
        rows = [with_shots(r, pool, rng, a, n_tokens) for r in (base[:a.n_train] if split == "train" else base)]
        out = os.path.join(a.data, f"{split}{a.suffix}.jsonl")
        with atomic_open(out, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
        n = sorted(r["prompt_tokens"] for r in rows)
        print(f"wrote {len(rows)} rows to {out}; prompt tokens: min {n[0]}, median {n[len(n) // 2]}, "
              f"p95 {n[int(len(n) * 0.95)]}, max {n[-1]}")


if __name__ == "__main__":
    main()
