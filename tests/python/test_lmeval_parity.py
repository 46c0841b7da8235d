#!/usr/bin/python3
"""`dllmq eval` scores equal lm-evaluation-harness v0.4.8's own, sample by sample.

    test_lmeval_parity.py --dllmq build/dllmq --workdir DIR [--only synth,math,gsm8k,humaneval,mbpp,robust,noenv]

Expected values: tests/data/lmeval_parity/*.jsonl, one record per response with lm-eval's
per-sample metrics, made by tools/eval/make_lmeval_fixtures.py inside an lm-eval 0.4.8 venv (the
task YAMLs, filters and process_results of lm-eval itself; HF code_eval for pass@1). Names are
lm-eval's result keys: math exact_match / math_verify, gsm8k "exact_match,strict-match" /
"exact_match,flexible-extract", humaneval "pass@1,create_test" (dllmq: pass@1), mbpp pass_at_1
(dllmq reports pass_at_1 and, same value, pass@1).

1. synth: MATH-format documents written for this test (no benchmark data, so it always runs), the
   issue's kind of answers (0.5 vs \\frac{1}{2}, 2\\sqrt{2} vs \\sqrt{8}, (x+1)^2 vs x^2+2x+1, ...).
   The MATH scorer's Python must be found without flags: scripts/setup.sh makes .venv-eval/.
2. math, gsm8k, humaneval, mbpp: responses to benchmark documents (gold, rewrites, wrong, empty,
   malformed, stop strings inside, for code also what HF code_eval's reliability_guard disables
   and timeouts). Needs shared/data ($DLLMQ_SHARED_DATA or ../shared/data); skipped without it.
   Each response gets its own copy of its document (the data file is written here), so that one
   dllmq run scores them all. The fixtures hold no benchmark text: each response is rebuilt from
   its template and the document, and must match the recorded sha256.
3. robust: a MATH helper that hangs outside Python code or crashes on marked answers: those phases
   score 0, the helper is restarted, every other sample is still lm-eval's.
4. noenv: with a Python lacking sympy, exact_match and math_verify are null and the notes say how to
   install the environment (never a silently different metric).
The last line is "N passed, N failed"; the exit code is non-zero iff something failed.
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "tests", "data", "lmeval_parity")
sys.path.insert(0, os.path.join(ROOT, "tools", "eval"))
import make_lmeval_fixtures as fx  # noqa: E402  (fields/render/sha: no lm-eval needed)
RESULTS = {"passed": 0, "failed": 0}


def check(cond, what):
    RESULTS["passed" if cond else "failed"] += 1
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    return cond


def read_jsonl(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt", encoding="utf-8") as f:
        return [json.loads(x) for x in f if x.strip()]


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def find_data():
    for c in (os.environ.get("DLLMQ_SHARED_DATA", ""), os.path.join(ROOT, "..", "shared", "data")):
        if c and os.path.isfile(os.path.join(c, "gsm8k", "test.jsonl")):
            return os.path.abspath(c)
    return None


class Ctx:
    def __init__(self, a):
        self.bin = os.path.abspath(a.dllmq)
        self.work = os.path.abspath(a.workdir)
        self.workers = str(a.workers)
        os.makedirs(self.work, exist_ok=True)

    def path(self, *p):
        return os.path.join(self.work, *p)

    def eval(self, name, task, data, responses, *extra, env=None):
        resp, det = self.path(name + ".responses.jsonl"), self.path(name + ".details.jsonl")
        write_jsonl(resp, responses)
        t0 = time.time()
        p = subprocess.run([self.bin, "eval", "--task", task, "--data", data, "--responses", resp,
                            "--details", det, "--json", "--workers", self.workers, *extra],
                           capture_output=True, text=True, timeout=1800, env=env)
        dt = time.time() - t0
        if p.returncode != 0:
            print(p.stderr[-3000:])
            raise RuntimeError("dllmq eval --task %s: exit %d" % (task, p.returncode))
        summary = json.loads(p.stdout.strip().splitlines()[-1])
        print("      %s: %d samples in %.1f s: %s" % (name, summary["n"], dt,
                                                     {k: v for k, v in summary.items() if k not in ("by_group", "notes")}))
        for n in summary.get("notes", []):
            print("      note: " + n[:300])
        return summary, read_jsonl(det), p.stderr


def compare(name, fixtures, details, metric_map):
    """metric_map: lm-eval metric name -> dllmq name(s). Every sample must agree on every metric."""
    bad = []
    for k, (f, d) in enumerate(zip(fixtures, details)):
        for lm_name, ours in metric_map.items():
            for o in ([ours] if isinstance(ours, str) else ours):
                got = d["metrics"].get(o)
                want = f["expected"][lm_name]
                if got is None or int(got) != want:
                    bad.append((k, f["task_id"], f["kind"], lm_name, o, want, got, f["template"][:120]))
    check(len(details) == len(fixtures) and not bad,
          "%s: %d samples, every per-sample %s = lm-eval 0.4.8's (%d mismatches)" %
          (name, len(fixtures), "/".join(metric_map), len(bad)))
    for b in bad[:12]:
        print("      sample %d task %s kind %s: lm-eval %s = %s, dllmq %s = %s; response template %r" %
              (b[0], b[1], b[2], b[3], b[5], b[4], b[6], b[7]))
    for lm_name in metric_map:
        mean = sum(f["expected"][lm_name] for f in fixtures) / max(1, len(fixtures))
        print("      lm-eval mean %s over these samples: %.4f" % (lm_name, mean))


def per_record_docs(task, fixtures, doc_of, id_field=None, make_id=None):
    """One data line per fixture record (its document, re-identified), so task_ids are unique; the
    response is rendered from the record's template and that document."""
    docs, responses, wrong = [], [], []
    for k, f in enumerate(fixtures):
        doc = doc_of(f["task_id"])
        d = dict(doc)
        tid = k
        if id_field:
            tid = make_id(k, f)
            d[id_field] = tid
        docs.append(d)
        resp = fx.render(f["template"], fx.fields(task, doc))
        if fx.sha(resp) != f["sha256"]:
            wrong.append(f["task_id"])
        responses.append({"task_id": tid, "response": resp})
    check(not wrong, "%s: %d responses rebuilt from the fixture templates and the data, identical to those "
          "lm-eval scored (sha256; differing: %s)" % (task, len(fixtures), sorted(set(map(str, wrong)))[:10]))
    return docs, responses


