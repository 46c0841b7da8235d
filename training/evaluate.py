#!/usr/bin/env python3
"""Evaluate an exported model folder (config.json + bf16 model.safetensors; LLaDA or Dream layout)
with the PyTorch greedy low-confidence decoder (Dream: on the shifted logits): exact match of the
`####` number on the synthetic test set. Run with /usr/bin/python3.

Weights are the bf16 values from the file; compute is fp32.
Usage: python3 training/evaluate.py [--model models/dllmq-synth-tiny] [--data data/synth/test.jsonl]
                                    [--block 48] [--n 1000] [--out training/logs/eval_test_b48.jsonl]
"""
import argparse
import json
import os
import re
import time

import torch
from tokenizers import Tokenizer

from export import read_safetensors
from model import Config, Dream, LLaDA, Specials, exact_match, final_number, load_jsonl, render_prompt


def load_model(d):
    """-> (model in eval mode, config.json dict); weights are the file's bf16 values in fp32."""
    with open(os.path.join(d, "config.json")) as f:
        j = json.load(f)
    if j.get("model_type") == "Dream":
        assert not j["tie_word_embeddings"]
        c = Config(vocab_size=j["vocab_size"], d_model=j["hidden_size"], n_heads=j["num_attention_heads"],
                   n_kv_heads=j["num_key_value_heads"], n_layers=j["num_hidden_layers"],
                   mlp_hidden_size=j["intermediate_size"], rope_theta=j["rope_theta"], rms_norm_eps=j["rms_norm_eps"],
                   max_sequence_length=j["max_position_embeddings"], qkv_bias=True, arch="dream")
        m = Dream(c)
        m.load_state_dict(read_safetensors(os.path.join(d, "model.safetensors")), strict=True)
        return m.eval(), j
    assert j["n_kv_heads"] == j["n_heads"] and not j["weight_tying"]
    c = Config(vocab_size=j["embedding_size"], d_model=j["d_model"], n_heads=j["n_heads"],
               n_layers=j["n_layers"], mlp_hidden_size=j["mlp_hidden_size"], rope_theta=j["rope_theta"],
               rms_norm_eps=j["rms_norm_eps"], max_sequence_length=j["max_sequence_length"])
    m = LLaDA(c)
    w = {k[len("model.transformer."):]: v for k, v in read_safetensors(os.path.join(d, "model.safetensors")).items()}
    m.load_state_dict(w, strict=True)
    return m.eval(), j


def diagnose(rows, texts):
    """Where errors come from: format, step count, copied lines, arithmetic of generated lines."""
    same_n = first = line_ok = ref_lines = eqs = true_eqs = 0
    for r, t in zip(rows, texts):
        ref = r["answer"].split("\n")[:-1]
        gen = [l.strip() for l in t.split("\n") if "=" in l]
        same_n += len(gen) == len(ref)
        first += bool(gen) and gen[0] == ref[0]
        line_ok += sum(g == f for g, f in zip(gen, ref))
        ref_lines += len(ref)
        for l in gen:
            eqs += 1
            m = re.fullmatch(r"(\d+) ([-+*]) (\d+) = (\d+)", l)
            if m:
                a, op, b, c = int(m[1]), m[2], int(m[3]), int(m[4])
                true_eqs += {"+": a + b, "-": a - b, "*": a * b}[op] == c
    n = len(rows)
    return {"has_answer_number": round(sum(final_number(t) is not None for t in texts) / n, 4),
            "same_number_of_steps": round(same_n / n, 4), "first_step_exact": round(first / n, 4),
            "step_lines_exact": round(line_ok / ref_lines, 4),
            "generated_equations_true": round(true_eqs / max(eqs, 1), 4)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="models/dllmq-synth-tiny")
    ap.add_argument("--data", default="data/synth/test.jsonl")
    ap.add_argument("--gen-len", type=int, default=48)
    ap.add_argument("--block", type=int, default=48)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None, help="per-problem predictions (jsonl)")
    ap.add_argument("--diagnose", default=None, help="only recompute the summary from an --out file")
    a = ap.parse_args()
    if a.diagnose:  # summary from saved predictions, no model run
        rows = load_jsonl(a.data)
        texts = [p["generation"] for p in load_jsonl(a.diagnose)]
        rows = rows[:len(texts)]
        acc = sum(final_number(t) == final_number(r["answer"]) for r, t in zip(rows, texts)) / len(rows)
        print(json.dumps({"data": a.data, "n": len(rows), "exact_match": round(acc, 4), **diagnose(rows, texts)}))
        return
    torch.set_num_threads(a.threads)
    model, cfg = load_model(a.model)
    tok = Tokenizer.from_file(os.path.join(a.model, "tokenizer.json"))
    sp = Specials(tok, model.c.arch)
    assert (sp.mask, sp.eos) == (cfg["mask_token_id"], cfg["eos_token_id"])
    rows = load_jsonl(a.data)[:a.n]
    t0 = time.time()
    acc, texts = exact_match(model, tok, rows, a.gen_len, sp, block_len=a.block)
    dt = time.time() - t0
    print(json.dumps({"model": a.model, "data": a.data, "n": len(rows), "gen_len": a.gen_len, "block": a.block,
                      "steps": a.gen_len, "exact_match": round(acc, 4), "seconds": round(dt, 1),
                      **diagnose(rows, texts)}))
    if a.out:
        with open(a.out, "w") as f:
            for r, t in zip(rows, texts):
                f.write(json.dumps({"question": r["question"], "reference": final_number(r["answer"]),
                                    "generation": t, "predicted": final_number(t),
                                    "correct": final_number(t) == final_number(r["answer"])}) + "\n")


if __name__ == "__main__":
    main()
