#!/usr/bin/python3
"""Crash-safe outputs (issue 16), driven through the `dllmq` binary:

  - kill -9 at random points of `dllmq eval` (fake generator, many kills; the embedded model,
    a few), then --resume until it finishes: every sample is in samples.jsonl exactly once and
    the summary equals that of an uninterrupted run;
  - kill -9 at random points of `dllmq calibrate` writing over an existing artifact: after each
    kill the file is the old artifact or the complete new one, byte for byte, and a rerun gives
    the artifact of an uninterrupted run;
  - a full disk (a small tmpfs, mounted here; needs root, else skipped and said so): `eval`
    stops with an error naming the samples file, nothing torn is left, and --resume after space
    comes back finishes with every sample once; `calibrate` onto a full disk fails naming the
    file and leaves the old artifact intact;
  - the checkpoint truncated or rewritten while `generate` runs: an error naming the file and
    exit status 1, not SIGBUS.

    test_crash_safe.py [--dllmq build/dllmq] [--workdir DIR] [--seed N]
Last line "N passed, N failed".
"""
import argparse
import glob
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results import Results, run_all  # noqa: E402

MODEL = os.path.join(ROOT, "models", "dllmq-synth-tiny")
DATA = os.path.join(ROOT, "data", "synth", "test.jsonl")
CALIB_DATA = os.path.join(ROOT, "data", "synth", "validation.jsonl")
ENV = dict(os.environ, OMP_NUM_THREADS="1")
# Summary fields that are measurements of time, not results.
TIMING = {"mean_gen_s", "tokens_per_s", "mean_score_s"}


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def run_to_end(cmd, timeout=900):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=ENV)