def math_checks(c, name, fixtures, data_file, responses, *extra, env=None):
    s, d, _ = c.eval(name, "math", data_file, responses, *extra, env=env)
    compare(name, fixtures, d, {"exact_match": "exact_match", "math_verify": "math_verify"})
    norm_bad = [(f["task_id"], f["pred_sha256"][:8], x["extracted"], f["gold_sha256"][:8], x["gold"])
                for f, x in zip(fixtures, d)
                if (f["pred_sha256"], f["gold_sha256"]) != (fx.sha(x["extracted"]), fx.sha(x["gold"])) or
                "native normalization" in x.get("detail", "")]
    check(not norm_bad, "%s: normalized answers (pred, gold) = lm-eval's, also the native C++ normalization "
          "behind string_equiv (%d differ)" % (name, len(norm_bad)))
    for b in norm_bad[:5]:
        print("      task %s: lm-eval pred sha %s, dllmq %r; gold sha %s, dllmq %r" % b)
    return s, d


def test_synth(c, data):
    fixtures = read_jsonl(os.path.join(FIX, "math_synth.jsonl"))
    docs = read_jsonl(os.path.join(FIX, "math_synth_docs.jsonl"))
    dpath = c.path("math_synth.data.jsonl")
    d2, responses = per_record_docs("math", fixtures, lambda i: docs[i])
    write_jsonl(dpath, d2)
    s, _ = math_checks(c, "math_synth", fixtures, dpath, responses)
    want = sum(f["expected"]["exact_match"] for f in fixtures) / len(fixtures)
    check(s.get("exact_match") is not None and abs(s["exact_match"] - want) < 1e-9 and "string_equiv" in s,
          "math_synth: summary exact_match %s = lm-eval's %.4f, found the scoring venv without flags; the "
          "string score is reported as string_equiv (%s)" % (s.get("exact_match"), want, s.get("string_equiv")))
    # The issue's own 12: one response per kind of answer, scored as in a user's single run.
    firsts = {}
    for f in fixtures:
        if f["kind"] == "synthetic":
            firsts.setdefault(f["task_id"], f)
    twelve = [firsts[k] for k in sorted(firsts)[:12]]
    d3, r3 = per_record_docs("math", twelve, lambda i: docs[i])
    write_jsonl(c.path("math_12.data.jsonl"), d3)
    s12, det12, _ = c.eval("math_12", "math", c.path("math_12.data.jsonl"), r3)
    want12 = sum(f["expected"]["exact_match"] for f in twelve) / 12
    check(abs(s12["exact_match"] - want12) < 1e-9,
          "12 answers (0.5 vs \\frac{1}{2}, 2\\sqrt{2} vs \\sqrt{8}, (x+1)^2 vs x^2+2x+1, 3 vs 2, ...): dllmq "
          "exact_match %.4f = lm-eval %.4f (string_equiv %.4f)" % (s12["exact_match"], want12, s12["string_equiv"]))


