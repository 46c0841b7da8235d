#!/usr/bin/env python3
"""Per-sample expected scores from lm-evaluation-harness v0.4.8 itself, for tests/python/test_lmeval_parity.py.

Run inside a separate venv that holds lm-eval (not the project's .venv-eval):

    /usr/bin/python3 -m venv .venv-lmeval
    .venv-lmeval/bin/pip install -r tools/eval/requirements-lmeval.txt
    HF_ALLOW_CODE_EVAL=1 .venv-lmeval/bin/python tools/eval/make_lmeval_fixtures.py \
        --data ../shared/data --out tests/data/lmeval_parity [--code-eval DIR]

For every task it makes a few hundred responses (gold answers, gold rewritten in equivalent forms,
wrong, empty, malformed ones, stop strings inside), cuts them at the task's `until` strings as
lm-eval's HF model does (`s = s.split(term)[0]` per term), and scores them with lm-eval's own task
objects: the task YAML loaded by `lm_eval.utils.load_yaml_config` into a `ConfigurableTask` (data
read from --data through the `json` dataset builder instead of the Hub), its FilterEnsembles
applied to `Instance`s, then `task.process_results(doc, [filtered])`, as `lm_eval.evaluator` does.
pass@1 runs HF `code_eval` (needs HF_ALLOW_CODE_EVAL=1); without Hub access give --code-eval, a
local copy of the metric (metrics/code_eval/ of github.com/huggingface/evaluate).

Output (JSONL, one record per response, `task_id` as `dllmq eval --responses` takes it):
    {"task_id", "kind", "template", "sha256", "expected": {lm-eval result key: 0|1}, ...}
No benchmark text is committed: `template` is the response with the parts taken from the
document as placeholders (FIELDS below, e.g. ⟦canonical_solution⟧, ⟦gold⟧), which render() fills
in from the data again at test time; `sha256` (its first 16 hex digits, of the UTF-8 response) proves the reconstruction.
math records also carry sha256 of lm-eval's normalized answers ("pred_sha256", "gold_sha256").
math_synth_docs.jsonl holds self-written MATH-format documents for math_synth.jsonl (whose records
also show "pred" and "gold"). meta.json records the versions.
"""
import hashlib
import argparse
import gzip
import json
import os
import random
import sys
import tempfile
import time

SLOW_MBPP = {123}  # reference code near the 3 s limit: verdict depends on machine load


