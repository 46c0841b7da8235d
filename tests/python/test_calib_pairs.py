#!/usr/bin/python3
"""Calibration pair converters: `dllmq make-pairs` and `dllmq calibrate --task`.

    test_calib_pairs.py [--dllmq build/dllmq] [--workdir DIR]

For each converter (gsm8k, math, mbpp, synth), on small fixtures written here:
  - the prompt is the one `dllmq eval --show-prompt` builds for the same record (the eval's own
    prompt code), and the format written out below from docs/eval.md (lm-eval v0.4.8);
  - gsm8k: the shots are Python's own random.Random(1234).sample drawn per record in order
    (6 drawn and the record itself dropped when the pool is the records' file, lm-eval's
    ContextSampler rule; 5 drawn from another pool file, as the eval draws for test records);
  - the answer is the reference in the format the shots demonstrate;
  - a bad record gives an error naming the file, the line and the field.
`calibrate --task synth` equals `calibrate --data` of make-pairs' file with --chat (same data
hash, same canvas tokens), and differs without --chat. With the benchmark data in ../shared/data
(or $DLLMQ_SHARED_DATA), the real files are converted too (GSM8K train/test, MATH test, MBPP).
Last line "N passed, N failed".
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results import Results  # noqa: E402


def write_jsonl(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")


def read_jsonl(path):
    return [json.loads(l) for l in open(path) if l.strip()]


class Ctx:
    def __init__(self, dllmq, work):
        self.dllmq, self.work = dllmq, work

    def run(self, args, check=True):
        r = subprocess.run([self.dllmq] + args, capture_output=True, text=True, timeout=600)
        if check and r.returncode != 0:
            raise RuntimeError("%s: %s" % (" ".join(args[:3]), r.stderr.strip()[-400:]))
        return r

    def pairs(self, task, data, *extra):
        out = os.path.join(self.work, "pairs-%s-%d.jsonl" % (task, abs(hash((data,) + extra)) % 10**8))
        self.run(["make-pairs", "--task", task, "--data", data, "--out", out] + list(extra))
        return read_jsonl(out), out

    def show_prompt(self, task, data, tid, *extra):
        # bytes, decoded without newline translation: MBPP code holds "\r\n"
        r = subprocess.run([self.dllmq, "eval", "--task", task, "--data", data, "--show-prompt", str(tid)] + list(extra),
                           capture_output=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError("eval --show-prompt: %s" % r.stderr.decode(errors="replace")[-400:])
        return r.stdout.decode("utf-8")

    def error_of(self, task, data, *extra):
        r = self.run(["make-pairs", "--task", task, "--data", data, "--out",
                      os.path.join(self.work, "bad.jsonl")] + list(extra), check=False)
        return r.returncode, r.stderr


# ---- independent format references (docs/eval.md, lm-eval v0.4.8) --------------------------
def gsm8k_prompt(shots, q):
    return "".join("Question: %s\nAnswer: %s\n\n" % (s["question"], s["answer"]) for s in shots) + \
        "Question: %s\nAnswer:" % q


def gsm8k_shots(docs, pool, own):
    """lm-eval ContextSampler: rnd = Random(1234); per doc in order rnd.sample(pool, n), n = 5 + own,
    the doc itself dropped, the first 5 kept."""
    rnd = random.Random(1234)
    out = []
    for d in docs:
        picked = rnd.sample(range(len(pool)), 5 + (1 if own else 0))
        out.append([pool[i] for i in picked if not (own and pool[i] == d)][:5])
    return out


def last_boxed(s):
    i = s.rfind("\\boxed{")
    assert i >= 0
    j, depth = i + len("\\boxed{"), 1
    k = j
    while depth:
        depth += {"{": 1, "}": -1}.get(s[k], 0)
        k += 1
    return s[j:k - 1]


def mbpp_text(d):
    return ("You are an expert Python programmer, and here is your task: %s Your code should pass these "
            "tests:\n\n%s\n%s\n%s\n[BEGIN]\n") % (d["text"], d["test_list"][0], d["test_list"][1], d["test_list"][2])


def mbpp_prompt(shots, d):
    return "".join(mbpp_text(s) + s["code"] + "\n[DONE]\n\n" for s in shots) + mbpp_text(d)


# ---- fixtures -----------------------------------------------------------------------------
def gsm8k_fixture(n, seed):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        a, b = rng.randint(1, 50), rng.randint(1, 50)
        rows.append({"question": "Tom has %d apples and buys %d more. How many now? (#%d)" % (a, b, i),
                     "answer": "%d + %d = <<%d+%d=%d>>%d\n#### %d" % (a, b, a, b, a + b, a + b, a + b)})
    return rows


def test_gsm8k(c, res):
    train = os.path.join(c.work, "gsm8k_train.jsonl")
    docs = gsm8k_fixture(12, 1)
    docs[7] = dict(docs[3])  # a duplicate record: lm-eval drops every shot equal to the doc
    write_jsonl(train, docs)
    got, _ = c.pairs("gsm8k", train)
    want_shots = gsm8k_shots(docs, docs, own=True)
    ok = len(got) == len(docs)
    bad = []
    for i, (g, d) in enumerate(zip(got, docs)):
        if g["prompt"] != gsm8k_prompt(want_shots[i], d["question"]) or g["answer"] != " " + d["answer"]:
            bad.append(i)
        # the doc never among its shots; 5 shots unless a duplicate of it was drawn too
        if any(s == d for s in want_shots[i]) or len(want_shots[i]) != 5 - (i in (3, 7) and len(want_shots[i]) == 4):
            bad.append(("self", i))
        if g["source"] != "%s:%d" % (train, i + 1):
            bad.append(("source", i))
    res.check("gsm8k/own-pool-self-excluded", ok and not bad, "bad records %s" % bad[:5])
    # shots from another file: 5 drawn per record, as the eval draws them for test records
    test = os.path.join(c.work, "gsm8k_test.jsonl")
    tdocs = gsm8k_fixture(4, 2)
    write_jsonl(test, tdocs)
    got, _ = c.pairs("gsm8k", test, "--shots", train)
    want_shots = gsm8k_shots(tdocs, docs, own=False)
    ok = all(g["prompt"] == gsm8k_prompt(w, d["question"]) for g, w, d in zip(got, want_shots, tdocs))
    ok = ok and all(g["prompt"] == c.show_prompt("gsm8k", test, i, "--train", train) for i, g in enumerate(got))
    res.check("gsm8k/shots-file-equals-eval-prompt", ok and len(got) == 4)
    got, _ = c.pairs("gsm8k", train, "--limit", "3")
    res.check("gsm8k/limit", len(got) == 3)
    # field errors name file, line and field
    write_jsonl(test, [tdocs[0], "", {"question": "q", "answer": 5}])
    rc, err = c.error_of("gsm8k", test)
    res.check("gsm8k/error-names-file-line-field", rc == 1 and "%s:3: field 'answer'" % test in err, err.strip())
    write_jsonl(test, [tdocs[0], {"answer": "x"}])
    rc, err = c.error_of("gsm8k", test, "--shots", train)
    res.check("gsm8k/error-missing-field", rc == 1 and "%s:2: field 'question' is missing" % test in err, err.strip())


def test_math(c, res):
    path = os.path.join(c.work, "math_train.jsonl")
    docs = [{"problem": "What is $1+1$?", "solution": "We add: $1+1=\\boxed{2}$.", "level": "Level 1", "type": "Algebra"},
            {"problem": "Simplify $\\frac{4}{6}$.", "solution": "First $\\boxed{x}$ then $\\frac{4}{6}=\\boxed{\\frac{2}{3}}$.",
             "level": "Level 2", "type": "Prealgebra"}]
    write_jsonl(path, docs)
    got, _ = c.pairs("math", path)
    ok = len(got) == 2
    for i, (g, d) in enumerate(zip(got, docs)):
        want_answer = " " + d["solution"] + "\nFinal Answer: The final answer is $%s$. I hope it is correct." % last_boxed(d["solution"])
        ok = ok and g["answer"] == want_answer
        ok = ok and g["prompt"] == c.show_prompt("math", path, i)
        ok = ok and g["prompt"].endswith("\n\nProblem:\n%s\n\nSolution:" % d["problem"]) and g["prompt"].count("Problem:\n") == 5
    res.check("math/prompt-equals-eval-and-answer-format", ok, "answers %r" % [g["answer"][-60:] for g in got])
    write_jsonl(path, [docs[0], {"problem": "p", "solution": "no box here"}])
    rc, err = c.error_of("math", path)
    res.check("math/error-no-boxed", rc == 1 and "%s:2: field 'solution'" % path in err, err.strip())
    write_jsonl(path, [{"problem": 3, "solution": "\\boxed{1}"}])
    rc, err = c.error_of("math", path)
    res.check("math/error-field-type", rc == 1 and "%s:1: field 'problem' must be a string" % path in err, err.strip())


def mbpp_fixture():
    def rec(tid):
        return {"text": "Write a function f%d." % tid, "code": "def f%d(x):\r\n  return x + %d" % (tid, tid),
                "task_id": tid, "test_setup_code": "",
                "test_list": ["assert f%d(%d) == %d" % (tid, k, k + tid) for k in range(3)], "challenge_test_list": []}
    return [rec(t) for t in (1, 2, 3, 4, 11, 12, 520, 602, 601)]


def test_mbpp(c, res):
    path = os.path.join(c.work, "mbpp.jsonl")
    docs = mbpp_fixture()
    write_jsonl(path, docs)
    by = {d["task_id"]: d for d in docs}
    shots = [by[2], by[3], by[4]]
    got, _ = c.pairs("mbpp", path)
    ok = [g["source"] for g in got] == ["%s:9" % path, "%s:8" % path]  # train split, by task_id
    ok = ok and all(g["prompt"] == mbpp_prompt(shots, by[t]) and g["answer"] == by[t]["code"] + "\n[DONE]"
                    for g, t in zip(got, (601, 602)))
    res.check("mbpp/train-split-prompt-and-answer", ok)
    got, _ = c.pairs("mbpp", path, "--split", "test")
    ok = len(got) == 2 and all(g["prompt"] == c.show_prompt("mbpp", path, t) for g, t in zip(got, (11, 12)))
    res.check("mbpp/test-split-equals-eval-prompt", ok)
    got, _ = c.pairs("mbpp", path, "--split", "validation")
    res.check("mbpp/validation-split", [g["prompt"] for g in got] == [mbpp_prompt(shots, by[520])])
    bad = [dict(d) for d in docs]
    bad[6]["test_list"] = bad[6]["test_list"][:2]
    write_jsonl(path, bad)
    rc, err = c.error_of("mbpp", path)
    res.check("mbpp/error-test-list", rc == 1 and "%s:7: field 'test_list'" % path in err, err.strip())
    bad = [dict(d) for d in docs]
    bad[4]["task_id"] = "11"
    write_jsonl(path, bad)
    rc, err = c.error_of("mbpp", path)
    res.check("mbpp/error-task-id", rc == 1 and "%s:5: field 'task_id'" % path in err, err.strip())
    write_jsonl(path, [d for d in docs if d["task_id"] != 3])
    rc, err = c.error_of("mbpp", path)
    res.check("mbpp/error-missing-shots", rc == 1 and "task_id 2, 3, 4" in err, err.strip())
    rc, err = c.error_of("mbpp", path, "--split", "dev")
    res.check("mbpp/error-split", rc == 1 and "--split dev" in err, err.strip())


def test_synth(c, res):
    val = os.path.join(ROOT, "data", "synth", "validation.jsonl")
    docs = read_jsonl(val)[:6]
    got, pairs_file = c.pairs("synth", val, "--limit", "6")
    ok = [(g["prompt"], g["answer"]) for g in got] == [(d["question"], d["answer"]) for d in docs]
    ok = ok and all(g["prompt"] == c.show_prompt("synth", val, i) for i, g in enumerate(got[:2]))
    res.check("synth/prompt-is-the-question", ok)
    bad = os.path.join(c.work, "synth_bad.jsonl")
    write_jsonl(bad, [docs[0], {"question": ["x"], "answer": "1"}])
    rc, err = c.error_of("synth", bad)
    res.check("synth/error-names-file-line-field", rc == 1 and "%s:2: field 'question' must be a string" % bad in err,
              err.strip())
    rc, err = c.error_of("humaneval", val)
    res.check("error-unknown-task", rc == 1 and "--task humaneval" in err, err.strip())
    # calibrate --task synth == calibrate --data PAIRS --chat (the eval's chat template)
    common = ["--limit", "6", "--method", "kvquant", "--trajectory", "ar", "--kv-bits", "4", "--threads", "1"]
    arts = {}
    for name, args in (("task", ["--task", "synth", "--data", val]),
                       ("pairs-chat", ["--data", pairs_file, "--chat"]),
                       ("pairs-plain", ["--data", pairs_file])):
        out = os.path.join(c.work, "calib-%s.safetensors" % name)
        c.run(["calibrate"] + args + common + ["--out", out])
        arts[name] = st_metadata(out)
    same = arts["task"]["data_hash"] == arts["pairs-chat"]["data_hash"] and \
        arts["task"]["n_tokens"] == arts["pairs-chat"]["n_tokens"]
    res.check("synth/calibrate-task-equals-pairs-with-chat", same and
              arts["pairs-plain"]["n_tokens"] != arts["task"]["n_tokens"],
              "tokens task %s, pairs --chat %s, pairs plain %s" % (
                  arts["task"]["n_tokens"], arts["pairs-chat"]["n_tokens"], arts["pairs-plain"]["n_tokens"]))


def st_metadata(path):
    import struct
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))["__metadata__"]


def find_data():
    for cand in (os.environ.get("DLLMQ_SHARED_DATA", ""), os.path.join(ROOT, "..", "shared", "data")):
        if cand and os.path.isfile(os.path.join(cand, "gsm8k", "train.jsonl")):
            return os.path.abspath(cand)
    return None


def test_real_data(c, res, data):
    train, test = os.path.join(data, "gsm8k", "train.jsonl"), os.path.join(data, "gsm8k", "test.jsonl")
    got, _ = c.pairs("gsm8k", train, "--limit", "40")
    docs = read_jsonl(train)
    want = gsm8k_shots(docs[:40], docs, own=True)
    ok = all(g["prompt"] == gsm8k_prompt(w, d["question"]) and g["answer"] == " " + d["answer"]
             for g, w, d in zip(got, want, docs))
    res.check("real/gsm8k-train", ok and len(got) == 40)
    got, _ = c.pairs("gsm8k", test, "--shots", train, "--limit", "3")
    res.check("real/gsm8k-test-equals-eval-prompt",
              all(g["prompt"] == c.show_prompt("gsm8k", test, i) for i, g in enumerate(got)))
    mtest = os.path.join(data, "math", "test.jsonl")
    got, _ = c.pairs("math", mtest, "--limit", "3")
    mdocs = read_jsonl(mtest)
    res.check("real/math-equals-eval-prompt",
              all(g["prompt"] == c.show_prompt("math", mtest, i) and
                  g["answer"].endswith("The final answer is $%s$. I hope it is correct." % last_boxed(mdocs[i]["solution"]))
                  for i, g in enumerate(got)))
    mbpp = os.path.join(data, "mbpp", "mbpp.jsonl")
    got, _ = c.pairs("mbpp", mbpp)
    res.check("real/mbpp-train-374", len(got) == 374, "%d pairs" % len(got))
    got, _ = c.pairs("mbpp", mbpp, "--split", "test", "--limit", "2")
    res.check("real/mbpp-test-equals-eval-prompt",
              all(g["prompt"] == c.show_prompt("mbpp", mbpp, t) for g, t in zip(got, (11, 12))))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--dllmq", default=os.path.join(ROOT, "build", "dllmq"))
    ap.add_argument("--workdir")
    a = ap.parse_args(argv)
    work = a.workdir or tempfile.mkdtemp(prefix="dllmq_pairs_")
    os.makedirs(work, exist_ok=True)
    c, res = Ctx(os.path.abspath(a.dllmq), work), Results()
    tests = [test_gsm8k, test_math, test_mbpp, test_synth]
    data = find_data()
    for t in tests + ([lambda c, r: test_real_data(c, r, data)] if data else []):
        try:
            t(c, res)
        except Exception as e:  # noqa: BLE001  a crash is a failure, not an abort
            res.check(getattr(t, "__name__", "real_data"), False, repr(e))
    if not data:
        print("note: benchmark data not found; the real-data conversions were skipped")
    print(f"{res.passed} passed, {res.failed} failed")
    return 1 if res.failed else 0


if __name__ == "__main__":
    sys.exit(main())
