#!/usr/bin/python3
"""Inputs a user or a file gives, refused where they enter with an error that names the flag,
file or field and the accepted range (issue 16), driven through the `dllmq` binary:

  - every numeric flag of every command shows its accepted range in --help, and NaN,
    infinities, negative and out-of-range values are refused with exit status 1 and a message
    naming the flag and the range, before any model loads;
  - a corrupted config.json (zero / NaN-producing numbers, contradicting architecture fields)
    is refused naming the field; weights that compute non-finite logits stop decoding with an
    error instead of exiting 0 with garbage;
  - a checkpoint that predicts the mask token itself stops decoding with an error instead of
    stepping forever;
  - a generation length that cannot fit in memory is refused with the bytes it needs (under an
    address-space limit), instead of std::bad_alloc;
  - `tokenize --text ""` is valid input and gives no ids.

    test_input_errors.py [--dllmq build/dllmq] [--workdir DIR]
Last line "N passed, N failed".
"""
import argparse
import json
import os
import re
import resource
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_dirs import linked_copy  # noqa: E402
from results import Results, run_all  # noqa: E402

MODEL = os.path.join(ROOT, "models", "dllmq-synth-tiny")


def run(dllmq, args, limit_as=None, timeout=300):
    def pre():
        if limit_as:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([dllmq] + args, capture_output=True, text=True, timeout=timeout,
                          preexec_fn=pre, env=env)


def numeric_flags(dllmq, cmd):
    """{flag: type text} of the options --help lists with a numeric type."""
    out = run(dllmq, [cmd, "--help"]).stdout
    flags = {}
    for m in re.finditer(r"^\s+(?:-\w,)?(--[\w-]+)\s+((?:INT|UINT|FLOAT|NUMBER)\S*(?: \S+)*?)\s{2}", out, re.M):
        flags[m.group(1)] = m.group(2)
    return flags


def commands(dllmq):
    """The subcommands `dllmq --help` lists (new ones are covered without editing this test)."""
    out = run(dllmq, ["--help"]).stdout
    return re.findall(r"^  ([a-z][\w-]*)\s{2,}", out.split("Subcommands:", 1)[1], re.M)


def test_every_numeric_flag_has_a_range(d, res):
    seen = 0
    cmds = commands(d)
    res.check("help-range/found-commands", len(cmds) >= 10, " ".join(cmds))
    for cmd in cmds:
        for flag, typ in numeric_flags(d, cmd).items():
            seen += 1
            res.check("help-range/%s/%s" % (cmd, flag), re.search(r"in (0 or )?[\[(]", typ) is not None, typ)
    res.check("help-range/found-numeric-flags", seen >= 30, "%d numeric flags" % seen)


# (command, flag, bad values, fragment of the range): refused at parse time, before the model.
BAD = [
    ("generate", "--temperature", ["nan", "-1", "inf", "1e-7", "2e6"], "0 or [1e-06, 1e+06]"),
    ("generate", "--threshold", ["nan", "0", "1.5", "-inf"], "(0, 1]"),
    ("generate", "--factor", ["nan", "0", "-2", "2e6"], "(0, 1e+06]"),
    ("generate", "--top-p", ["nan", "0", "2"], "(0, 1]"),
    ("generate", "--top-k", ["-1", "1.5"], "[0, "),
    ("generate", "--eps", ["nan", "1", "-0.1", "0", "1e-300"], "[1e-12, 1)"),
    ("generate", "--cfg-scale", ["nan", "-1", "1e300", "1001"], "[0, 1000]"),
    ("generate", "--alg-temp", ["nan", "-1", "1e-300"], "0 or [1e-06, 1e+06]"),
    ("generate", "--gen-length", ["0", "-5", "16777217", "nan"], "[1, 16777216]"),
    ("generate", "--block-length", ["0"], "[1, "),
    ("generate", "--steps", ["0", "-1"], "[1, "),
    ("generate", "--kv-group", ["0", "5000"], "[1, 4096]"),
    ("generate", "--threads", ["-1"], "[0, 4096]"),
    ("generate", "--seed", ["-1", "1e3"], "[0, 2^64)"),
    ("bench", "--prompt-length", ["0", "nan"], "[1, "),
    ("bench", "--repeat", ["0"], "[1, 1000]"),
    ("eval", "--workers", ["0", "-2"], "[1, 256]"),
    ("eval", "--timeout", ["0", "nan", "-3"], "(0, 86400]"),
    ("eval", "--mem-mb", ["0"], "[16, "),
    ("calibrate", "--budget", ["nan", "1.5", "-0.1"], "[0, 1]"),
    ("calibrate", "--budget-cap", ["0.5", "inf"], "[1, inf)"),
    ("calibrate", "--outlier-percent", ["nan", "50", "-1"], "[0, 50)"),
    ("calibrate", "--reservoir-rows", ["0"], "[1, "),
    ("calibrate", "--sink", ["-1"], "[0, "),
    ("tokenize", "--repeat", ["0", "-1"], "[1, 1000]"),
]


