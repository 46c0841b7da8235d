#!/usr/bin/python3
"""Hostile inputs, second round (issue 28): one group of checks per defect class, written from
the class's description (docs/reliability.md, "Second sweep"), none reusing the sweep's inputs.

    test_hostile_inputs.py --dllmq BIN --workdir DIR   (last line: 'N passed, N failed')

1 nesting: bodies nested 10^5 deep in several fields, and at the depth limit and one past it,
  answer 400 naming the limit; the server keeps serving.
2 body limits: chunked, form-urlencoded, text/plain and gzip bodies at --max-body and one byte
  over it; a 64 MiB chunked body is refused with the server's memory bounded; multipart is 415.
3 types: every request field given every wrong JSON type answers 200 or 400, never 500; chat
  parts, eval data files and grid configs with values of the wrong type are errors naming them.
4 ranges: every numeric request field at both ends of its range and just outside; the ends
  that feed arithmetic (temperature, alg_temp, cfg_scale, eps, factor) decode to finite logits.
6 unknown keys: grid configs with misspelt keys at every level are errors with "did you mean".
7 locations: a pairs file with an empty answer names FILE:LINE.
8 output paths: calib-report --png DIR fails without writing DIR.png; a name without extension
  is written exactly there.
9 contradicting model files: a Dream generation_config.json whose mask_token_id disagrees with
  config.json or lies outside the vocabulary is refused naming both files.
10 undecodable defaults: serve refuses to start, naming where the defaults came from.
(Class 5, superlinear scoring, is a unit test: EvalScale.* in tests/unit/test_hostile_inputs.cpp.)
"""
import argparse
import gzip
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_dirs import linked_copy  # noqa: E402
from results import Results, run_all  # noqa: E402
from serve_client import Server  # noqa: E402

LLADA = os.path.join(ROOT, "models", "dllmq-synth-tiny")
DREAM = os.path.join(ROOT, "models", "dllmq-synth-dream-tiny")
MAX_BODY = 1024 * 1024  # the default --max-body
DEPTH_LIMIT = 32  # util/json_limits.h kMaxRequestJsonDepth


def run(d, args, timeout=300):
    return subprocess.run([d] + args, capture_output=True, text=True, timeout=timeout)


def raw_post(s, path, body, headers, chunk=None):
    """POST with explicit framing: Content-Length, or chunked in pieces of `chunk` bytes."""
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=120)
    try:
        c.putrequest("POST", path)
        for k, v in headers.items():
            c.putheader(k, v)
        if chunk is None:
            c.putheader("Content-Length", str(len(body)))
            c.endheaders()
            c.send(body)
        else:
            c.putheader("Transfer-Encoding", "chunked")
            c.endheaders()
            for i in range(0, len(body), chunk):
                piece = body[i:i + chunk]
                c.send(b"%x\r\n" % len(piece) + piece + b"\r\n")
            c.send(b"0\r\n\r\n")
        r = c.getresponse()
        raw = r.read()
        try:
            return r.status, json.loads(raw)
        except ValueError:
            return r.status, None
    finally:
        c.close()


def message(body):
    try:
        return body["error"]["message"]
    except (TypeError, KeyError):
        return ""


def alive(s):
    st, _, _ = s.get("/health", timeout=30)
    return st == 200


def padded(obj, size):
    """The JSON of `obj` followed by spaces to exactly `size` bytes (still one JSON value)."""
    b = json.dumps(obj).encode()
    assert len(b) <= size
    return b + b" " * (size - len(b))


def nested(depth, open_="[", close="]", inner="1"):
    return open_ * depth + inner + close * depth


# ---- class 1 -------------------------------------------------------------------------------

