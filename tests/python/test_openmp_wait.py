#!/usr/bin/python3
"""OpenMP's wait policy without re-execution (issue 29): every dllmq process starts with libgomp
reading OMP_WAIT_POLICY=passive and GOMP_SPINCOUNT=10000 (a short spin, then sleep) unless the
user set either, and the process runs once.

What libgomp read is taken from libgomp itself: OMP_DISPLAY_ENV=verbose makes its constructor
print its settings, once per process start, so a re-executed process prints two blocks, and a
value set after libgomp's constructor (too late) shows libgomp's default spin count (300000).
`inspect --json` must report the same values, and a user's choice is left alone.

Usage: test_openmp_wait.py --dllmq BIN --workdir DIR   (last line: 'N passed, N failed')
"""
import argparse
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results import Results, run_all  # noqa: E402


def run(dllmq, args, **env_set):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(env_set, OMP_DISPLAY_ENV="verbose")
    return subprocess.run([dllmq] + args, env=env, capture_output=True, text=True, timeout=120)


def libgomp_read(stderr):
    """The blocks libgomp printed: one dict per process start."""
    blocks = re.findall(r"OPENMP DISPLAY ENVIRONMENT BEGIN(.*?)OPENMP DISPLAY ENVIRONMENT END",
                        stderr, re.S)
    return [dict(re.findall(r"^\s*(\w+) = '([^']*)'", b, re.M)) for b in blocks]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dllmq", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    res = Results()

    def case(name, user_env, want_policy, want_spin, want_desc):
        def check():
            p = run(a.dllmq, ["inspect", "-m", "synth-llada", "--json"], **user_env)
            res.check(name + "/exit", p.returncode == 0,
                      "" if p.returncode == 0 else p.stderr[-300:])
            blocks = libgomp_read(p.stderr)
            res.check(name + "/one-start", len(blocks) == 1, "%d libgomp starts" % len(blocks))
            if blocks:
                got = (blocks[-1].get("OMP_WAIT_POLICY"), blocks[-1].get("GOMP_SPINCOUNT"))
                res.check(name + "/libgomp-read", got == (want_policy, want_spin), repr(got))
            desc = json.loads(p.stdout).get("openmp_wait") if p.returncode == 0 else None
            res.check(name + "/inspect", desc == want_desc, repr(desc))
        return check

    checks = [
        case("default", {}, "PASSIVE", "10000", "passive, spin 10000"),
        case("user-active", {"OMP_WAIT_POLICY": "active"}, "ACTIVE", "30000000000",
             "active, spin default, user's"),
        case("user-spin", {"GOMP_SPINCOUNT": "77"}, "PASSIVE", "77", "default, spin 77, user's"),
    ]
    return run_all(res, checks)


if __name__ == "__main__":
    sys.exit(main())