def test_bad_flag_values(d, res):
    base = {"generate": ["-m", MODEL, "--prompt-ids", "1,2,3"],
            "bench": ["-m", MODEL],
            "eval": ["--task", "synth", "--data", os.path.join(ROOT, "data/synth/test.jsonl"),
                     "--responses", "/nonexistent"],
            "calibrate": ["-m", MODEL, "--data", "/nonexistent", "--out", "/nonexistent/x"],
            "tokenize": ["-m", MODEL, "--bench", "/nonexistent"]}
    for cmd, flag, values, rng in BAD:
        for v in values:
            r = run(d, [cmd] + base[cmd] + [flag + "=" + v])
            ok = r.returncode == 1 and flag in r.stderr and rng in r.stderr and "'%s'" % v in r.stderr
            res.check("bad-flag/%s%s=%s" % (cmd, flag, v), ok,
                      "exit %d: %s" % (r.returncode, r.stderr.strip()[-200:]))


def write_model(dst, **config_changes):
    """A copy of the embedded model (weights linked) with config.json fields changed."""
    return linked_copy(MODEL, dst, "config.json", config_changes,
                       dump=lambda c: json.dumps(c).replace('"__INF__"', "1e999"))


def test_corrupt_configs(d, res, work):
    cases = [
        ("rms_norm_eps=0", {"rms_norm_eps": 0}, "'rms_norm_eps' = 0: expected a finite number in [1e-30, 1)"),
        ("rms_norm_eps=-1", {"rms_norm_eps": -1e-5}, "'rms_norm_eps'"),
        ("rope_theta=1e999", {"rope_theta": "__INF__"}, "number overflow parsing '1e999'"),
        ("rope_theta=0", {"rope_theta": 0}, "'rope_theta' = 0"),
        ("n_heads=0", {"n_heads": 0}, "'n_heads' = 0 out of range"),
        ("n_heads=3", {"n_heads": 3}, "not divisible by the number of heads 3"),
        ("arch-contradiction", {"architectures": ["DreamModel"]}, "name different architectures"),
        ("foreign-field", {"num_hidden_layers": 4}, "'num_hidden_layers' belongs to Dream configs"),
        ("mask-outside-vocab", {"mask_token_id": 512}, "mask_token_id 512 outside the vocabulary"),
    ]
    for name, change, msg in cases:
        m = write_model(os.path.join(work, "cfg-" + name), **change)
        r = run(d, ["generate", "-m", m, "--prompt-ids", "1,2,3", "--gen-length", "16", "--threads", "1"])
        res.check("config/" + name, r.returncode == 1 and msg in r.stderr and "config.json" in r.stderr,
                  "exit %d: %s" % (r.returncode, r.stderr.strip()[-240:]))


def test_nonfinite_weights(d, res, work):
    """A checkpoint holding NaN weights: decoding stops with an error naming the model."""
    m = os.path.join(work, "nan-weights")
    write_model(m)
    st = os.path.join(m, "model.safetensors")
    os.unlink(st)
    with open(os.path.join(MODEL, "model.safetensors"), "rb") as f:
        buf = bytearray(f.read())
    n = struct.unpack("<Q", buf[:8])[0]
    header = json.loads(buf[8:8 + n])
    b, e = header["model.transformer.ln_f.weight"]["data_offsets"]
    base = 8 + n
    for i in range(base + b, base + e, 2):  # bf16 NaN
        buf[i:i + 2] = b"\xc0\x7f"
    with open(st, "wb") as f:
        f.write(buf)
    r = run(d, ["generate", "-m", m, "--prompt-ids", "1,2,3", "--gen-length", "16", "--threads", "1"])
    res.check("nan-weights/refused", r.returncode == 1 and "non-finite logit" in r.stderr,
              "exit %d: %s" % (r.returncode, r.stderr.strip()[-240:]))


