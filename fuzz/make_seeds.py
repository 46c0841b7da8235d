#!/usr/bin/python3
"""Writes the seed corpora of the fuzz harnesses into fuzz/corpus/<harness>/ (committed; rerun
after a format change). Seeds are small valid inputs built from the repository's own files, so
the fuzzers start from the accepted paths; findings go to fuzz/regressions/<harness>/.

Usage: /usr/bin/python3 fuzz/make_seeds.py (Debian python3 with numpy)
"""
import base64
import gzip
import json
import os
import struct
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import make_tiny_checkpoint as mtc  # noqa: E402
import safetensors_np as stn  # noqa: E402

OUT = os.path.join(ROOT, "fuzz", "corpus")
SEP = b"\n=====\n"
SHARED = os.path.join(ROOT, "..", "shared", "data")


def put(harness, name, data):
    d = os.path.join(OUT, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def read(rel):
    with open(os.path.join(ROOT, rel), "rb") as f:
        return f.read()


def safetensors_bytes(tensors, metadata=None, dtype=None):
    os.makedirs(OUT, exist_ok=True)
    tmp = os.path.join(OUT, ".tmp.safetensors")
    stn.write_safetensors(tmp, tensors, metadata, dtype=dtype)
    with open(tmp, "rb") as f:
        b = f.read()
    os.remove(tmp)
    return b


def calib_seed(method):
    H, hd, layers = 2, 4, 2
    md = {"format": "dllmq-calib", "version": "1", "method": method, "trajectory": "ar",
          "fisher": "none", "kv_bits_k": "2", "kv_bits_v": "2", "outlier_percent": "1",
          "sink": "1", "model_fingerprint": "0123456789abcdef", "n_layers": str(layers),
          "n_kv_heads": str(H), "head_dim": str(hd), "n_pairs": "3", "n_tokens": "40",
          "data_hash": "00", "created_by": "dllmq calibrate", "kv_group": "32"}
    t = {}
    for l in range(layers):
        if method == "kvquant":
            t[f"layers.{l}.k_lower"] = -np.ones((H, hd), np.float32)
            t[f"layers.{l}.k_upper"] = np.ones((H, hd), np.float32)
            t[f"layers.{l}.k_codebook"] = np.linspace(-1, 1, 4).astype(np.float32)
            t[f"layers.{l}.v_codebook"] = np.linspace(-1, 1, 4).astype(np.float32)
        else:
            t[f"layers.{l}.k_fp16_channels"] = np.array([1, 6], np.float32)
            t[f"layers.{l}.k_channel_scores"] = np.arange(H * hd, dtype=np.float32).reshape(H, hd)
    return safetensors_bytes(dict(sorted(t.items())), md)


def tiktoken_seed():
    ranks = [bytes([b]) for b in range(256)]
    for w in [b"th", b"he", b"the", b" t", b" the", b"in", b"ing", b"12", b"123"]:
        ranks.append(w)
    return b"".join(base64.b64encode(r) + b" %d\n" % i for i, r in enumerate(ranks))


def first_lines(path, n, opener=open):
    with opener(path, "rt") as f:
        return "".join(f.readline() for _ in range(n))


def main():
    # safetensors: each dtype, metadata, a 0-d and an empty tensor; and the embedded model's
    # header with its data cut off (the fuzzer grows it back).
    rng = np.random.default_rng(0)
    put("safetensors", "f32", safetensors_bytes({"a": rng.standard_normal((2, 3)).astype(np.float32),
                                                 "b": np.zeros((0, 4), np.float32)}, {"format": "pt"}))
    put("safetensors", "bf16", safetensors_bytes({"w": rng.standard_normal((4, 4))}, None, dtype="bf16"))
    put("safetensors", "f16", safetensors_bytes({"s": np.float32(1.5).reshape(())}, None, dtype="f16"))
    model = read("models/dllmq-synth-tiny/model.safetensors")
    n = struct.unpack("<Q", model[:8])[0]
    put("safetensors", "model_header", model[:8 + n])
    put("calib_artifact", "kvquant", calib_seed("kvquant"))
    put("calib_artifact", "dllm_kvq", calib_seed("dllm-kvq"))

    put("safetensors_index", "two_shards", json.dumps(
        {"metadata": {"total_size": 64}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                                                        "b": "model-00002-of-00002.safetensors"}}))

    put("model_config", "embedded", read("models/dllmq-synth-tiny/config.json"))
    put("model_config", "llada", json.dumps(mtc.llada_config(2, 64, 4, 2, 96, 300, 299, 298, False, "bf16")))
    put("model_config", "dream", json.dumps(mtc.dream_config(2, 64, 4, 2, 96, 300, 299, 298, True, "bf16")))
    put("model_config", "lladamoe", json.dumps(mtc.lladamoe_config(
        3, 64, 4, 2, 96, 300, 299, 298, False, "bf16",
        dict(mtc.MOE_DEFAULTS, shared_mlp=24, dense_layers=(0,), expert_bias=True))))
    put("generation_config", "embedded", read("models/dllmq-synth-tiny/generation_config.json"))
    put("generation_config", "steps", json.dumps({"max_new_tokens": 256, "block_length": 32, "steps": 128}))

    text = "Hello world! Tom has 12 apples.\n  <|endoftext|> ünïcödé 123456 \t\r\n"
    put("tokenizer_json", "embedded", read("models/dllmq-synth-tiny/tokenizer.json") + SEP + text.encode())
    put("tokenizer_json", "gpt2_style", read("tests/data/tokenizer/gpt2_style.tokenizer.json") + SEP + text.encode())
    put("tiktoken", "bytes_and_merges", tiktoken_seed() + SEP + b"the 123 thing <|im_start|>")
    dream = "tests/data/tokenizer/dream_files/"
    put("vocab_merges", "dream_files", read(dream + "vocab.json") + SEP + read(dream + "merges.txt") + SEP + text.encode())

    put("chat_template", "plain", "What is 2 + 3?")
    put("chat_template", "system", "  Solve: x = 4  \n" + SEP.decode() + "You are terse.")
    put("chat_template", "specials", "<|im_end|><|eot_id|>\x1c\u3000 text \xa0")

    # eval_data: the first byte picks the consumer (fuzz_eval_data.cpp): 0 parse_jsonl, 1-5 the
    # tasks gsm8k synth math humaneval mbpp, 6-9 the converters gsm8k math mbpp synth, 10 pairs.
    def eval_seed(name, picks, text):
        for p in picks:
            put("eval_data", "%s_%d" % (name, p), bytes([p]) + text.encode())
    synth = first_lines(os.path.join(ROOT, "data/synth/test.jsonl"), 6)
    eval_seed("synth", [0, 1, 2, 6, 9, 10], synth)
    if os.path.isdir(SHARED):  # benchmark layouts (shared/data); skipped where it is absent
        eval_seed("math", [3, 7], first_lines(os.path.join(SHARED, "math/test.jsonl"), 2))
        eval_seed("humaneval", [4], first_lines(os.path.join(SHARED, "humaneval/HumanEval.jsonl.gz"), 1, gzip.open))
        with open(os.path.join(SHARED, "mbpp/mbpp.jsonl")) as f:
            rows = [json.loads(l) for l in f if l.strip()]
        keep = [r for r in rows if r["task_id"] in (2, 3, 4, 11, 601)]
        eval_seed("mbpp", [5, 8], "".join(json.dumps(r) + "\n" for r in keep))
    eval_seed("pairs_ids", [10], '{"prompt_ids": [1, 2, 3], "answer_ids": [4, 5]}\n\n{"prompt": "a", "answer": "b"}\n')

    put("responses", "gsm8k", b"\x00" + b'{"task_id": 0, "response": "3 + 4 = 7\\n#### 7"}\n'
                                        b'{"task_id": "1", "response": "The answer is 6."}\n')
    put("responses", "math", b"\x01" + b'{"task_id": 0, "response": "so $\\\\boxed{2}$"}\n'
                                       b'{"task_id": 1, "response": "Final Answer: The final answer is $\\\\frac12$."}\n')
    put("responses", "samples", b"\x00" + b'{"task_id": "0", "doc": 0, "correct": true}\n{"task_id": "1", "do')

    # serve_request: selector byte (1 chat, 2 Dream, 4 server default dual + threshold), a
    # transport byte (bits 0-1 framing: 0 Content-Length, 1 chunked in 1 + (bits 4-7) * 97-byte
    # pieces, 2-3 raw HTTP; bits 2-3 content type: json, form, text, multipart), then the body.
    def req(name, sel, body, transport=0):
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        put("serve_request", name, bytes([sel, transport]) + raw)
    req("completion", 0, {"prompt": "What is 2 + 3?", "max_tokens": 16, "temperature": 0, "seed": 1,
                          "stop": ["\n"], "block_length": 8, "steps": 16})
    req("completion_ids", 2, {"prompt": [[5, 6, 7], [8, 9]], "max_tokens": 8, "cache": "dual", "threshold": 0.9},
        transport=1 | (3 << 4))
    req("chat_stream", 1, {"messages": [{"role": "system", "content": "Be brief."},
                                        {"role": "user", "content": [{"type": "text", "text": "1 + 1?"}]}],
                           "stream": True, "stream_steps": True, "stream_options": {"include_usage": True},
                           "max_completion_tokens": 16}, transport=1 | (1 << 2))
    req("chat_dream_kv", 7, {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 32,
                             "kv": "kivi", "kv_bits": 2, "alg": "entropy", "model": "x", "n": 1},
        transport=2 << 2)
    # Nesting at the request limit (32) and past it, in an optional field and in a message.
    req("nested_31", 0, ('{"prompt": "hi", "logit_bias": ' + '{"a":' * 31 + "1" + "}" * 31 + "}").encode())
    req("nested_40_chat", 1, ('{"messages": [{"role": "user", "content": ' + "[" * 40 + '"x"' + "]" * 40
                              + "}]}").encode(), transport=1)
    req("form_body", 0, {"prompt": "x " * 300, "max_tokens": 4}, transport=1 << 2)
    req("multipart", 0, b"--xyz\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--xyz--\r\n",
        transport=3 << 2)
    body = json.dumps({"prompt": "What is 2 + 3?", "max_tokens": 8}).encode()
    req("raw_chunked", 0, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n", transport=2)
    req("raw_gzip", 0, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\n"
        + b"Content-Length: %d\r\n\r\n" % len(gzip.compress(body)) + gzip.compress(body), transport=2)

    # grid_config: the repository's grids and a small one with every section.
    for f in sorted(os.listdir(os.path.join(ROOT, "configs"))):
        put("grid_config", f[:-5], read("configs/" + f))
    put("grid_config", "every_section", json.dumps({
        "out": "runs/x", "model": "m", "requires_model": False,
        "tasks": [{"task": "synth", "data": "d.jsonl", "limit": 4, "chat": True}],
        "fixed": {"block-length": 16, "threshold": None},
        "grid": {"cache": ["none", "dual"], "kv": [{"name": "k2", "kv": "kivi", "kv-bits": 2}]},
        "args": ["--workers", 2], "calibrate": [{"out": "{out}/a.safetensors", "args": ["--limit", "4"]}]}))

if __name__ == "__main__":
    main()