def check_nesting(R, s):
    deep = 100000
    cases = {
        "stop-array": '{"prompt": "hi", "stop": %s}' % nested(deep),
        "prompt-array": '{"prompt": %s}' % nested(deep),
        "logit_bias-object": '{"prompt": "hi", "logit_bias": %s}'
                             % nested(deep, '{"a":', "}", "1"),
        "unknown-field": '{"prompt": "hi", "zz": %s}' % nested(deep),
        "chat-content": '{"messages": [{"role": "user", "content": %s}]}' % nested(deep),
    }
    for name, body in cases.items():
        path = "/v1/chat/completions" if name.startswith("chat") else "/v1/completions"
        st, b = raw_post(s, path, body.encode(), {"Content-Type": "application/json"})
        R.check("nesting-1e5/" + name, st == 400 and "deeper than %d" % DEPTH_LIMIT in message(b)
                and alive(s), "%d %s" % (st, message(b)[:160]))
    # Brackets inside strings are text, not nesting.
    st, b = s.post("/v1/completions", {"prompt": "[{" * 100, "max_tokens": 4})
    R.check("nesting/brackets-in-strings", st == 200, "%d %s" % (st, message(b)[:160]))
    # At the limit the parser runs (and refuses the field for what it is); one past, the depth.
    at = '{"prompt": "hi", "logit_bias": %s}' % nested(DEPTH_LIMIT - 1, '{"a":', "}", "1")
    st, b = raw_post(s, "/v1/completions", at.encode(), {"Content-Type": "application/json"})
    R.check("nesting/at-limit", st == 400 and "logit_bias" in message(b)
            and "deeper" not in message(b), "%d %s" % (st, message(b)[:160]))
    over = '{"prompt": "hi", "logit_bias": %s}' % nested(DEPTH_LIMIT, '{"a":', "}", "1")
    st, b = raw_post(s, "/v1/completions", over.encode(), {"Content-Type": "application/json"})
    R.check("nesting/over-limit", st == 400 and "deeper than" in message(b),
            "%d %s" % (st, message(b)[:160]))


# ---- class 2 -------------------------------------------------------------------------------

def check_body_limits(R, s):
    req = {"prompt": "What is 2 + 3?", "max_tokens": 8}
    types = {"json": "application/json", "form": "application/x-www-form-urlencoded",
             "text": "text/plain"}
    for tname, ctype in types.items():
        for framing, chunk in (("length", None), ("chunked", 4096), ("chunked-1B", 1)):
            if chunk == 1 and tname != "json":
                continue
            size = MAX_BODY if chunk != 1 else 4096  # byte-sized chunks: a small body
            body = padded(req, size)
            st, b = raw_post(s, "/v1/completions", body, {"Content-Type": ctype}, chunk)
            R.check("limit/%s-%s-at" % (tname, framing), st == 200, "%d %s" % (st, message(b)[:160]))
        for framing, chunk in (("length", None), ("chunked", 4096)):
            body = padded(req, MAX_BODY + 1)
            st, b = raw_post(s, "/v1/completions", body, {"Content-Type": ctype}, chunk)
            m = message(b)
            R.check("limit/%s-%s-over" % (tname, framing),
                    st == 413 and "--max-body %d" % MAX_BODY in m
                    and ("chunked" in m if chunk else "Content-Length" in m), "%d %s" % (st, m[:200]))
    # The sweep's case: a 20 KB JSON body with curl's default form type is a request like any.
    st, b = raw_post(s, "/v1/completions", padded(req, 20000),
                     {"Content-Type": "application/x-www-form-urlencoded"})
    R.check("limit/form-20KB", st == 200, "%d %s" % (st, message(b)[:160]))
    # Compressed bodies count as they reach the parser.
    gz = gzip.compress(padded(req, MAX_BODY + 1))
    st, b = raw_post(s, "/v1/completions", gz, {"Content-Type": "application/json",
                                                "Content-Encoding": "gzip"})
    R.check("limit/gzip-over", st == 413 and "Content-Encoding: gzip" in message(b)
            and "--max-body" in message(b), "%d (%d bytes sent) %s" % (st, len(gz), message(b)[:200]))
    gz = gzip.compress(padded(req, 4096))
    st, b = raw_post(s, "/v1/completions", gz, {"Content-Type": "application/json",
                                                "Content-Encoding": "gzip"})
    R.check("limit/gzip-under", st == 200, "%d %s" % (st, message(b)[:160]))
    st, b = raw_post(s, "/v1/completions", b"--xyz\r\n\r\n--xyz--\r\n",
                     {"Content-Type": "multipart/form-data; boundary=xyz"})
    R.check("limit/multipart-415", st == 415, "%d %s" % (st, message(b)[:160]))
    # 64 MiB chunked: refused, and the server does not hold it.
    before = s.peak_rss_bytes()
    big = b"[" + b" " * (64 * 1024 * 1024) + b"]"
    st, b = raw_post(s, "/v1/completions", big, {"Content-Type": "application/json"}, 1 << 20)
    grew = s.peak_rss_bytes() - before
    R.check("limit/chunked-64MiB", st == 413 and grew < 16 * 1024 * 1024 and alive(s),
            "%d, peak RSS grew %.1f MiB: %s" % (st, grew / 2**20, message(b)[:160]))


