#!/usr/bin/env python3
"""Encode throughput: dllmq vs `tokenizers` (single thread) vs `tiktoken`, on one ~10 MB mixed corpus.

    .venv-tok/bin/python tools/tokenizer_golden/bench.py --dllmq build-tok/dllmq

Builds the corpus (GSM8K, MATH, MBPP, HumanEval from ../shared/data plus the multilingual golden
strings), converts qwen.tiktoken into an equivalent HF tokenizer.json (so all three libraries encode
with the same Qwen vocabulary), checks the three agree on the ids of the whole corpus, then times
line-by-line encoding (best of --repeat passes, after a warm-up pass) and prints MB/s and ratios.
"""

import argparse
import base64
import gzip
import json
import os
import random
import subprocess
import sys
import time

os.environ["TOKENIZERS_PARALLELISM"] = "false"  # single thread (must be set before the import)
os.environ["RAYON_NUM_THREADS"] = "1"

import tiktoken  # noqa: E402
import tokenizers  # noqa: E402
from tiktoken.load import load_tiktoken_bpe  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SHARED = os.environ.get("DLLMQ_SHARED_DATA", os.path.join(ROOT, "..", "shared", "data"))
sys.path.insert(0, os.path.dirname(__file__))
from gen_golden import QWEN_PAT, QWEN_SPECIALS  # noqa: E402


def build_corpus(path, target):
    parts = []
    for name in ("gsm8k/train.jsonl", "gsm8k/test.jsonl", "math/test.jsonl", "mbpp/mbpp.jsonl"):
        p = os.path.join(SHARED, name)
        if os.path.exists(p):
            with open(p) as f:
                for line in f:
                    r = json.loads(line)
                    parts += [str(v) for v in r.values() if isinstance(v, str)]
    p = os.path.join(SHARED, "humaneval", "HumanEval.jsonl.gz")
    if os.path.exists(p):
        with gzip.open(p, "rt") as f:
            for line in f:
                r = json.loads(line)
                parts += [r["prompt"], r["canonical_solution"], r["test"]]
    with open(os.path.join(ROOT, "tests", "data", "tokenizer", "corpus.json")) as f:
        golden = [e["text"] for e in json.load(f)["strings"] if "text" in e]
    rng = random.Random(7)
    text = "\n".join(parts)
    multi = []
    while sum(map(len, multi)) < max(0, target - len(text.encode())) // 3:
        multi.append(rng.choice(golden))
    text = text + "\n" + "\n".join(multi)
    data = text.encode()[:target]
    data = data.decode("utf-8", errors="ignore").encode()
    with open(path, "wb") as f:
        f.write(data)
    return data.decode()


def tiktoken_to_tokenizer_json(rank_path, out_path):
    """The HF form of the Qwen vocabulary: byte-level strings + merges derived from the ranks."""
    ranks = load_tiktoken_bpe(rank_path)
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    b2u = dict(zip(bs, map(chr, cs)))

    def enc(b):
        return "".join(b2u[x] for x in b)

    vocab = {enc(t): r for t, r in ranks.items()}
    merges = []
    for t, r in ranks.items():
        for k in range(1, len(t)):
            if t[:k] in ranks and t[k:] in ranks:
                merges.append((r, ranks[t[:k]], ranks[t[k:]], enc(t[:k]), enc(t[k:])))
    merges.sort()
    j = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": 151643 + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, s in enumerate(QWEN_SPECIALS)],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN_PAT}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [[a, b] for _, _, _, a, b in merges]},
    }
    with open(out_path, "w") as f:
        json.dump(j, f, ensure_ascii=False)


def best_of(fn, repeat):
    fn()  # warm-up
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def dllmq_ids(exe, tok, path):
    out = subprocess.run([exe, "tokenize", "--tokenizer", tok, "--file", path, "--ids-only", "--no-special"],
                         check=True, capture_output=True, text=True).stdout.strip()
    return [int(x) for x in out.split(",")] if out else []


