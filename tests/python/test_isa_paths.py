#!/usr/bin/python3
"""Every kernel path this CPU has gives the same decoding (issue 29): the projections' packed
kernels keep one FMA chain per output in ascending k on every instruction set, so forcing
DLLMQ_ISA=scalar|avx2|avx512 must give bit-identical logits (`dllmq logits`, compared as text),
hence the same tokens, as the default (CPUID's choice). Runs the embedded LLaDA and Dream models (demo prompt, dual cache) and
a no-cache run under each path the CPU supports, checks that `inspect --json` names the forced
path, and that a path the CPU lacks, or a bad value, is refused with an error naming DLLMQ_ISA.
The CPU's features come from /proc/cpuinfo, independently of dllmq's own CPUID check.

Usage: test_isa_paths.py --dllmq BIN --workdir DIR   (last line: 'N passed, N failed')
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PROMPT = "Mia has 23 marbles. She buys 14 more marbles. How many marbles does Mia have now?"
NEEDS = {"avx2": {"avx2", "fma", "f16c"}, "avx512": {"avx512f", "avx512bw", "avx512vl", "avx512dq", "fma", "f16c"}}


def cpu_flags():
    for line in open("/proc/cpuinfo"):
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def run(dllmq, isa, args):
    env = dict(os.environ)
    env.pop("DLLMQ_QUANT_ISA", None)
    if isa is None:
        env.pop("DLLMQ_ISA", None)
    else:
        env["DLLMQ_ISA"] = isa
    return subprocess.run([dllmq] + args, env=env, capture_output=True, text=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dllmq", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    flags = cpu_flags()
    have = ["scalar"] + [i for i in ("avx2", "avx512") if NEEDS[i] <= flags]
    lack = [i for i in ("avx2", "avx512") if i not in have]
    ok_all, n_ok, n_fail = True, 0, 0

    def check(ok, msg):
        nonlocal n_ok, n_fail
        print(("PASS " if ok else "FAIL ") + msg)
        n_ok += ok
        n_fail += not ok

    cases = [("synth-llada dual", ["generate", "-m", os.path.join(ROOT, "models", "dllmq-synth-tiny"), "--chat", "-p",
                                   PROMPT, "--gen-length", "32", "--block-length", "16", "--cache", "dual",
                                   "--threads", "2", "--json"]),
             ("synth-dream none", ["generate", "-m", os.path.join(ROOT, "models", "dllmq-synth-dream-tiny"), "--chat",
                                   "-p", PROMPT, "--gen-length", "16", "--block-length", "16", "--cache", "none",
                                   "--threads", "2", "--json"])]
    for name, args in cases:
        base = run(a.dllmq, None, args)
        if base.returncode != 0:
            check(False, f"{name}: default path exited {base.returncode}: {base.stderr.strip()[-300:]}")
            continue
        want = json.loads(base.stdout)["tokens"]
        for isa in have:
            r = run(a.dllmq, isa, args)
            got = json.loads(r.stdout)["tokens"] if r.returncode == 0 else None
            check(got == want, f"{name}: DLLMQ_ISA={isa} gives the default path's {len(want)} tokens"
                  + ("" if r.returncode == 0 else f" (exit {r.returncode}: {r.stderr.strip()[-200:]})"))
    model = os.path.join(ROOT, "models", "dllmq-synth-tiny")
    # Raw logits of one forward (23 rows: tails of every row tile), printed in full: identical text.
    ids = ",".join(str(7 + 13 * i) for i in range(23))
    base = run(a.dllmq, None, ["logits", "-m", model, "--ids", ids, "--json"])
    for isa in have:
        r = run(a.dllmq, isa, ["logits", "-m", model, "--ids", ids, "--json"])
        check(base.returncode == 0 and r.stdout == base.stdout and len(r.stdout) > 1000,
              f"logits of 23 rows under DLLMQ_ISA={isa} are bit-identical to the default path's "
              f"({len(r.stdout)} bytes of JSON)")
    for isa in have:
        r = run(a.dllmq, isa, ["inspect", "-m", model, "--json"])
        kern = json.loads(r.stdout).get("proj_kernels") if r.returncode == 0 else None
        check(kern == "packed " + isa, f"inspect under DLLMQ_ISA={isa} reports {kern!r}")
    for bad in lack + ["sse9"]:
        r = run(a.dllmq, bad, ["inspect", "-m", model])
        check(r.returncode != 0 and f"DLLMQ_ISA={bad}" in r.stderr,
              f"DLLMQ_ISA={bad} refused (exit {r.returncode}): {r.stderr.strip()[-160:]!r}")
    print(f"{n_ok} passed, {n_fail} failed")
    sys.exit(0 if n_fail == 0 else 1)


if __name__ == "__main__":
    main()