# ---- class 3 -------------------------------------------------------------------------------

FIELDS = ["model", "stream", "stream_steps", "stream_options", "stop", "max_tokens", "n", "best_of",
          "presence_penalty", "frequency_penalty", "logprobs", "top_logprobs", "echo",
          "logit_bias", "suffix", "user", "temperature", "top_p", "top_k", "steps",
          "block_length", "threshold", "factor", "cache", "alg", "alg_temp", "eps", "cfg_scale",
          "seed", "kv", "kv_bits", "kv_bits_k", "kv_bits_v", "kv_group", "kv_channels",
          "logits_eos_inf", "confidence_eos_eot_inf", "early_stop", "dtype", "gen_length"]
WRONG = ["x", 1.5, -1, 2**70, [1], {"a": 1}, True, "", [], {}]


def check_types(R, s):
    bad = []
    for f in FIELDS:
        for v in WRONG:
            st, b = s.post("/v1/completions", {"prompt": "hi", "max_tokens": 4, f: v})
            if st not in (200, 400) or (st == 400 and not message(b)):
                bad.append("%s=%r: %d %s" % (f, v, st, message(b)[:80]))
    R.check("types/completion-fields", not bad, "; ".join(bad[:5]))
    chat_bad = []
    parts = [{"role": 5, "content": "x"}, {"role": "user", "content": 5},
             {"role": "user", "content": [{"type": 5, "text": "x"}]},
             {"role": "user", "content": [{"type": "text", "text": 5}]},
             {"role": "user", "content": [{"type": ["text"], "text": "x"}]},
             {"role": "user", "content": [5]}, {"role": "user", "content": "x", "name": 5},
             {"role": "user", "content": [{"type": "text", "text": "x", "extra": 1}]}, 5, None]
    for m in parts:
        st, b = s.post("/v1/chat/completions", {"messages": [m], "max_tokens": 4})
        if st != 400 or not message(b):
            chat_bad.append("%r: %d %s" % (m, st, message(b)[:80]))
    R.check("types/chat-messages", not chat_bad, "; ".join(chat_bad[:5]))
    st, b = s.post("/v1/chat/completions",
                   {"messages": [{"role": "user", "content": [{"type": 5, "text": "x"}]}]})
    R.check("types/content-part-type-number-names-field",
            st == 400 and b["error"]["param"] == "messages[0].content[0]", json.dumps(b)[:200])


def check_data_types(R, d, work):
    """Data files read by eval: a value of the wrong type is an error naming FILE:LINE."""
    cases = {"math-problem": ("math", {"problem": 5, "solution": "\\boxed{2}"}),
             "math-subject": ("math", {"problem": "x", "solution": "\\boxed{2}", "subject": [1]}),
             "mbpp-tests": ("mbpp", {"task_id": 2, "text": "x", "code": "y", "test_list": [1, 2, 3]}),
             "gsm8k-question": ("gsm8k", {"question": 5, "answer": "#### 2"})}
    for name, (task, rec) in cases.items():
        path = os.path.join(work, "data-%s.jsonl" % name)
        with open(path, "w") as f:
            f.write(json.dumps(rec) + "\n")
        r = run(d, ["eval", "--task", task, "--data", path, "--out", os.path.join(work, "o-" + name),
                    "--fake-responses", os.devnull])
        R.check("data-types/" + name, r.returncode == 1 and "%s:1" % path in r.stderr
                and "internal error" not in r.stderr,
                "exit %d: %s" % (r.returncode, r.stderr.strip()[-200:]))


# ---- class 4 -------------------------------------------------------------------------------

# (field, low end, high end, below, above) as docs/cli.md lists them; None: no such side.
RANGES = [("temperature", 1e-6, 1e6, 1e-7, 1.1e6), ("alg_temp", 1e-6, 1e6, 1e-7, 1.1e6),
          ("cfg_scale", 0, 1000, -1e-9, 1000.5), ("top_p", 1e-300, 1, 0, 1.0000001),
          ("threshold", 1e-300, 1, 0, 1.0000001), ("factor", 1e-300, 1e6, 0, 1.1e6),
          ("eps", 1e-12, 0.999999, 1e-13, 1), ("top_k", 0, 2**31 - 1, -1, 2**31),
          ("seed", 0, 2**64 - 1, -1, 2**64), ("max_tokens", 1, None, 0, 10**9),
          ("steps", 1, None, 0, 2**24 + 1), ("block_length", 1, None, 0, 2**24 + 1),
          ("kv_bits", 2, 8, 1, 9), ("kv_group", 1, 4096, 0, 4097)]