def test_mask_token_predicted(d, res, work):
    """A checkpoint whose most likely token is the mask token itself (its LM head all zeros, so
    every logit ties and the argmax is the first id, made the mask id here): a reveal then writes
    the mask again and the block never empties. Decoding stops with an error naming the cause,
    in every cache mode and under a threshold at temperature 0, instead of stepping forever
    (it did: a 2,048-wide random checkpoint hit this in the benchmarks)."""
    m = os.path.join(work, "mask-argmax")
    write_model(m, mask_token_id=0)
    st = os.path.join(m, "model.safetensors")
    os.unlink(st)
    with open(os.path.join(MODEL, "model.safetensors"), "rb") as f:
        buf = bytearray(f.read())
    n = struct.unpack("<Q", buf[:8])[0]
    b, e = json.loads(buf[8:8 + n])["model.transformer.ff_out.weight"]["data_offsets"]
    buf[8 + n + b:8 + n + e] = bytes(e - b)
    with open(st, "wb") as f:
        f.write(buf)
    base = ["generate", "-m", m, "--prompt-ids", "1,2,3", "--gen-length", "16", "--block-length",
            "8", "--threads", "1"]
    for mode in ("none", "prefix", "dual"):
        r = run(d, base + ["--cache", mode], timeout=120)
        res.check("mask-argmax/" + mode, r.returncode == 1 and "block 0 still holds 8 masked" in r.stderr
                  and "all 8 of its --steps share" in r.stderr and "mask token (id 0)" in r.stderr,
                  "exit %d: %s" % (r.returncode, r.stderr.strip()[-300:]))
    r = run(d, base + ["--cache", "dual", "--threshold", "0.9"], timeout=120)
    res.check("mask-argmax/threshold", r.returncode == 1 and "the last 1 without revealing" in r.stderr,
              "exit %d: %s" % (r.returncode, r.stderr.strip()[-300:]))


def test_length_that_cannot_fit(d, res):
    """16M positions of the tiny model need tens of GiB; under a 4 GiB address-space limit the
    refusal names the flag and the bytes needed (never std::bad_alloc / internal error)."""
    r = run(d, ["generate", "-m", MODEL, "--prompt-ids", "1,2,3", "--gen-length", "16777216",
                "--block-length", "16777216", "--steps", "1", "--threads", "1"], limit_as=4 << 30)
    ok = (r.returncode == 1 and "--gen-length 16777216" in r.stderr and "needs about" in r.stderr
          and "GiB" in r.stderr and "internal error" not in r.stderr)
    res.check("memory/gen-length-too-large", ok, "exit %d: %s" % (r.returncode, r.stderr.strip()[-300:]))


def test_tokenize_empty_text(d, res):
    r = run(d, ["tokenize", "-m", MODEL, "--text", "", "--json"])
    ok = r.returncode == 0 and json.loads(r.stdout or "{}").get("ids") == []
    res.check("tokenize/empty-text", ok, "exit %d: %s %s" % (r.returncode, r.stdout.strip(), r.stderr.strip()[-200:]))
    r = run(d, ["tokenize", "-m", MODEL, "--ids", "", "--json"])
    ok = r.returncode == 0 and json.loads(r.stdout or "{}").get("text") == ""
    res.check("tokenize/empty-ids", ok, "exit %d: %s" % (r.returncode, r.stderr.strip()[-200:]))
    r = run(d, ["tokenize", "-m", MODEL])
    res.check("tokenize/no-input-still-an-error", r.returncode == 1 and "exactly one of" in r.stderr,
              r.stderr.strip()[-200:])


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--dllmq", default=os.path.join(ROOT, "build", "dllmq"))
    ap.add_argument("--workdir")
    a = ap.parse_args(argv)
    work = a.workdir or tempfile.mkdtemp(prefix="dllmq_inputs_")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    d, res = os.path.abspath(a.dllmq), Results()
    return run_all(res, [
        lambda: test_every_numeric_flag_has_a_range(d, res),
        lambda: test_bad_flag_values(d, res),
        lambda: test_corrupt_configs(d, res, work),
        lambda: test_nonfinite_weights(d, res, work),
        lambda: test_mask_token_predicted(d, res, work),
        lambda: test_length_that_cannot_fit(d, res),
        lambda: test_tokenize_empty_text(d, res)])


if __name__ == "__main__":
    sys.exit(main())