def read_jsonl(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt", encoding="utf-8") as f:
        return [json.loads(x) for x in f if x.strip()]


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def cut(text, until):
    # lm_eval/models/huggingface.py generate_until
    for term in until:
        if len(term) > 0:
            text = text.split(term)[0]
    return text


# --- placeholders: the parts of a response that come from the benchmark document ------------------

def boxed_answer(solution):
    # minerva's last_boxed_only_string + remove_boxed (tools/eval/math_equiv.py restates them)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import math_equiv
    return math_equiv.remove_boxed(math_equiv.last_boxed_only_string(solution))


def fields(task, doc):
    if task == "math":
        g = boxed_answer(doc["solution"])
        return {"gold": g, "gold_frac": g.replace("\\dfrac", "\\frac"),
                "gold_dfrac": g.replace("\\frac", "\\dfrac"),
                "gold_lr": g.replace("(", "\\left(").replace(")", "\\right)")}
    if task == "gsm8k":
        a = doc["answer"]
        return {"answer": a, "body": a.split("#### ")[0], "num": a.split("#### ")[-1].strip()}
    if task == "humaneval":
        return {"canonical_solution": doc["canonical_solution"]}
    if task == "mbpp":
        return {"code": doc["code"], "code_lf": doc["code"].replace("\r\n", "\n")}
    return {}


def P(name):
    return "\u27e6%s\u27e7" % name


def render(template, values):
    for k, v in values.items():
        template = template.replace(P(k), v)
    return template


def sha(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]  # enough to tell texts apart


# --- lm-eval plumbing --------------------------------------------------------------------------

def patch_code_eval(local_dir):
    import evaluate
    orig = evaluate.load

    def load(path, *a, **k):
        if path == "code_eval" and local_dir:
            return orig(local_dir, *a, **k)
        return orig(path, *a, **k)

    evaluate.load = load


def make_task(yaml_name, data_files, **overrides):
    import lm_eval.tasks
    from lm_eval.api.task import ConfigurableTask
    from lm_eval.utils import load_yaml_config
    root = os.path.dirname(lm_eval.tasks.__file__)
    cfg = load_yaml_config(os.path.join(root, yaml_name))
    cfg.update(dataset_path="json", dataset_name=None, dataset_kwargs={"data_files": data_files})
    cfg.update(overrides)
    return ConfigurableTask(config=cfg)


def lm_scores(task, docs, records):
    """records: (doc_index, raw response) -> list of {metric key: value} as lm-eval reports them
    ("metric" when the only filter is "none", else "metric,filter")."""
    from lm_eval.api.instance import Instance
    until = task.config.generation_kwargs["until"]
    insts = []
    for n, (di, resp) in enumerate(records):
        inst = Instance(request_type="generate_until", doc=docs[di], arguments=("", {}), idx=0,
                        metadata=(task.config.task, n, 1))
        inst.resps = [cut(resp, until)]
        insts.append(inst)
    task._instances = insts
    task.apply_filters()
    out = []
    for inst in insts:
        row = {}
        for fkey, filtered in inst.filtered_resps.items():
            for metric, value in task.process_results(inst.doc, [filtered]).items():
                row[metric if fkey == "none" else "%s,%s" % (metric, fkey)] = int(round(float(value)))
        out.append(row)
    return out


# --- MATH ---------------------------------------------------------------------------------------

def final(ans):
    return "Let me work it out.\nFinal Answer: The final answer is $%s$. I hope it is correct." % ans


def math_variants(g, rnd):
    """(kind, template) for one gold answer g (un-normalized boxed content); the templates use the
    placeholders of fields("math", doc), numbers derived from g are written out."""
    G = P("gold")
    v = [("gold", final(G))]
    alt = []
    if "\\dfrac" in g:
        alt.append(P("gold_frac"))
    if "\\frac" in g:
        alt.append(P("gold_dfrac"))
    try:
        x = float(g)
        alt += [repr(x), "%s.0" % G if g.lstrip("-").isdigit() else "%.6g" % x, "x = %s" % G]
        v.append(("wrong", final(str(int(x) + 1) if x == int(x) else "%g" % (x * 2))))
    except ValueError:
        alt += ["x = %s" % G, " %s " % G, "\\left(%s\\right)" % G if "(" not in g else P("gold_lr")]
        v.append(("wrong", final(G + "+1")))
    if "/" not in g and "\\" not in g and g.lstrip("-").isdigit() and int(g) != 0:
        alt.append("\\frac{%d}{2}" % (2 * int(g)))
        alt.append("%s\\%%" % G)
    alt.append("\\boxed{%s}" % G)
    for a in alt:
        v.append(("rewrite", final(a)))
    v.append(("boxed_only", "The answer is $\\boxed{%s}$." % G))
    v.append(("no_final_line", "The answer is %s." % G))
    v.append(("after_stop", final(G).replace("Final Answer", "Problem:\nFinal Answer")))
    v.append(("stop_after", final(G) + "\n\nProblem:\nWhat is 1+1?\n\nSolution: 2"))
    return v


MALFORMED_MATH = [
    ("empty", ""),
    ("empty", "   \n"),
    ("malformed", "Final Answer: The final answer is $\\frac{1}{$. I hope it is correct."),
    ("malformed", "Final Answer: The final answer is"),
    ("malformed", "Final Answer: The final answer is $$. I hope it is correct."),
    ("malformed", "\\boxed{"),
    ("malformed", "Final Answer: The final answer is [invalidanswer]. I hope it is correct."),
    ("malformed", "Final Answer: The final answer is $}{$. I hope it is correct."),
    ("malformed", "Final Answer: The final answer is $\\sqrt{}$. I hope it is correct."),
    ("malformed", "Final Answer: The final answer is $x^$. I hope it is correct."),
    ("malformed", "Final Answer: The final answer is $\u00e9\u4e2d\u00a0$. I hope it is correct."),
    ("malformed", "Final Answer: The final answer is $1/0$. I hope it is correct."),
    ("malformed", "Final Answer: The final answer is $\\frac{0}{0}$. I hope it is correct."),
    ("malformed", "blah " * 300),
]

# Self-written MATH-format documents: (gold boxed content, [responses' final answers]).
SYNTH_MATH = [
    ("\\frac{1}{2}", ["0.5", "\\frac12", "1/2", "\\dfrac{1}{2}", "0.50", "2/4", "\\frac{2}{4}", ".5"]),
    ("\\sqrt{8}", ["2\\sqrt{2}", "\\sqrt8", "2.828", "2\\sqrt2", "\\sqrt{2}\\cdot 2"]),
    ("x^2+2x+1", ["(x+1)^2", "x^2+2x+1", "(x+1)(x+1)", "x^2+1+2x", "x^2+2x"]),
    ("2", ["3", "2", "2.0", "\\frac{4}{2}", "two", "\\text{2}", "02"]),
    ("\\frac{3}{4}", ["0.75", "75\\%", "\\frac{6}{8}", "3/4", "\\tfrac{3}{4}"]),
    ("10", ["10.0", "10", "1,0", "10\\text{ cm}", "10^\\circ", "\\$10", "ten"]),
    ("1,000", ["1000", "1,000", "1{,}000", "10^3", "1.000"]),
    ("\\pi", ["3.14", "\\pi", "\\frac{2\\pi}{2}", "180^\\circ"]),
    ("(x-1)(x+1)", ["x^2-1", "(x+1)(x-1)", "x^2+1"]),
    ("\\text{Evelyn}", ["\\text{Evelyn}", "Evelyn", "\\text{Eve}"]),
    ("[2,5)", ["[2,5)", "[2, 5)", "(2,5)", "2\\le x<5"]),
    ("-\\frac{2}{3}", ["\\frac{-2}{3}", "-2/3", "-0.6667", "-\\dfrac23"]),
    ("(1,2)", ["(1,2)", "(1, 2)", "(2,1)", "\\left(1,2\\right)"]),
    ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", ["\\begin{pmatrix}1\\\\2\\end{pmatrix}", "(1,2)"]),
    ("1+2i", ["1+2i", "2i+1", "1-2i", "i2+1"]),
    ("y=2x+3", ["y=2x+3", "2x+3", "y = 3 + 2x"]),
    ("\\{1,2\\}", ["\\{1,2\\}", "\\{2,1\\}", "1,2", "1, 2"]),
    ("45^\\circ", ["45", "45^\\circ", "45^{\\circ}", "\\frac{\\pi}{4}"]),
    ("\\$18.90", ["18.90", "\\$18.90", "18.9", "\\$18.9"]),
    ("1011_2", ["1011_2", "1011", "11"]),
    ("5\\sqrt{3}", ["5\\sqrt3", "\\sqrt{75}", "8.66", "\\sqrt{3}5"]),
    ("\\infty", ["\\infty", "\\infinity", "oo"]),
    ("x \\in [-2,7]", ["[-2,7]", "-2\\le x\\le 7"]),
    ("2^{10}", ["1024", "2^10", "4^5", "2^{10}"]),
    ("e^2", ["e^2", "e^{2}", "\\exp(2)", "7.389"]),
    ("\\log_2 8", ["3", "\\log_2{8}", "\\log_{2} 8"]),
    ("0", ["0", "-0", "0.0", "\\frac{0}{5}", ""]),
    ("-3", ["-3", "- 3", "(-3)", "3"]),
    ("\\text{(C)}", ["\\text{(C)}", "(C)", "C", "\\textbf{(C)}"]),
    ("\\frac{\\sqrt{3}}{2}", ["\\frac{\\sqrt3}{2}", "\\sqrt{3}/2", "0.866", "\\frac{1}{2}\\sqrt{3}"]),
]


def build_math(data, rnd):
    docs = read_jsonl(os.path.join(data, "math", "test.jsonl"))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from lm_eval.tasks.minerva_math import utils as mu
    import math_equiv  # dllmq's restatement must carry lm-eval's lists verbatim
    assert math_equiv.SUBSTITUTIONS == mu.SUBSTITUTIONS
    assert math_equiv.REMOVED_EXPRESSIONS == mu.REMOVED_EXPRESSIONS
    picks = sorted(rnd.sample(range(len(docs)), 70)) + [2269]  # 2269: gold ending in "."
    recs = []
    for i in picks:
        g = mu.remove_boxed(mu.last_boxed_only_string(docs[i]["solution"]))
        assert g == fields("math", docs[i])["gold"]
        for kind, resp in math_variants(g, rnd):
            recs.append((i, kind, resp))
        kind, resp = MALFORMED_MATH[len(recs) % len(MALFORMED_MATH)]
        recs.append((i, kind, resp))
    for kind, resp in MALFORMED_MATH:
        recs.append((picks[0], kind, resp))
    return docs, recs


def score_math(data_file, docs, recs, literal=False):
    task = make_task("minerva_math/minerva_math_algebra.yaml", {"test": data_file, "train": data_file})
    # process_docs exactly as lm-eval runs it on the dataset
    import datasets
    pdocs = list(task.config.process_docs(datasets.Dataset.from_list(
        [{"problem": d["problem"], "solution": d["solution"]} for d in docs])))
    responses = [render(t, fields("math", docs[i])) for i, _, t in recs]
    scores = lm_scores(task, pdocs, [(i, r) for (i, _, _), r in zip(recs, responses)])
    from lm_eval.tasks.minerva_math import utils as mu
    out = []
    for (i, kind, tmpl), resp, sc in zip(recs, responses, scores):
        pred = mu.normalize_final_answer(mu.get_unnormalized_answer(cut(resp, ["Problem:"])))
        rec = {"task_id": i, "kind": kind, "template": tmpl, "sha256": sha(resp), "expected": sc,
               "pred_sha256": sha(pred), "gold_sha256": sha(pdocs[i]["answer"])}
        if literal:
            rec.update(pred=pred, gold=pdocs[i]["answer"])
        out.append(rec)
    return out


# --- GSM8K --------------------------------------------------------------------------------------

def gsm8k_variants(answer, rnd):
    num = answer.split("#### ")[-1].strip()
    A, B, N = P("answer"), P("body"), P("num")
    try:
        n = int(num.replace(",", ""))
    except ValueError:
        n = None
    v = [("gold", A), ("rewrite", B + "The answer is %s." % N),
         ("rewrite", "#### %s.00" % N), ("rewrite", "#### $%s" % N), ("rewrite", "#### %s." % N),
         ("rewrite", "So the total is $%s.\n#### %s" % (N, N))]
    if n is not None:
        v += [("rewrite", "#### {:,}".format(n)), ("wrong", "#### %d" % (n + 1)),
              ("wrong", B + "#### %d\nso %d" % (n + 1, n)), ("rewrite", "#### %d\nQuestion: x\nAnswer: #### 0" % n),
              ("rewrite", "The answer is %d</s>#### 7" % n), ("wrong", "#### -%d" % n)]
    return v


MALFORMED_GSM8K = [("empty", ""), ("empty", " \n "), ("malformed", "####"), ("malformed", "#### -"),
                   ("malformed", "#### ١٢"), ("malformed", "#### 1.2.3"), ("malformed", "....,,,"),
                   ("malformed", "<|im_end|>#### 5"), ("malformed", "Question: #### 5"),
                   ("malformed", "answer: 5 $ 6 $$ 7,8")]


def build_gsm8k(data, rnd):
    docs = read_jsonl(os.path.join(data, "gsm8k", "test.jsonl"))
    picks = sorted(rnd.sample(range(len(docs)), 25))
    recs = []
    for i in picks:
        for kind, resp in gsm8k_variants(docs[i]["answer"], rnd):
            recs.append((i, kind, resp))
    for k, (kind, resp) in enumerate(MALFORMED_GSM8K):
        recs.append((picks[k % len(picks)], kind, resp))
    return docs, recs


def score_gsm8k(data, docs, recs):
    test = os.path.join(data, "gsm8k", "test.jsonl")
    task = make_task("gsm8k/gsm8k.yaml", {"test": test, "train": os.path.join(data, "gsm8k", "train.jsonl")})
    return records("gsm8k", task, docs, recs, lambda i: i)


def records(name, task, docs, recs, task_id):
    responses = [render(t, fields(name, docs[i])) for i, _, t in recs]
    scores = lm_scores(task, docs, [(i, r) for (i, _, _), r in zip(recs, responses)])
    return [{"task_id": task_id(i), "kind": kind, "template": tmpl, "sha256": sha(resp), "expected": sc}
            for (i, kind, tmpl), resp, sc in zip(recs, responses, scores)]


# --- HumanEval ----------------------------------------------------------------------------------

def humaneval_variants(doc, rnd):
    sol = P("canonical_solution")
    v = [("gold", sol),
         ("gold_then_stop", sol + "\n\ndef unused():\n    return 1\n"),
         ("gold_then_stop", sol + "\nif __name__ == '__main__':\n    raise SystemExit(1)\n"),
         ("gold_then_stop", sol + "\n# done\nraise ValueError\n"),
         ("wrong", "    return None\n"),
         ("empty", ""),
         ("malformed", "    return (\n"),
         ("malformed", "  pass\n    return 1\n")]
    return v


CODE_EXTRAS_HE = [
    ("guard", "    import os\n    os.getcwd()\n"),        # reliability_guard: os.getcwd is None
    ("guard", "    exit(0)\n"),                             # builtins.exit is None
    ("guard", "    import sys\n    sys.exit(0)\n"),         # SystemExit: failed
    ("guard", "    import resource\n"),                     # sys.modules["resource"] = None
    ("guard", "    input()\n"),                             # stdin reads raise
    ("guard", "    import sys\n    sys.stdin.read()\n"),
    ("guard", "    import subprocess\n    subprocess.run(['true'])\n"),
    ("guard", "    raise KeyboardInterrupt\n"),
    ("timeout", "    while True:\n        pass\n"),
    ("timeout", "    import time\n    time.sleep(20)\n"),
]


def build_humaneval(data, rnd):
    docs = read_jsonl(os.path.join(data, "humaneval", "HumanEval.jsonl.gz"))
    picks = sorted(rnd.sample(range(len(docs)), 22))
    recs = []
    for i in picks:
        for kind, resp in humaneval_variants(docs[i], rnd):
            recs.append((i, kind, resp))
    for k, (kind, body) in enumerate(CODE_EXTRAS_HE):
        i = picks[k % len(picks)]
        # the extra runs first, then the canonical body: a pass means the extra was harmless
        recs.append((i, kind, body + P("canonical_solution")))
    recs.append((picks[0], "print", "    print('x' * 1000)\n" + P("canonical_solution")))
    return docs, recs


def score_humaneval(data, docs, recs):
    tmp = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False)
    for d in docs:
        tmp.write(json.dumps(d) + "\n")
    tmp.close()
    task = make_task("humaneval/humaneval.yaml", {"test": tmp.name})
    out = records("humaneval", task, docs, recs, lambda i: docs[i]["task_id"])
    os.unlink(tmp.name)
    return out