RANGE_WORDS = ("is not a finite number in", "is not an integer in", "must be an integer in",
               "must be in", "must be 0 or", "out of range")


def check_ranges(R, s, sd):
    for f, lo, hi, below, above in RANGES:
        for tag, v in (("below", below), ("above", above)):
            extra = {"cache": "none"} if f != "threshold" else {}
            st, b = s.post("/v1/completions", {"prompt": "hi", "max_tokens": 8, f: v, **extra})
            R.check("range/%s-%s" % (f, tag), st == 400 and f in message(b)
                    and b["error"]["param"] in (f, "max_tokens" if f == "max_tokens" else f),
                    "%r: %d %s" % (v, st, message(b)[:160]))
        for tag, v in (("low", lo), ("high", hi)):
            if v is None:
                continue
            st, b = s.post("/v1/completions", {"prompt": "hi", "max_tokens": 8, f: v})
            # An end of the range is never refused as out of range (another rule may apply:
            # steps above max_tokens, kv_bits without a quantized store, ...).
            m = message(b)
            ok = st == 200 or (st == 400 and not (f in m.split(":")[0] and
                                                  any(w in m for w in RANGE_WORDS)))
            R.check("range/%s-%s-end" % (f, tag), ok, "%r: %d %s" % (v, st, m[:160]))
    # The ends that feed arithmetic decode: every logit finite (else the decoder stops with an
    # error, a 400), on LLaDA and on Dream.
    for srv, name, fields in (
            (s, "llada", [{"temperature": 1e-6}, {"temperature": 1e6}, {"cfg_scale": 1000},
                          {"factor": 1e6, "cache": "dual"}, {"temperature": 1e6, "seed": 7}]),
            (sd, "dream", [{"temperature": 1e-6}, {"temperature": 1e6}, {"alg_temp": 1e-6},
                           {"alg_temp": 1e6}, {"eps": 1e-12}, {"top_p": 1e-300, "temperature": 1}])):
        for f in fields:
            st, b = srv.post("/v1/completions", {"prompt": "What is 2 + 3?", "max_tokens": 16, **f})
            R.check("range-arith/%s/%s" % (name, json.dumps(f)), st == 200,
                    "%d %s" % (st, message(b)[:200]))
    # The sweep's instance, refused before it takes a decode slot.
    st, b = s.post("/v1/completions", {"prompt": "hi", "cfg_scale": 1e300})
    R.check("range/cfg_scale-1e300", st == 400 and b["error"]["param"] == "cfg_scale",
            "%d %s" % (st, message(b)[:160]))


def check_cli_ranges(R, d):
    base = ["generate", "--prompt", "What is 2 + 3?", "--gen-length", "16", "--block-length", "8",
            "--threads", "1"]
    for flag, ok_v, bad_v, model in (("--temperature", "1e-6", "1e-7", LLADA),
                                     ("--cfg-scale", "1000", "1e300", LLADA),
                                     ("--alg-temp", "1e6", "1e7", DREAM),
                                     ("--eps", "1e-12", "1e-300", DREAM),
                                     ("--factor", "1e6", "1e7", LLADA)):
        r = run(d, base + ["-m", model, flag, ok_v])
        R.check("cli-range/%s=%s" % (flag, ok_v), r.returncode == 0, r.stderr.strip()[-200:])
        r = run(d, base + ["-m", model, flag, bad_v])
        R.check("cli-range/%s=%s" % (flag, bad_v), r.returncode == 1 and flag in r.stderr,
                r.stderr.strip()[-200:])
    r = run(d, ["serve", "--queue", "1000000", "--port", "0"], timeout=60)
    R.check("cli-range/serve-queue", r.returncode == 1 and "--queue" in r.stderr,
            r.stderr.strip()[-200:])


# ---- class 6 -------------------------------------------------------------------------------