def test_math(c, data):
    fixtures = read_jsonl(os.path.join(FIX, "math.lmeval.jsonl"))
    docs = read_jsonl(os.path.join(data, "math", "test.jsonl"))
    d2, responses = per_record_docs("math", fixtures, lambda i: docs[i])
    dpath = c.path("math.data.jsonl")
    write_jsonl(dpath, d2)
    math_checks(c, "math", fixtures, dpath, responses)


def test_gsm8k(c, data):
    fixtures = read_jsonl(os.path.join(FIX, "gsm8k.lmeval.jsonl"))
    docs = read_jsonl(os.path.join(data, "gsm8k", "test.jsonl"))
    d2, responses = per_record_docs("gsm8k", fixtures, lambda i: docs[i])
    dpath = c.path("gsm8k.data.jsonl")
    write_jsonl(dpath, d2)
    names = ["exact_match,strict-match", "exact_match,flexible-extract"]
    s, d, _ = c.eval("gsm8k", "gsm8k", dpath, responses)
    compare("gsm8k", fixtures, d, {n: n for n in names})
    check(all(n in s for n in names), "gsm8k: the summary reports lm-eval's keys %s" % names)


def test_humaneval(c, data):
    fixtures = read_jsonl(os.path.join(FIX, "humaneval.lmeval.jsonl"))
    docs = {d["task_id"]: d for d in read_jsonl(os.path.join(data, "humaneval", "HumanEval.jsonl.gz"))}
    d2, responses = per_record_docs("humaneval", fixtures, lambda i: docs[i], "task_id",
                                    lambda k, f: "%s/r%d" % (f["task_id"], k))
    dpath = c.path("humaneval.data.jsonl")
    write_jsonl(dpath, d2)
    s, d, _ = c.eval("humaneval", "humaneval", dpath, responses)
    # lm-eval's key is "pass@1,create_test" (its one filter); dllmq reports it as pass@1
    compare("humaneval", fixtures, d, {"pass@1,create_test": "pass@1"})


def test_mbpp(c, data):
    fixtures = read_jsonl(os.path.join(FIX, "mbpp.lmeval.jsonl"))
    docs = {d["task_id"]: d for d in read_jsonl(os.path.join(data, "mbpp", "mbpp.jsonl"))}
    if len(fixtures) > 500:
        raise RuntimeError("more mbpp fixtures than test-split ids")
    d2, responses = per_record_docs("mbpp", fixtures, lambda i: docs[i], "task_id", lambda k, f: 11 + k)
    d2 += [docs[i] for i in (2, 3, 4)]  # the few-shot documents the task needs
    dpath = c.path("mbpp.data.jsonl")
    write_jsonl(dpath, d2)
    s, d, _ = c.eval("mbpp", "mbpp", dpath, responses)
    compare("mbpp", fixtures, d, {"pass_at_1": ["pass_at_1", "pass@1"]})


WRAPPER = r'''
import os, signal, sys, time
sys.path.insert(0, %r)
import math_equiv as me
orig = me.Scorer.is_equiv
def is_equiv(self, a, b):
    if "HANGME" in a:  # stuck where the helper's own alarm cannot end it
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        time.sleep(3600)
    if "CRASHME" in a:
        os.abort()
    return orig(self, a, b)
me.Scorer.is_equiv = is_equiv
sys.exit(me.main())
'''


