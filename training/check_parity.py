#!/usr/bin/env python3
"""Forward parity of an exported model folder: the PyTorch training model (training/model.py, fp32
compute on the file's bf16 weights) against dllmq's forward (`dllmq logits -m DIR --ids ... --json`,
fp32) and against the project's independent float64 numpy reference (tools/ref_forward.py).
All three return RAW logits (for Dream: before the shift). Prints one JSON line with max |Δlogit|.

Inputs: the chat-templated prompts of the first --n test problems, each followed by its reference
answer with every second answer position replaced by the mask id (a decoding-like canvas).

Usage: /usr/bin/python3 training/check_parity.py --model models/dllmq-synth-dream-tiny --dllmq build/dllmq [--n 3]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch
from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
from evaluate import load_model  # noqa: E402
from model import Specials, end_of_turn, load_jsonl, render_prompt  # noqa: E402
import ref_forward as rf  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="models/dllmq-synth-dream-tiny")
    ap.add_argument("--dllmq", default="build/dllmq")
    ap.add_argument("--data", default="data/synth/test.jsonl")
    ap.add_argument("--n", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(1)
    model, cfg = load_model(a.model)
    arch = model.c.arch
    tok = Tokenizer.from_file(os.path.join(a.model, "tokenizer.json"))
    sp = Specials(tok, arch)
    ref = rf.load_model(a.model)
    worst = {"torch_vs_dllmq": 0.0, "torch_vs_numpy_f64": 0.0, "dllmq_vs_numpy_f64": 0.0}
    scale = 0.0
    n_tokens = 0
    for r in load_jsonl(a.data)[:a.n]:
        p = tok.encode(render_prompt(r["question"], arch), add_special_tokens=False).ids
        ans = tok.encode(r["answer"] + end_of_turn(arch), add_special_tokens=False).ids
        ids = p + [sp.mask if i % 2 else t for i, t in enumerate(ans)]
        with torch.no_grad():
            lt = model(torch.tensor([ids])).float()[0].numpy().astype(np.float64)
        out = subprocess.check_output([a.dllmq, "logits", "-m", a.model, "--ids", ",".join(map(str, ids)), "--json"])
        ld = np.array(json.loads(out)["logits"], dtype=np.float64)
        ln = np.asarray(ref.forward(ids), dtype=np.float64)
        assert ld.shape == lt.shape == ln.shape, (ld.shape, lt.shape, ln.shape)
        worst["torch_vs_dllmq"] = max(worst["torch_vs_dllmq"], float(np.abs(lt - ld).max()))
        worst["torch_vs_numpy_f64"] = max(worst["torch_vs_numpy_f64"], float(np.abs(lt - ln).max()))
        worst["dllmq_vs_numpy_f64"] = max(worst["dllmq_vs_numpy_f64"], float(np.abs(ld - ln).max()))
        scale = max(scale, float(np.abs(lt).max()))
        n_tokens += len(ids)
    print(json.dumps({"model": a.model, "arch": arch, "problems": a.n, "positions": n_tokens,
                      "max_abs_logit": round(scale, 3), **{k: float(f"{v:.3g}") for k, v in worst.items()}}))


if __name__ == "__main__":
    main()