def check_grid_keys(R, d, work):
    base = {"out": os.path.join(work, "grid-out"),
            "tasks": [{"task": "synth", "data": "data/synth/test.jsonl"}]}
    cases = {
        "top-level": ({**base, "gird": {"threshold": [0.9]}}, "did you mean 'grid'"),
        "task-flag": ({**base, "tasks": [{"task": "synth", "data": "x", "limt": 2}]},
                      "did you mean 'limit'"),
        "fixed-flag": ({**base, "fixed": {"block-lenght": 16}}, "did you mean 'block-length'"),
        "grid-axis": ({**base, "grid": {"cahce": ["none"]}}, "did you mean 'cache'"),
        "bundle-flag": ({**base, "grid": {"kv": [{"name": "k", "kv-bit": 2}]}},
                        "did you mean 'kv-bits'"),
        "calibrate-entry": ({**base, "calibrate": [{"out": "a.safetensors", "arsg": []}]},
                            "did you mean 'args'"),
        "far-off": ({**base, "zzzzzzzz": 1}, "unknown key 'zzzzzzzz'"),
        # Class 3 in the same file: values of the wrong type, named.
        "task-number": ({**base, "tasks": [{"task": 5, "data": "x"}]}, "tasks[0].task"),
        "data-number": ({**base, "tasks": [{"task": "synth", "data": 5}]}, "tasks[0].data"),
        "requires_model-string": ({**base, "requires_model": "yes"}, "requires_model"),
        "grid-values-object": ({**base, "grid": {"cache": {"a": 1}}}, "grid.cache"),
        "args-object": ({**base, "args": [{"a": 1}]}, "args"),
        "bundle-without-name": ({**base, "grid": {"kv": [{"kv": "kivi"}]}}, "\"name\""),
        "deep": (None, "nested deeper"),
    }
    for name, (cfg, want) in cases.items():
        path = os.path.join(work, "grid-%s.json" % name)
        with open(path, "w") as f:
            f.write(json.dumps(cfg) if cfg is not None
                    else '{"out": "x", "tasks": %s}' % nested(100000))
        r = run(d, ["grid", "--config", path, "--dry-run"])
        R.check("grid-config/" + name, r.returncode == 1 and want in r.stderr
                and path in r.stderr and "internal error" not in r.stderr,
                "exit %d: %s" % (r.returncode, r.stderr.strip()[-200:]))
    for cfg in sorted(os.listdir(os.path.join(ROOT, "configs"))):
        r = run(d, ["grid", "--config", os.path.join(ROOT, "configs", cfg), "--dry-run", "-m", LLADA,
                    "--out", os.path.join(work, "dry")])
        R.check("grid-config/repo-%s-accepted" % cfg, r.returncode == 0, r.stderr.strip()[-200:])


# ---- class 7 -------------------------------------------------------------------------------

def check_pair_locations(R, d, work):
    cases = {"text-empty-answer": [{"prompt": "What is 2 + 3?", "answer": "5"}, None,
                                   {"prompt": "What is 1 + 1?", "answer": ""}],
             "ids-empty-answer": [{"prompt_ids": [5, 6], "answer_ids": [7]}, None,
                                  {"prompt_ids": [5, 6], "answer_ids": []}]}
    for name, recs in cases.items():
        path = os.path.join(work, "pairs-%s.jsonl" % name)
        with open(path, "w") as f:
            for r in recs:
                f.write((json.dumps(r) if r is not None else "") + "\n")
        r = run(d, ["calibrate", "--data", path, "--out", os.path.join(work, "a.safetensors"),
                    "--threads", "1"])
        R.check("pairs/" + name, r.returncode == 1 and "%s:3" % path in r.stderr
                and "answer" in r.stderr, "exit %d: %s" % (r.returncode, r.stderr.strip()[-200:]))


# ---- class 8 -------------------------------------------------------------------------------