# --- MBPP ---------------------------------------------------------------------------------------

def mbpp_variants(doc, rnd):
    code = P("code")
    return [("gold", code),
            ("gold_then_stop", code + "\n[DONE]\nthis is not python"),
            ("rewrite", P("code_lf")),
            ("rewrite", code + "\nif __name__ == '__main__':\n    print(input())\n"),
            ("rewrite", "print('hello')\n" + code),
            ("wrong", "def f(*a):\n    return None\n"),
            ("empty", ""),
            ("malformed", code + "\n)")]


CODE_EXTRAS_MBPP = [
    ("guard", "import os\nos.getcwd()\n"),
    ("guard", "exit()\n"),
    ("guard", "import shutil\nshutil.rmtree('x')\n"),
    ("guard", "x = input()\n"),
    ("guard", "help(len)\n"),
    ("guard", "import os\nos.system('true')\n"),
    ("timeout", "while True:\n    pass\n"),
]


def build_mbpp(data, rnd):
    docs = [d for d in read_jsonl(os.path.join(data, "mbpp", "mbpp.jsonl")) if 11 <= d["task_id"] <= 510]
    cands = [k for k, d in enumerate(docs) if d["task_id"] not in SLOW_MBPP]
    picks = sorted(rnd.sample(cands, 22))
    recs = []
    for i in picks:
        for kind, resp in mbpp_variants(docs[i], rnd):
            recs.append((i, kind, resp))
    for k, (kind, pre) in enumerate(CODE_EXTRAS_MBPP):
        i = picks[k % len(picks)]
        recs.append((i, kind, pre + P("code")))
    return docs, recs