def dllmq_bench(exe, tok, path, repeat):
    out = subprocess.run([exe, "tokenize", "--tokenizer", tok, "--bench", path, "--repeat", str(repeat), "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dllmq", default=os.path.join(ROOT, "build", "dllmq"))
    ap.add_argument("--workdir", default="/tmp/dllmq-tokbench")
    ap.add_argument("--mb", type=float, default=10.0, help="corpus size in MB")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    corpus_path = os.path.join(args.workdir, "corpus.txt")
    text = build_corpus(corpus_path, int(args.mb * 1e6))
    nbytes = len(text.encode())
    lines = text.split("\n")  # the same lines dllmq --bench encodes (str.splitlines also cuts at \r, \x1c, ...)
    lines = [l + "\n" for l in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    print(f"corpus {corpus_path}: {nbytes} bytes, {len(lines)} lines")

    rank_path = os.path.join(SHARED, "tokenizers", "qwen", "qwen.tiktoken")
    tj_path = os.path.join(args.workdir, "qwen.tokenizer.json")
    if not os.path.exists(tj_path):
        tiktoken_to_tokenizer_json(rank_path, tj_path)
    hf = tokenizers.Tokenizer.from_file(tj_path)
    tk = tiktoken.Encoding(name="qwen", pat_str=QWEN_PAT, mergeable_ranks=load_tiktoken_bpe(rank_path),
                           special_tokens={s: 151643 + i for i, s in enumerate(QWEN_SPECIALS)})
    synth_path = os.path.join(ROOT, "models", "dllmq-synth-tiny", "tokenizer.json")
    synth = tokenizers.Tokenizer.from_file(synth_path) if os.path.exists(synth_path) else None

    # Agreement on the whole corpus (one string), before timing. The corpus holds special-token strings
    # (from the golden corpus): compare as plain text everywhere (encode_ordinary / split_special_tokens).
    ref = tk.encode_ordinary(text)
    hf.encode_special_tokens = True
    if synth:
        synth.encode_special_tokens = True
    agree = {"tokenizers(qwen json)": hf.encode(text, add_special_tokens=False).ids == ref,
             "dllmq(qwen.tiktoken)": dllmq_ids(args.dllmq, rank_path, corpus_path) == ref,
             "dllmq(qwen json)": dllmq_ids(args.dllmq, tj_path, corpus_path) == ref}
    if synth:
        agree["dllmq(synth json) vs tokenizers"] = (dllmq_ids(args.dllmq, synth_path, corpus_path) ==
                                                    synth.encode(text, add_special_tokens=False).ids)
    print(f"ids agree with tiktoken on the whole corpus ({len(ref)} tokens): {agree}")
    hf.encode_special_tokens = False
    if synth:
        synth.encode_special_tokens = False

    rows = []
    t = best_of(lambda: hf.encode_batch(lines, add_special_tokens=False), args.repeat)
    rows.append(("tokenizers " + tokenizers.__version__ + " (qwen json, 1 thread, encode_batch)", t))
    t = best_of(lambda: tk.encode_ordinary_batch(lines, num_threads=1), args.repeat)
    rows.append(("tiktoken " + tiktoken.__version__ + " (qwen.tiktoken, 1 thread, encode_ordinary_batch)", t))
    for name, path in (("dllmq (qwen.tiktoken)", rank_path), ("dllmq (qwen json)", tj_path)):
        r = dllmq_bench(args.dllmq, path, corpus_path, args.repeat)
        rows.append((name, r["best_seconds"]))
    if synth:
        t = best_of(lambda: synth.encode_batch(lines, add_special_tokens=False), args.repeat)
        rows.append(("tokenizers (synth-tiny json, LLaDA form)", t))
        rows.append(("dllmq (synth-tiny json)", dllmq_bench(args.dllmq, synth_path, corpus_path, args.repeat)["best_seconds"]))
    print(f"\n{'encoder':<78} {'s':>7} {'MB/s':>8}")
    for name, t in rows:
        print(f"{name:<78} {t:7.3f} {nbytes / t / 1e6:8.2f}")
    by = dict(rows)
    hf_t, tk_t = rows[0][1], rows[1][1]
    print(f"\nratio dllmq(qwen.tiktoken) / tokenizers: {hf_t / by['dllmq (qwen.tiktoken)']:.2f}x, "
          f"/ tiktoken: {tk_t / by['dllmq (qwen.tiktoken)']:.2f}x")
    print(f"ratio dllmq(qwen json) / tokenizers: {hf_t / by['dllmq (qwen json)']:.2f}x")
    if synth:
        print(f"ratio dllmq(synth json) / tokenizers(synth json): "
              f"{rows[-2][1] / rows[-1][1]:.2f}x")


if __name__ == "__main__":
    main()