def kill_at(cmd, delay):
    """Starts cmd, SIGKILLs it after `delay` seconds (if still running); True if it finished."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    try:
        p.wait(timeout=delay)
        return p.returncode == 0
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGKILL)
        p.wait()
        return False


def results_of(summary):
    return {k: v for k, v in summary.items() if k not in TIMING and k != "config"}


def eval_cmd(d, out, extra):
    return [d, "eval", "--task", "synth", "--data", DATA, "--out", out, "--json"] + extra


def check_eval_resume(d, res, work, name, extra, n, kills, rng):
    ref = os.path.join(work, name + "-ref")
    t0 = time.monotonic()
    r = run_to_end(eval_cmd(d, ref, extra))
    # Kill points are drawn inside the uninterrupted run's own duration, so a fast machine
    # cannot finish the whole run before the first kill (a fixed window did, on CI).
    full = time.monotonic() - t0
    if r.returncode != 0:
        res.check(name + "/reference-run", False, r.stderr.strip()[-300:])
        return
    want = results_of(json.loads(r.stdout))
    out = os.path.join(work, name + "-killed")
    killed = 0
    for _ in range(kills):
        resume = ["--resume"] if os.path.exists(os.path.join(out, "config.json")) else []
        if kill_at(eval_cmd(d, out, extra + resume), rng.uniform(0.1, 0.8) * full):
            break
        killed += 1
    r = run_to_end(eval_cmd(d, out, extra + ["--resume"]))
    ok = r.returncode == 0
    rows = read_jsonl(os.path.join(out, "samples.jsonl")) if ok else []
    ids = [x["task_id"] for x in rows]
    res.check(name + "/was-killed", killed >= 1, "%d kills" % killed)
    res.check(name + "/each-sample-once", ok and len(ids) == n and len(set(ids)) == n,
              "%d kills, %d rows, %d distinct, exit %d %s" % (killed, len(ids), len(set(ids)),
                                                            r.returncode, r.stderr.strip()[-200:]))
    got = results_of(json.loads(r.stdout)) if ok else None
    res.check(name + "/summary-as-uninterrupted", got == want,
              "" if got == want else "%s vs %s" % (got, want))
    with open(os.path.join(out, "summary.json")) as f:
        res.check(name + "/summary-file-whole", results_of(json.load(f)) == want)


def test_eval_kills(d, res, work, rng):
    n = 30
    fake = os.path.join(work, "fake.jsonl")
    with open(fake, "w") as f:
        for i, row in enumerate(read_jsonl(DATA)[:n]):
            f.write(json.dumps({"task_id": i, "response": row["answer"] if i % 3 else "no"}) + "\n")
    check_eval_resume(d, res, work, "eval-fake", ["--limit", str(n), "--fake-responses", fake,
                                                  "--fake-delay-ms", "40"], n, 25, rng)
    check_eval_resume(d, res, work, "eval-model", ["-m", MODEL, "--limit", "12", "--threads", "1",
                                                   "--cache", "dual", "--threshold", "0.9"],
                      12, 6, rng)


def test_calibrate_kills(d, res, work, rng):
    def cmd(out, limit):
        return [d, "calibrate", "-m", MODEL, "--data", CALIB_DATA, "--chat", "--method", "kvquant",
                "--trajectory", "ar", "--limit", str(limit), "--threads", "1", "--out", out]
    ref = os.path.join(work, "calib-ref.safetensors")
    old = os.path.join(work, "calib-old.safetensors")
    for path, limit in ((ref, 24), (old, 4)):
        r = run_to_end(cmd(path, limit))
        if r.returncode != 0:
            res.check("calibrate/reference-run", False, r.stderr.strip()[-300:])
            return
    want, old_bytes = open(ref, "rb").read(), open(old, "rb").read()
    target = os.path.join(work, "calib", "kvq.safetensors")
    os.makedirs(os.path.dirname(target))
    shutil.copyfile(old, target)
    states, torn = set(), 0
    for _ in range(12):
        kill_at(cmd(target, 24), rng.uniform(0.05, 1.5))
        b = open(target, "rb").read()
        if b == want:
            states.add("new")
        elif b == old_bytes:
            states.add("old")
        else:
            torn += 1
        shutil.copyfile(old, target)  # start each try from the old artifact again
    res.check("calibrate/kill-leaves-old-or-new", torn == 0, "states seen %s, torn %d" % (sorted(states), torn))
    r = run_to_end(cmd(target, 24))
    res.check("calibrate/rerun-equals-uninterrupted", r.returncode == 0 and open(target, "rb").read() == want,
              r.stderr.strip()[-200:])


class Tmpfs:
    def __init__(self, path, size):
        self.path = path
        os.makedirs(path, exist_ok=True)
        self.ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s" % size, "tmpfs", path],
                                 capture_output=True).returncode == 0

    def resize(self, size):
        subprocess.run(["mount", "-o", "remount,size=%s" % size, self.path], check=True)

    def close(self):
        if self.ok:
            subprocess.run(["umount", self.path])


def test_full_disk(d, res, work):
    fs = Tmpfs(os.path.join(work, "small"), "64k")
    if not fs.ok:
        print("note: cannot mount a tmpfs (needs root); the full-disk checks were skipped")
        return
    try:
        n = 40
        fake = os.path.join(work, "fake-long.jsonl")
        with open(fake, "w") as f:  # ~4 KB per sample: 64 KiB fills after about a dozen
            for i in range(n):
                f.write(json.dumps({"task_id": i, "response": "#### 1 " + "x" * 4000}) + "\n")
        out = os.path.join(fs.path, "run")
        r = run_to_end(eval_cmd(d, out, ["--limit", str(n), "--fake-responses", fake]))
        msg = r.stderr
        res.check("full-disk/eval-error-names-file",
                  r.returncode == 1 and "samples.jsonl" in msg and "No space left on device" in msg,
                  "exit %d: %s" % (r.returncode, msg.strip()[-300:]))
        res.check("full-disk/eval-no-summary", not os.path.exists(os.path.join(out, "summary.json")))
        fs.resize("16m")
        r = run_to_end(eval_cmd(d, out, ["--limit", str(n), "--fake-responses", fake, "--resume"]))
        ids = [x["task_id"] for x in read_jsonl(os.path.join(out, "samples.jsonl"))] if r.returncode == 0 else []
        res.check("full-disk/eval-resume-each-sample-once", len(ids) == n and len(set(ids)) == n,
                  "exit %d, %d rows: %s" % (r.returncode, len(ids), r.stderr.strip()[-200:]))
        with open(os.path.join(out, "summary.json")) as f:
            res.check("full-disk/eval-summary-complete", json.load(f).get("n") == n)

        fs.close()  # a fresh, small filesystem for calibrate
        fs = Tmpfs(fs.path, "64k")
        target = os.path.join(fs.path, "kvq.safetensors")
        with open(target, "wb") as f:
            f.write(b"old artifact")
        filler = os.path.join(fs.path, "filler")
        subprocess.run(["dd", "if=/dev/zero", "of=" + filler, "bs=4k", "count=64"], capture_output=True)
        r = run_to_end([d, "calibrate", "-m", MODEL, "--data", CALIB_DATA, "--chat", "--method", "kvquant",
                        "--limit", "4", "--threads", "1", "--out", target])
        res.check("full-disk/calibrate-error-names-file",
                  r.returncode == 1 and target in r.stderr and "No space left" in r.stderr,
                  "exit %d: %s" % (r.returncode, r.stderr.strip()[-300:]))
        res.check("full-disk/calibrate-old-artifact-intact", open(target, "rb").read() == b"old artifact")
        res.check("full-disk/no-temporaries-left", not glob.glob(os.path.join(fs.path, ".*tmp*")),
                  str(glob.glob(os.path.join(fs.path, ".*"))))
    finally:
        fs.close()


def test_model_changed_during_run(d, res, work):
    for how in ("truncate", "rewrite"):
        m = os.path.join(work, "model-" + how)
        shutil.copytree(MODEL, m)
        st = os.path.join(m, "model.safetensors")
        p = subprocess.Popen([d, "generate", "-m", m, "--prompt-ids", "1,2,3", "--gen-length", "480",
                              "--block-length", "480", "--steps", "480", "--threads", "1", "--show-steps"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
        p.stderr.readline()  # the resolved parameters: the model is mapped
        for _ in range(3):
            p.stderr.readline()  # a few steps decoded
        if how == "truncate":
            os.truncate(st, os.path.getsize(st) // 2)
        else:
            time.sleep(0.02)
            with open(st, "r+b") as f:  # same size, other bytes, in place
                f.seek(os.path.getsize(st) // 2)
                f.write(b"\x00" * 4096)
        err = p.stderr.read()
        p.wait(timeout=300)
        ok = p.returncode == 1 and "model.safetensors" in err and ("while in use" in err or "truncated" in err)
        res.check("mmap/%s-during-generate" % how, ok, "exit %d: %s" % (p.returncode, err.strip()[-300:]))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--dllmq", default=os.path.join(ROOT, "build", "dllmq"))
    ap.add_argument("--workdir")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    a = ap.parse_args(argv)
    work = a.workdir or tempfile.mkdtemp(prefix="dllmq_crash_")
    if os.path.ismount(os.path.join(work, "small")):
        subprocess.run(["umount", os.path.join(work, "small")])
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    print("kill points drawn with --seed %d" % a.seed)
    rng = random.Random(a.seed)
    d, res = os.path.abspath(a.dllmq), Results()
    return run_all(res, [
        lambda: test_eval_kills(d, res, work, rng),
        lambda: test_calibrate_kills(d, res, work, rng),
        lambda: test_full_disk(d, res, work),
        lambda: test_model_changed_during_run(d, res, work)])


if __name__ == "__main__":
    sys.exit(main())