def score_mbpp(data, docs, recs):
    tmp = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False)
    for d in docs:
        tmp.write(json.dumps(d) + "\n")
    tmp.close()
    task = make_task("mbpp/mbpp.yaml", {"test": tmp.name})
    out = records("mbpp", task, docs, recs, lambda i: docs[i]["task_id"])
    os.unlink(tmp.name)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="shared/data")
    ap.add_argument("--out", required=True)
    ap.add_argument("--code-eval", default="", help="local copy of HF evaluate's metrics/code_eval")
    ap.add_argument("--seed", type=int, default=20250305)
    ap.add_argument("--only", default="math,math_synth,gsm8k,humaneval,mbpp")
    a = ap.parse_args()
    if os.environ.get("HF_ALLOW_CODE_EVAL") != "1":
        sys.exit("set HF_ALLOW_CODE_EVAL=1 (HF code_eval executes the programs)")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    patch_code_eval(a.code_eval)
    os.makedirs(a.out, exist_ok=True)
    only = set(a.only.split(","))
    from importlib.metadata import version
    meta = {"lm_eval": version("lm_eval"), "generated": time.strftime("%Y-%m-%d"), "seed": a.seed,
            "python": sys.version.split()[0], "code_eval": a.code_eval or "hub",
            "packages": {p: version(p) for p in ("sympy", "antlr4-python3-runtime", "math-verify",
                                                   "latex2sympy2_extended", "evaluate", "datasets",
                                                   "transformers")},
            "counts": {}}
    t0 = time.time()
    if "math" in only:
        rnd = random.Random(a.seed)
        docs, recs = build_math(a.data, rnd)
        rows = score_math(os.path.join(a.data, "math", "test.jsonl"), docs, recs)
        write_jsonl(os.path.join(a.out, "math.lmeval.jsonl"), rows)
        meta["counts"]["math"] = len(rows)
        print("math: %d (%.0f s)" % (len(rows), time.time() - t0), flush=True)
    if "math_synth" in only:
        sdocs, recs = [], []
        for k, (g, answers) in enumerate(SYNTH_MATH):
            sdocs.append({"problem": "Synthetic problem %d." % k, "type": "Algebra",
                          "solution": "Self-written for the parity test. So the answer is $\\boxed{%s}$." % g})
            for ans in answers:
                recs.append((k, "synthetic", final(ans)))
            recs.append((k, "boxed_only", "Hence $\\boxed{%s}$." % answers[0]))
        dpath = os.path.join(a.out, "math_synth_docs.jsonl")
        write_jsonl(dpath, sdocs)
        rows = score_math(dpath, sdocs, recs, literal=True)
        write_jsonl(os.path.join(a.out, "math_synth.jsonl"), rows)
        meta["counts"]["math_synth"] = len(rows)
        print("math_synth: %d (%.0f s)" % (len(rows), time.time() - t0), flush=True)
    for name, build, score in (("gsm8k", build_gsm8k, score_gsm8k),
                               ("humaneval", build_humaneval, score_humaneval),
                               ("mbpp", build_mbpp, score_mbpp)):
        if name not in only:
            continue
        rnd = random.Random(a.seed + len(name))
        docs, recs = build(a.data, rnd)
        rows = score(a.data, docs, recs)
        write_jsonl(os.path.join(a.out, name + ".lmeval.jsonl"), rows)
        meta["counts"][name] = len(rows)
        print("%s: %d (%.0f s)" % (name, len(rows), time.time() - t0), flush=True)
    mpath = os.path.join(a.out, "meta.json")
    if os.path.exists(mpath):
        old = json.load(open(mpath))
        old.get("counts", {}).update(meta["counts"])
        meta["counts"] = old.get("counts", meta["counts"])
    with open(mpath, "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
