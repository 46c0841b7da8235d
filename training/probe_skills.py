#!/usr/bin/env python3
"""Which skill a checkpoint lacks: copying operands out of the question, or the arithmetic.

For every equation line `a1 a0 ␣op ␣ b1 b0 ␣= ␣ c1 c0` of the reference answers (validation
split), the answer is shown up to a point and everything from there on is masked, then the
model's argmax is read at the masked digits (teacher forcing, one forward per equation):
  copy:       mask from a1 on  -> are a1 a0 b1 b0 predicted right? (first line: copied from the question)
  arithmetic: mask from c1 on  -> are c1 c0 right, given the visible operands?
Nothing later in the answer is visible, so a result cannot be copied from the next line.
Results are also split by operator, by line (the first line's operands are in the question; a later
line uses an earlier result, which exists only in the answer) and by digit (tens, ones).

--ones-digit also prints the distribution of the masked ones digit for a few drill equations that
differ only in their operands (a model that does arithmetic moves it with the operands).

Usage: /usr/bin/python3 training/probe_skills.py CKPT.pt [CKPT.pt ...] [--n 100] [--ones-digit]
"""
import argparse
import collections
import os
import sys

import torch
from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import Config, LLaDA, Specials, load_jsonl, render_prompt  # noqa: E402
from train import GEN_LEN  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpts", nargs="+")
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--data", default="data/synth/validation.jsonl")
    ap.add_argument("--tokenizer", default="models/dllmq-synth-tiny/tokenizer.json")
    ap.add_argument("--ones-digit", action="store_true")
    ap.add_argument("--gen-len", type=int, default=GEN_LEN, help="answer + padding length the model was trained with")
    a = ap.parse_args()
    torch.set_num_threads(1)
    tok = Tokenizer.from_file(a.tokenizer)
    sp = Specials(tok)
    eq, nl = tok.token_to_id("Ġ="), tok.token_to_id("Ċ")
    digits = {tok.token_to_id(str(d)) for d in range(10)}
    rows = load_jsonl(a.data)[:a.n]
    for ck in a.ckpts:
        s = torch.load(ck, map_location="cpu")
        m = LLaDA(Config(**s["config"]))
        m.load_state_dict(s["model"])
        m.eval()
        n_eq = copy_ok = arith_ok = digit_ok = 0
        # (operator, first/later line) -> [equations, tens right, ones right, both right]
        split = collections.defaultdict(lambda: [0, 0, 0, 0])
        for r in rows:
            p = tok.encode(render_prompt(r["question"]), add_special_tokens=False).ids
            ans = tok.encode(r["answer"] + "<|eot_id|>", add_special_tokens=False).ids
            x = torch.tensor([p + ans + [sp.eos] * (a.gen_len - len(ans))])
            ops_of_line = [ln.split()[1] for ln in r["answer"].split("\n") if " = " in ln]  # + - * per equation
            for k, i in enumerate([i for i, t in enumerate(ans) if t == eq]):
                start = max([j + 1 for j in range(i) if ans[j] == nl], default=0)  # line start
                # a1 a0 ␣op ␣ b1 b0 ␣= ␣ c1 c0 (doubling/tripling: a single-digit factor)
                ops = [len(p) + j for j in range(start, i) if ans[j] in digits]
                a1, c1 = len(p) + start, len(p) + i + 2
                with torch.no_grad():
                    xc = x.clone()
                    xc[0, a1:] = sp.mask
                    pc = m(xc)[0].argmax(-1)
                    xa = x.clone()
                    xa[0, c1:] = sp.mask
                    pa = m(xa)[0].argmax(-1)
                n_eq += 1
                copy_ok += all(pc[j] == x[0, j] for j in ops)
                hits = [bool(pa[j] == x[0, j]) for j in (c1, c1 + 1)]
                arith_ok += all(hits)
                digit_ok += sum(hits)
                cell = split[(ops_of_line[k], "first line" if k == 0 else "later lines")]
                for c, v in enumerate((1, hits[0], hits[1], all(hits))):
                    cell[c] += v
        print(f"{ck} (step {s['step']}): {n_eq} equations; operands copied {copy_ok / n_eq:.1%}; "
              f"result right {arith_ok / n_eq:.1%} (digits {digit_ok / (2 * n_eq):.1%})", flush=True)
        for (op, where), (n, tens, ones, both) in sorted(split.items()):
            print(f"  {op} {where:11s} n {n:3d}: tens digit {tens / n:.0%}, ones digit {ones / n:.0%}, "
                  f"both {both / n:.0%}", flush=True)
        if a.ones_digit:
            ones_digit(m, tok, sp, a.gen_len)


def ones_digit(m, tok, sp, gen_len):
    """Top-3 of the masked ones digit of `A op B = ??` (everything from the result on masked)."""
    for line in ["40 + 08 = 48", "40 + 03 = 43", "41 + 05 = 46", "47 + 02 = 49", "37 - 02 = 35", "30 - 10 = 20"]:
        a, op, b = line.split()[:3]
        q = f"Start with {int(a)}. {'Add' if op == '+' else 'Subtract'} {int(b)}. What is the result?"
        p = tok.encode(render_prompt(q), add_special_tokens=False).ids
        ans = tok.encode(line, add_special_tokens=False).ids
        c1 = len(p) + len(ans) - 2
        x = torch.tensor([p + ans + [sp.mask] * (gen_len - len(ans))])
        x[0, c1:] = sp.mask
        with torch.no_grad():
            pr = m(x)[0, c1 + 1].float().softmax(-1)
        top = pr.topk(3)
        print(f"  {line[:-2]}?? -> ones digit top-3 " + ", ".join(
            f"{tok.id_to_token(int(i))}:{float(v):.2f}" for v, i in zip(top.values, top.indices)))


if __name__ == "__main__":
    main()