def check_output_paths(R, d, work):
    art = os.path.join(ROOT, "fuzz", "corpus", "calib_artifact", "dllm_kvq")
    outdir = os.path.join(work, "pngdir")
    os.makedirs(outdir, exist_ok=True)
    r = run(d, ["calib-report", art, "--png", outdir])
    R.check("paths/png-directory", r.returncode == 1 and outdir in r.stderr
            and not os.path.exists(outdir + ".png") and "wrote" not in r.stderr,
            "exit %d: %s" % (r.returncode, r.stderr.strip()[-200:]))
    name = os.path.join(outdir, "heatmap")  # no extension: written exactly there
    r = run(d, ["calib-report", art, "--png", name])
    ok = (r.returncode == 0 and ("wrote %s\n" % name) in r.stderr and os.path.isfile(name)
          and open(name, "rb").read(8) == b"\x89PNG\r\n\x1a\n" and not os.path.exists(name + ".png")
          and sorted(os.listdir(outdir)) == ["heatmap"])
    R.check("paths/png-no-extension", ok, "exit %d: %s; dir %s" % (
        r.returncode, r.stderr.strip()[-200:], os.listdir(outdir)))
    r = run(d, ["calib-report", art, "--png", os.path.join(work, "missing-dir", "x.png")])
    R.check("paths/png-missing-directory", r.returncode == 1 and "does not exist" in r.stderr,
            r.stderr.strip()[-200:])
    r = run(d, ["make-pairs", "--task", "synth", "--data", os.path.join(ROOT, "data", "synth",
                                                                        "test.jsonl"),
                "--out", outdir, "--limit", "2"])
    R.check("paths/atomic-writer-directory", r.returncode == 1 and "is a directory" in r.stderr,
            "exit %d: %s" % (r.returncode, r.stderr.strip()[-200:]))


# ---- class 9 -------------------------------------------------------------------------------

def model_copy(src, dst, gen_changes):
    return linked_copy(src, dst, "generation_config.json", gen_changes)


def check_model_files(R, d, work):
    gen = ["generate", "--prompt", "What is 2 + 3?", "--threads", "1"]
    for name, mask, want in (("disagrees", 509, "contradicts"),
                             ("outside-vocab", 600, "outside the vocabulary"),
                             ("negative", -1, "mask_token_id"), ("string", "510", "mask_token_id")):
        m = model_copy(DREAM, os.path.join(work, "dream-mask-" + name), {"mask_token_id": mask})
        r = run(d, gen + ["-m", m])
        both = os.path.join(m, "generation_config.json") in r.stderr and (
            os.path.join(m, "config.json") in r.stderr or name in ("negative", "string"))
        R.check("model-files/dream-mask-" + name, r.returncode == 1 and want in r.stderr and both,
                "exit %d: %s" % (r.returncode, r.stderr.strip()[-250:]))
    m = model_copy(DREAM, os.path.join(work, "dream-mask-agrees"), {"mask_token_id": 510})
    r = run(d, gen + ["-m", m, "--gen-length", "16", "--block-length", "16"])
    R.check("model-files/dream-mask-agrees", r.returncode == 0, r.stderr.strip()[-200:])


# ---- class 10 ------------------------------------------------------------------------------

def check_serve_defaults(R, d, work):
    m = model_copy(LLADA, os.path.join(work, "llada-steps5"), {"steps": 5})
    cases = {"flag-steps": ["--steps", "5"],
             "generation-config-steps": ["-m", m],
             "steps-over-length": ["--gen-length", "16", "--block-length", "16", "--steps", "32"],
             "no-room-in-canvas": ["--max-canvas", "48"],
             "cfg-with-cache": ["--cfg-scale", "1", "--cache", "dual"]}
    for name, args in cases.items():
        r = run(d, ["serve", "--port", "0", "--threads", "1"] + args, timeout=120)
        R.check("serve-defaults/" + name, r.returncode == 1 and "listening" not in r.stderr
                and "generation_config.json" in r.stderr and "cannot decode" in r.stderr,
                "exit %d: %s" % (r.returncode, r.stderr.strip()[-250:]))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--dllmq", default=os.path.join(ROOT, "build", "dllmq"))
    ap.add_argument("--workdir")
    a = ap.parse_args(argv)
    work = os.path.abspath(a.workdir or tempfile.mkdtemp(prefix="dllmq_hostile_"))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    d, R = os.path.abspath(a.dllmq), Results()
    os.chdir(ROOT)
    common = ["--threads", "1", "--max-body", str(MAX_BODY), "--parallel", "2"]
    with Server(d, common) as s, Server(d, common + ["-m", DREAM]) as sd:
        status = run_all(R, [
            lambda: check_nesting(R, s),
            lambda: check_body_limits(R, s),
            lambda: check_types(R, s),
            lambda: check_data_types(R, d, work),
            lambda: check_ranges(R, s, sd),
            lambda: check_cli_ranges(R, d),
            lambda: check_grid_keys(R, d, work),
            lambda: check_pair_locations(R, d, work),
            lambda: check_output_paths(R, d, work),
            lambda: check_model_files(R, d, work),
            lambda: check_serve_defaults(R, d, work)])
    return status


if __name__ == "__main__":
    sys.exit(main())
