#!/usr/bin/python3
"""`dllmq grid --launcher slurm` on a real single-node Slurm cluster (docs/cluster.md).

    test_grid_slurm.py --dllmq build/dllmq --workdir DIR

As root, starts a cluster from Debian's slurm-wlm and munge (scripts/slurm_cluster.sh installs
them if missing, writes slurm.conf, starts munged, slurmctld and slurmd and waits for the node
to be idle; the daemons are stopped at the end). The grid is a small method comparison on the
embedded LLaDA model (configs/methods_synth.json cut down to 2 cells x 3 shards and one
calibration). Checks:
  - without Slurm's commands on PATH, --launcher slurm fails naming `sbatch`;
  - --dry-run prints one calibration array, one array per cell (0-2) held on the calibration it
    uses, the merge job held on all of them, the pass-through options, a user template; nothing
    is written or submitted;
  - the Slurm run gives the local run's table and samples (same responses, same scores);
  - scancel of the shard arrays mid-run, then the same command: every sample present exactly
    once, the samples written before the cancel kept byte for byte (not recomputed);
  - a cell whose artifact is missing: --status lists its failed shards with their logs, the
    merge job does not run and --status says why; no grid.md.
Last line "N passed, N failed".
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results import Results, run_all  # noqa: E402

SHARDS = 3
CAL = "dllm-kvq-ar-2"


def small_config(work, name, limit, missing_artifact=False):
    """The shipped method grid cut to fp16 and one calibrated method (or a method whose artifact
    does not exist), LLaDA, prefix cache, `limit` problems."""
    cfg = json.load(open(os.path.join(ROOT, "configs", "methods_synth.json")))
    cal = [c for c in cfg["calibrate"] if c["out"].endswith(f"/{CAL}.safetensors")][0]
    args = list(cal["args"])
    args[args.index("--limit") + 1] = "3"
    args[args.index("--data") + 1] = os.path.join(ROOT, args[args.index("--data") + 1])
    cal["args"] = args
    cfg["calibrate"] = [cal]
    kv = [b for b in cfg["grid"]["kv"] if b["name"] in ("fp16", CAL)]
    if missing_artifact:
        kv = [kv[0], {"name": "missing-artifact", "kv": "dllm-kvq",
                      "calib": os.path.join(work, "no-such-artifact.safetensors")}]
        cfg.pop("calibrate")
    cfg["grid"] = {"kv": kv, "model": ["synth-llada"]}
    cfg["fixed"]["cache"] = "prefix"
    cfg["tasks"][0]["limit"] = limit
    cfg["tasks"][0]["data"] = os.path.join(ROOT, cfg["tasks"][0]["data"])
    path = os.path.join(work, name + ".json")
    json.dump(cfg, open(path, "w"), indent=1)
    return path


class Grid:
    def __init__(self, a, env):
        self.a, self.env = a, env

    def run(self, *args, env=None, timeout=300):
        return subprocess.run([self.a.dllmq, "grid", *args], capture_output=True, text=True,
                              env=env or self.env, timeout=timeout, cwd=self.a.workdir)

    def squeue(self):
        r = subprocess.run(["squeue", "-h", "-r", "-t", "all", "--me", "-o", "%i|%T|%r"],
                           capture_output=True, text=True, env=self.env)
        return dict((l.split("|")[0], l.split("|")[1:]) for l in r.stdout.split())

    def jobs(self, out):
        st = json.load(open(os.path.join(out, "slurm", "state.json")))
        ids = [c["job"] for c in st.get("calibrations", [])]
        for c in st["cells"]:
            ids += [t["job"] for t in c["tasks"].values()]
        return st, ids + [st["merge"]["job"]]

    def wait(self, out, timeout=300):
        """Until no job of the run is pending or running."""
        _, ids = self.jobs(out)
        t0 = time.time()
        while time.time() - t0 < timeout:
            q = self.squeue()
            if not any(q.get(i, ["COMPLETED"])[0] in ("PENDING", "RUNNING", "COMPLETING",
                                                      "CONFIGURING") for i in ids):
                return True
            time.sleep(0.5)
        return False


def cell_dirs(out):
    d = os.path.join(out, "synth")
    return sorted(os.path.join(d, c) for c in os.listdir(d)) if os.path.isdir(d) else []


def shard_lines(cell):
    """task_id -> list of records over the shard files (a torn last line excluded)."""
    seen = {}
    for i in range(SHARDS):
        p = os.path.join(cell, f"samples.{i}-of-{SHARDS}.jsonl")
        if not os.path.exists(p):
            continue
        for line in open(p).read().split("\n"):
            try:
                r = json.loads(line)
            except ValueError:
                continue
            seen.setdefault(r["task_id"], []).append(r)
    return seen


def csv_rows(out):
    p = os.path.join(out, "grid.csv")
    if not os.path.exists(p):
        return None
    lines = open(p).read().splitlines()
    head = lines[0].split(",")
    keep = [i for i, h in enumerate(head) if h != "tokens_per_s"]  # wall-clock dependent
    return [[r.split(",")[i] for i in keep] for r in lines]


def check_without_slurm(a, g, res, cfg):
    env = dict(g.env, PATH="/nonexistent-dllmq-test")
    r = g.run("--config", cfg, "--out", os.path.join(a.workdir, "noslurm"), "--launcher", "slurm",
              env=env)
    res.check("without Slurm: error names the missing sbatch command",
              r.returncode != 0 and "`sbatch`" in r.stderr and "not on PATH" in r.stderr,
              r.stderr[-300:])
    res.check("without Slurm: nothing written", not os.path.exists(os.path.join(a.workdir, "noslurm", "slurm")))


def check_dry_run(a, g, res, cfg):
    env = dict(g.env, PATH="/nonexistent-dllmq-test")  # a dry run needs no Slurm
    out = os.path.join(a.workdir, "dry")
    tmpl = os.path.join(a.workdir, "site.tmpl")
    open(tmpl, "w").write("#!/bin/bash\n{{sbatch}}# site-setup-marker\ncd {{workdir}}\n{{command}}")
    r = g.run("--config", cfg, "--out", out, "--launcher", "slurm", "--shards", str(SHARDS),
              "--dry-run", "--partition", "debug", "--account", "acct1", "--time", "00:05:00",
              "--mem", "500M", "--cpus-per-task", "2", "--sbatch-line=--comment=dllmq-test",
              "--job-template", tmpl, env=env)
    blocks = {}
    for part in r.stdout.split("# ---- ")[1:]:
        name, body = part.split(" ----\n", 1)
        blocks[name] = body
    res.check("dry run: calibration, two cells, merge", r.returncode == 0 and
              sorted(blocks) == ["calibrate", "cell-0", "cell-1", "merge"], r.stderr[-300:])
    if len(blocks) != 4:
        return
    opts = ["#SBATCH --partition=debug\n", "#SBATCH --account=acct1\n", "#SBATCH --time=00:05:00\n",
            "#SBATCH --mem=500M\n", "#SBATCH --cpus-per-task=2\n", "#SBATCH --comment=dllmq-test\n",
            "# site-setup-marker\n"]
    res.check("dry run: pass-through options and the user's template in every script",
              all(o in b for b in blocks.values() for o in opts))
    cal, c0, c1, merge = blocks["calibrate"], blocks["cell-0"], blocks["cell-1"], blocks["merge"]
    first = lambda b: b.splitlines()[0]  # noqa: E731  (the sbatch line)
    res.check("dry run: calibration array of one task, no dependency",
              "#SBATCH --array=0\n" in cal and "--dependency" not in first(cal)
              and " calibrate " in cal and f"{CAL}.safetensors" in cal, first(cal))
    res.check("dry run: fp16 cell: array 0-2, shards 0/3..2/3, no dependency",
              "#SBATCH --array=0-2\n" in c0 and all(f"--shard {i}/3 ;;" in c0 for i in range(3))
              and "--dependency" not in first(c0) and "kv=fp16" in c0, first(c0))
    res.check("dry run: calibrated cell held on the calibration task",
              "#SBATCH --array=0-2\n" in c1
              and "--dependency=afterok:<calibrate>_0 --kill-on-invalid-dep=yes" in first(c1)
              and f"--calib {os.path.join(out, 'calib', 'synth-llada', CAL)}.safetensors" in c1,
              first(c1))
    res.check("dry run: merge job held on both cells and the calibration, runs --collect",
              "--dependency=afterok:<cell-0>:<cell-1>:<calibrate>" in first(merge)
              and "--array" not in merge and "--collect" in merge and "--shards 3" in merge,
              first(merge))
    res.check("dry run: threads from SLURM_CPUS_PER_TASK, not the config's --threads 1",
              all('--threads "${SLURM_CPUS_PER_TASK:-1}"' in b and "--threads 1" not in b
                  for b in (cal, c0, c1)))
    res.check("dry run: nothing written", not os.path.exists(out))
    open(tmpl, "w").write("#!/bin/bash\n{{sbatch}}\n")
    r = g.run("--config", cfg, "--out", out, "--launcher", "slurm", "--dry-run", "--job-template",
              tmpl, env=env)
    res.check("template without {{command}} refused, naming the file",
              r.returncode != 0 and "site.tmpl" in r.stderr and "{{command}}" in r.stderr,
              r.stderr[-300:])


def check_same_as_local(a, g, res, cfg):
    local, slurm = os.path.join(a.workdir, "local"), os.path.join(a.workdir, "slurm")
    r = g.run("--config", cfg, "--out", local)
    res.check("local grid runs", r.returncode == 0, r.stderr[-400:])
    t0 = time.time()
    r = g.run("--config", cfg, "--out", slurm, "--launcher", "slurm", "--shards", str(SHARDS),
              "--cpus-per-task", "1", "--time", "00:20:00")
    ok = r.returncode == 0 and g.wait(slurm)
    res.check("slurm grid submitted and finished", ok and os.path.exists(os.path.join(slurm, "grid.md")),
              "%.1f s; %s" % (time.time() - t0, r.stderr[-400:]))
    lr, sr = csv_rows(local), csv_rows(slurm)
    res.check("slurm table = local table (every column but tokens/s)", lr is not None and lr == sr,
              f"\n{lr}\n{sr}")
    for lc, sc in zip(cell_dirs(local), cell_dirs(slurm)):
        ls = {json.loads(l)["task_id"]: json.loads(l) for l in open(os.path.join(lc, "samples.jsonl"))}
        ss = shard_lines(sc)
        same = (sorted(ls) == sorted(ss) and all(len(v) == 1 for v in ss.values())
                and all(ls[k][f] == ss[k][0][f] for k in ls for f in ("response", "correct", "metrics")))
        res.check("same samples: " + os.path.basename(sc), same and len(ls) == 12, f"{len(ls)} / {len(ss)}")
    st = g.run("--status", "--out", slurm)
    res.check("--status of a finished run", st.returncode == 0 and "total: 24/24 samples" in st.stdout
              and "COMPLETED" in st.stdout and "failed or stopped" not in st.stdout, st.stdout)
    again = g.run("--config", cfg, "--out", slurm, "--launcher", "slurm", "--shards", str(SHARDS),
                  "--cpus-per-task", "1")
    res.check("rerun of a finished run submits only the merge job",
              again.returncode == 0 and "submitted 0 calibration task(s), 0 shard task(s)" in again.stderr
              and g.wait(slurm), again.stderr[-300:])


def check_local_run_taken_over(a, g, res, cfg):
    """A finished local run (one shard per cell: samples.jsonl, summary.json) submitted with
    --launcher slurm: nothing is recomputed, and the merge job writes the same table."""
    local = os.path.join(a.workdir, "local")
    before = csv_rows(local)
    r = g.run("--config", cfg, "--out", local, "--launcher", "slurm", "--cpus-per-task", "1")
    ok = r.returncode == 0 and "submitted 0 calibration task(s), 0 shard task(s)" in r.stderr and g.wait(local)
    res.check("finished local run under --launcher slurm: only the merge job, same table",
              ok and before is not None and csv_rows(local) == before, r.stderr[-300:])


def check_cancel_and_resume(a, g, res, cfg):
    out = os.path.join(a.workdir, "cancel")
    r = g.run("--config", cfg, "--out", out, "--launcher", "slurm", "--shards", str(SHARDS),
              "--cpus-per-task", "1")
    if r.returncode != 0:
        res.check("cancel run submitted", False, r.stderr[-300:])
        return
    st, _ = g.jobs(out)
    arrays = sorted({t["job"].split("_")[0] for c in st["cells"] for t in c["tasks"].values()})
    # Cancel the shard arrays as soon as the first sample of any shard is written.
    t0 = time.time()
    while time.time() - t0 < 120 and not any(shard_lines(c) for c in cell_dirs(out)):
        time.sleep(0.05)
    subprocess.run(["scancel", *arrays], env=g.env)
    g.wait(out)
    snap = {}
    for c in cell_dirs(out):
        for i in range(SHARDS):
            p = os.path.join(c, f"samples.{i}-of-{SHARDS}.jsonl")
            if os.path.exists(p):
                text = open(p).read()
                snap[p] = text[:text.rfind("\n") + 1]  # complete lines only
    before = sum(len(shard_lines(c)) for c in cell_dirs(out))
    res.check("scancel stopped the run part-way", 0 < before < 60 and
              not os.path.exists(os.path.join(out, "grid.md")), f"{before} of 60 samples")
    stat = g.run("--status", "--out", out)
    res.check("--status after scancel lists stopped shards", "failed or stopped tasks" in stat.stdout
              and "CANCELLED" in stat.stdout, stat.stdout[-600:])
    r = g.run("--config", cfg, "--out", out, "--launcher", "slurm", "--shards", str(SHARDS),
              "--cpus-per-task", "1")
    ok = r.returncode == 0 and g.wait(out)
    res.check("same command after scancel completes the run", ok and os.path.exists(os.path.join(out, "grid.md"))
              and "did not finish" in r.stderr and "resubmitted" in r.stderr, r.stderr[-300:])
    for c in cell_dirs(out):
        seen = shard_lines(c)
        once = sorted(seen, key=int) == [str(i) for i in range(30)]
        res.check("every sample exactly once: " + os.path.basename(c),
                  once and all(len(v) == 1 for v in seen.values()),
                  f"{len(seen)} ids, {sum(map(len, seen.values()))} records")
    kept = all(open(p).read().startswith(t) for p, t in snap.items())
    res.check("samples written before the cancel kept as they were (not recomputed)", kept and snap)
    md = open(os.path.join(out, "grid.md")).read() if os.path.exists(os.path.join(out, "grid.md")) else ""
    res.check("table over all 30 samples per cell", md.count("| synth | ") == 2 and
              all(f"| synth | {os.path.basename(c)} | 30 |" in md for c in cell_dirs(out)), md[:400])


def check_failing_shard(a, g, res, cfg):
    out = os.path.join(a.workdir, "fail")
    r = g.run("--config", cfg, "--out", out, "--launcher", "slurm", "--shards", str(SHARDS),
              "--cpus-per-task", "1")
    ok = r.returncode == 0 and g.wait(out)
    res.check("grid with a missing artifact submitted", ok, r.stderr[-300:])
    st = g.run("--status", "--out", out)
    failed = [l for l in st.stdout.splitlines() if "missing-artifact" in l and "shard" in l]
    logs = [l.split("log: ", 1)[1].strip() for l in st.stdout.splitlines() if "log: " in l]
    log_ok = len(logs) == SHARDS and all(os.path.exists(p) and "no-such-artifact" in open(p).read()
                                         for p in logs)
    res.check("--status lists the failed shards with exit status and log paths",
              st.returncode == 0 and len(failed) == SHARDS and all("FAILED" in l and "exit 1" in l
                                                                  for l in failed) and log_ok,
              st.stdout[-900:])
    res.check("--status: the fp16 cell finished", "kv=fp16,model=synth-llada" in st.stdout and
              any(l.startswith("synth/kv=fp16") and " 3 " in l for l in st.stdout.splitlines()))
    merge = [l for l in st.stdout.splitlines() if l.startswith("merge job")]
    res.check("merge job did not run, and --status says why",
              len(merge) == 1 and "did not run" in merge[0] and "DependencyNeverSatisfied" in merge[0]
              and not os.path.exists(os.path.join(out, "grid.md")), merge)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dllmq", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    a.dllmq = os.path.abspath(a.dllmq)
    a.workdir = os.path.abspath(a.workdir)
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    res = Results()
    same = small_config(a.workdir, "same", 12)
    cancel = small_config(a.workdir, "cancel", 30)
    failing = small_config(a.workdir, "failing", 6, missing_artifact=True)
    # A short path: munged's socket lives in the cluster directory (108-byte limit).
    cluster = tempfile.mkdtemp(prefix="dllmq-slurm-")
    env = dict(os.environ, SLURM_CONF=os.path.join(cluster, "slurm.conf"))
    g = Grid(a, env)
    checks = [lambda: check_without_slurm(a, g, res, same), lambda: check_dry_run(a, g, res, same)]
    # The daemons need root: as root, or through password-less sudo (as scripts/setup.sh does).
    as_root = [] if os.geteuid() == 0 else ["sudo", "-n"]
    harness = as_root + [os.path.join(ROOT, "scripts", "slurm_cluster.sh")]
    s = subprocess.run(harness + ["start", cluster], capture_output=True, text=True, timeout=900)
    started = s.returncode == 0
    res.check("start a single-node Slurm cluster", started, (s.stdout + s.stderr)[-800:])
    if started:
        checks += [lambda: check_same_as_local(a, g, res, same),
                   lambda: check_local_run_taken_over(a, g, res, same),
                   lambda: check_cancel_and_resume(a, g, res, cancel),
                   lambda: check_failing_shard(a, g, res, failing)]
    try:
        return run_all(res, checks)
    finally:
        subprocess.run(harness + ["stop", cluster])
        shutil.rmtree(cluster, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