def test_robust(c, data):
    fixtures = read_jsonl(os.path.join(FIX, "math_synth.jsonl"))[:20]
    docs = read_jsonl(os.path.join(FIX, "math_synth_docs.jsonl"))
    wrapper = c.path("hanging_helper.py")
    with open(wrapper, "w") as f:
        f.write(WRAPPER % os.path.join(ROOT, "tools", "eval"))
    marked = []
    for k, tag in ((3, "HANGME"), (7, "CRASHME"), (12, "HANGME")):
        marked.append(k)
        resp = "Final Answer: The final answer is $%s$. I hope it is correct." % tag
        fixtures[k] = dict(fixtures[k], template=resp, sha256=fx.sha(resp))
    d2, responses = per_record_docs("math", fixtures, lambda i: docs[i])
    dpath = c.path("robust.data.jsonl")
    write_jsonl(dpath, d2)
    t0 = time.time()
    s, d, _ = c.eval("robust", "math", dpath, responses, "--math-equiv", wrapper, "--math-phase-timeout", "8")
    dt = time.time() - t0
    ok = all(d[k]["metrics"]["exact_match"] == 0.0 and d[k]["metrics"]["math_verify"] == 0.0 for k in marked)
    rest = [k for k in range(len(fixtures)) if k not in marked]
    same = all(int(d[k]["metrics"]["exact_match"]) == fixtures[k]["expected"]["exact_match"] and
               int(d[k]["metrics"]["math_verify"]) == fixtures[k]["expected"]["math_verify"] for k in rest)
    check(ok and same and s["exact_match"] is not None and dt < 120,
          "robust: 2 hangs + 1 crash score 0 (helper killed and restarted), the other %d samples = lm-eval's, "
          "run finished in %.0f s" % (len(rest), dt))
    check(any("restart" in n for n in s.get("notes", [])) and all(d[k].get("detail") for k in marked),
          "robust: the notes count the restarts, the samples' details say what happened")


def test_noenv(c, data):
    docs = read_jsonl(os.path.join(FIX, "math_synth_docs.jsonl"))
    dpath = c.path("noenv.data.jsonl")
    write_jsonl(dpath, docs[:2])
    env = dict(os.environ, DLLMQ_EVAL_PYTHON=c.path("no-such-python"))
    s, d, err = c.eval("noenv", "math", dpath, [{"task_id": 0, "response": "Final Answer: The final answer is $0.5$."}],
                       env=env)
    notes = " ".join(s.get("notes", []))
    check(s["exact_match"] is None and s["math_verify"] is None and "setup" in notes and "WARNING" in err,
          "no scoring Python: exact_match and math_verify null, a warning and a note saying how to install (%s)"
          % notes[:160])
    # A Python that runs but lacks sympy (hidden here, whatever this machine has installed).
    fake = c.path("python-without-sympy")
    with open(fake, "w") as f:
        f.write("#!/bin/sh\n[ \"$1\" = -I ] && shift\nexec /usr/bin/python3 -I -c 'import runpy, sys; "
                "sys.modules[\"sympy\"] = None; sys.argv = sys.argv[1:]; "
                "runpy.run_path(sys.argv[0], run_name=\"__main__\")' \"$@\"\n")
    os.chmod(fake, 0o755)
    env = dict(os.environ, DLLMQ_EVAL_PYTHON=fake)
    s, d, err = c.eval("noenv2", "math", dpath, [{"task_id": 0, "response": "Final Answer: The final answer is $0.5$."}],
                       env=env)
    notes = " ".join(s.get("notes", []))
    check(s["exact_match"] is None and "sympy" in notes.lower() and "setup" in notes,
          "python without sympy: exact_match null, the note names the missing module and the fix (%s)" % notes[:200])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dllmq", default=os.path.join(ROOT, "build", "dllmq"))
    ap.add_argument("--workdir", default="/tmp/dllmq_test_lmeval_parity")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--only", default="synth,math,gsm8k,humaneval,mbpp,robust,noenv")
    a = ap.parse_args()
    c = Ctx(a)
    data = find_data()
    tests = {"synth": test_synth, "math": test_math, "gsm8k": test_gsm8k, "humaneval": test_humaneval,
             "mbpp": test_mbpp, "robust": test_robust, "noenv": test_noenv}
    needs_data = {"math", "gsm8k", "humaneval", "mbpp"}
    for name in a.only.split(","):
        if name in needs_data and data is None:
            print("      skip %s: benchmark data not found (DLLMQ_SHARED_DATA or ../shared/data)" % name)
            continue
        t0 = time.time()
        try:
            tests[name](c, data)
        except Exception as e:  # a crash counts as a failure, the rest still runs
            check(False, "%s: %s: %s" % (name, type(e).__name__, e))
        print("      [%s: %.1f s]" % (name, time.time() - t0), flush=True)
    print("%d passed, %d failed" % (RESULTS["passed"], RESULTS["failed"]))
    return 1 if RESULTS["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
