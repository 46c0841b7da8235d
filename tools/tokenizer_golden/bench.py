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


def dllmq_bench(exe, tok, path, repeat, cache=True):
    out = subprocess.run([exe, "tokenize", "--tokenizer", tok, "--bench", path, "--repeat", str(repeat), "--json"] +
                         ([] if cache else ["--no-cache"]), check=True, capture_output=True, text=True).stdout
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

    # Each row: (encoder, seconds by line, seconds whole corpus as one string).
    rows = []
    hf_lines = best_of(lambda: hf.encode_batch(lines, add_special_tokens=False), args.repeat)
    hf_whole = best_of(lambda: hf.encode(text, add_special_tokens=False), args.repeat)
    rows.append((f"tokenizers {tokenizers.__version__} (qwen json)", hf_lines, hf_whole))
    tk_lines = best_of(lambda: tk.encode_ordinary_batch(lines, num_threads=1), args.repeat)
    tk_whole = best_of(lambda: tk.encode_ordinary(text), args.repeat)
    rows.append((f"tiktoken {tiktoken.__version__} (qwen.tiktoken)", tk_lines, tk_whole))
    for name, path, cache in (("dllmq (qwen.tiktoken)", rank_path, True), ("dllmq (qwen json)", tj_path, True),
                              ("dllmq (qwen.tiktoken, word cache off)", rank_path, False)):
        r = dllmq_bench(args.dllmq, path, corpus_path, args.repeat, cache)
        rows.append((name, r["lines_seconds"], r["whole_seconds"]))
    if synth:
        rows.append(("tokenizers (synth-tiny json, LLaDA form)",
                     best_of(lambda: synth.encode_batch(lines, add_special_tokens=False), args.repeat),
                     best_of(lambda: synth.encode(text, add_special_tokens=False), args.repeat)))
        r = dllmq_bench(args.dllmq, synth_path, corpus_path, args.repeat)
        rows.append(("dllmq (synth-tiny json)", r["lines_seconds"], r["whole_seconds"]))
    mb = nbytes / 1e6
    print(f"\nsingle thread, best of {args.repeat} passes after a warm-up; MB/s of UTF-8 input")
    print(f"{'encoder':<42} {'by line':>10} {'whole':>10}")
    for name, tl, tw in rows:
        print(f"{name:<42} {mb / tl:10.2f} {mb / tw:10.2f}")
    by = {name: (tl, tw) for name, tl, tw in rows}

    def ratio(num, den):
        return f"{by[num][0] / by[den][0]:.1f}x by line, {by[num][1] / by[den][1]:.1f}x whole"

    hf_name, tk_name = rows[0][0], rows[1][0]
    print(f"\ndllmq (qwen.tiktoken) vs tokenizers: {ratio(hf_name, 'dllmq (qwen.tiktoken)')}")
    print(f"dllmq (qwen.tiktoken) vs tiktoken:   {ratio(tk_name, 'dllmq (qwen.tiktoken)')}")
    print(f"dllmq (qwen json) vs tokenizers:     {ratio(hf_name, 'dllmq (qwen json)')}")
    print(f"dllmq, word cache off, vs tiktoken:  {ratio(tk_name, 'dllmq (qwen.tiktoken, word cache off)')}")
    if synth:
        print(f"dllmq vs tokenizers (synth json):    "
              f"{ratio('tokenizers (synth-tiny json, LLaDA form)', 'dllmq (synth-tiny json)')}")


if __name__ == "__main__":
    main()
