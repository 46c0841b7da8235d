#!/usr/bin/python3
"""MATH scorer for dllmq: lm-eval v0.4.8 minerva_math `process_results`, as a long-lived helper.

One process serves a whole `dllmq eval` run (one per worker, src/eval/math_equiv_client.cpp):

    math_equiv.py            serve: first line out is {"ready": true, "versions": {...}, "pin_mismatch": [...]}
                             (or {"ready": false, "error": "..."} and exit 3); then, per request line
                             {"id": N, "response": R, "solution": S, "phases": ["equiv", "verify"]}
                             one line per phase, in order:
                               {"id": N, "phase": "equiv", "pred": P, "gold": G, "value": 0|1}
                               {"id": N, "phase": "verify", "value": 0|1}
    math_equiv.py --check    print the ready line and exit 0 (usable) or 3 (not)

R is the model response after the task's stop strings ("Problem:"), S the document's `solution`.
Semantics (lm_eval/tasks/minerva_math/utils.py at v0.4.8, re-stated here; the regexes and lists are
the spec and are kept verbatim):
  gold  = normalize_final_answer(remove_boxed(last_boxed_only_string(S)))      (process_docs)
  pred  = normalize_final_answer(get_unnormalized_answer(R))
  exact_match = is_equiv(pred, gold): sympy parse_latex on both, simplify(a - b) == 0, all under one
                5 s SIGALRM; any parse / subtract / simplify error or the timeout gives 0, no string
                fallback
  math_verify = math_verify.verify(math_verify.parse(gold), math_verify.parse(R)) with the library's
                defaults (5 s timeouts of its own)
Requests are handled one at a time, in the main thread (the alarms need it). The client kills and
restarts a helper that stops answering (a hang outside Python code) or dies, and scores the phase
it was in as 0.
"""
import json
import logging
import os
import re
import signal
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PINNED = ("sympy", "mpmath", "antlr4-python3-runtime", "math-verify", "latex2sympy2_extended")


def versions():
    from importlib.metadata import PackageNotFoundError, version
    out = {"python": "%d.%d.%d" % sys.version_info[:3]}
    for name in PINNED:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def pins():
    want = {}
    try:
        with open(os.path.join(HERE, "requirements.txt"), encoding="utf-8") as f:
            for line in f:
                m = re.match(r"^\s*([A-Za-z0-9_.\-]+)==([^\s\\;]+)", line)
                if m:
                    want[m.group(1).lower().replace("_", "-")] = m.group(2)
    except OSError:
        pass
    return want


# --- minerva_math (lm-eval v0.4.8) ---------------------------------------------------------------

def last_boxed_only_string(string):
    idx = string.rfind("\\boxed")
    if "\\boxed " in string:
        return "\\boxed " + string.split("\\boxed ")[-1].split("$")[0]
    if idx < 0:
        idx = string.rfind("\\fbox")
        if idx < 0:
            return None
    depth = 0
    for i in range(idx, len(string)):
        if string[i] == "{":
            depth += 1
        if string[i] == "}":
            depth -= 1
            if depth == 0:
                return string[idx:i + 1]
    return None


def remove_boxed(s):
    if "\\boxed " in s:
        left = "\\boxed "
        assert s[:len(left)] == left
        return s[len(left):]
    left = "\\boxed{"
    assert s[:len(left)] == left
    assert s[-1] == "}"
    return s[len(left):-1]


def get_unnormalized_answer(text):
    text += "I hope it is correct."
    match = re.search(r"Final Answer: The final answer is(.*?). I hope it is correct.", text)
    return match.group(1).strip() if match else "[invalidanswer]"


SUBSTITUTIONS = [
    ("an ", ""), ("a ", ""), (".$", "$"), ("\\$", ""), (r"\ ", ""), (" ", ""), ("mbox", "text"),
    (",\\text{and}", ","), ("\\text{and}", ","), ("\\text{m}", "\\text{}"),
]
REMOVED_EXPRESSIONS = [
    "square", "ways", "integers", "dollars", "mph", "inches", "ft", "hours", "km", "units", "\\ldots",
    "sue", "points", "feet", "minutes", "digits", "cents", "degrees", "cm", "gm", "pounds", "meters",
    "meals", "edges", "students", "childrentickets", "multiples", "\\text{s}", "\\text{.}",
    "\\text{\ns}", "\\text{}^2", "\\text{}^3", "\\text{\n}", "\\text{}", r"\mathrm{th}", r"^\circ",
    r"^{\circ}", r"\;", r",\!", "{,}", '"', "\\dots",
]


def normalize_final_answer(final_answer):
    final_answer = final_answer.split("=")[-1]
    for before, after in SUBSTITUTIONS:
        final_answer = final_answer.replace(before, after)
    for expr in REMOVED_EXPRESSIONS:
        final_answer = final_answer.replace(expr, "")
    final_answer = re.sub(r"(.*?)(\$)(.*?)(\$)(.*)", "$\\3$", final_answer)
    final_answer = re.sub(r"(\\text\{)(.*?)(\})", "\\2", final_answer)
    final_answer = re.sub(r"(\\textbf\{)(.*?)(\})", "\\2", final_answer)
    final_answer = re.sub(r"(\\overline\{)(.*?)(\})", "\\2", final_answer)
    final_answer = re.sub(r"(\\boxed\{)(.*)(\})", "\\2", final_answer)
    final_answer = re.sub(r"(frac)([^{])(.)", "frac{\\2}{\\3}", final_answer)
    final_answer = re.sub(r"(sqrt)([^{])", "sqrt{\\2}", final_answer)
    final_answer = final_answer.replace("$", "")
    if final_answer.replace(",", "").isdigit():
        final_answer = final_answer.replace(",", "")
    return final_answer


class _Alarm:
    """lm-eval's `timeout` context manager: SIGALRM after `seconds`, raising TimeoutError."""

    def __init__(self, seconds):
        self.seconds = seconds

    def _handle(self, signum, frame):
        raise TimeoutError("Timeout")

    def __enter__(self):
        signal.signal(signal.SIGALRM, self._handle)
        signal.alarm(self.seconds)

    def __exit__(self, *exc):
        signal.alarm(0)


class Scorer:
    def __init__(self):
        import sympy
        import sympy.parsing.latex.errors  # noqa: F401  (LaTeXParsingError, as lm-eval names it)
        from importlib.metadata import version
        from math_verify import parse, verify
        from sympy.parsing.latex import parse_latex
        if not version("antlr4-python3-runtime").startswith("4.11"):
            raise ImportError("antlr4-python3-runtime %s installed; sympy's LaTeX parser needs 4.11"
                              % version("antlr4-python3-runtime"))
        parse_latex("1")  # raises ImportError when the antlr4 runtime does not fit
        self.sympy, self.parse_latex, self.mv_parse, self.mv_verify = sympy, parse_latex, parse, verify
        self.gold_cache = {}

    def gold(self, solution):
        g = self.gold_cache.get(solution)
        if g is None:
            try:
                g = normalize_final_answer(remove_boxed(last_boxed_only_string(solution)))
            except Exception:  # lm-eval's process_docs would stop here; dllmq rejects such data
                g = ""
            if len(self.gold_cache) < 100000:
                self.gold_cache[solution] = g
        return g

    def is_equiv(self, x1, x2):
        sympy = self.sympy
        try:
            with _Alarm(5):
                try:
                    a = self.parse_latex(x1)
                    b = self.parse_latex(x2)
                except (sympy.parsing.latex.errors.LaTeXParsingError, sympy.SympifyError, TypeError):
                    return False
                try:
                    diff = a - b
                except TypeError:
                    return False
                try:
                    return bool(sympy.simplify(diff) == 0)
                except ValueError:
                    return None  # falls through in lm-eval: falsy
        except TimeoutError:
            return False
        except ImportError:
            raise
        except Exception:
            return False

    def verify(self, gold, response):
        return self.mv_verify(self.mv_parse(gold), self.mv_parse(response))


def ready_line():
    try:
        scorer = Scorer()
    except Exception as e:  # ImportError, wrong antlr4, ...
        msg = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        return None, {"ready": False, "error": msg, "python": sys.executable}
    v = versions()
    want = pins()
    mismatch = ["%s %s (pinned %s)" % (k, v.get(k), want[k]) for k in sorted(want)
                if k in v and v.get(k) != want[k]]
    return scorer, {"ready": True, "versions": v, "pin_mismatch": mismatch, "python": sys.executable}


PROTO = sys.stdout  # replaced in main(): the protocol gets fd 1 to itself


def send(obj):
    PROTO.write(json.dumps(obj) + "\n")
    PROTO.flush()


def serve(scorer):
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if not line:
            return 0
        if not line.strip():
            continue
        req = json.loads(line)
        rid = req.get("id")
        response = req.get("response", "")
        gold = scorer.gold(req.get("solution", ""))
        for phase in req.get("phases", ["equiv", "verify"]):
            if phase == "equiv":
                pred = normalize_final_answer(get_unnormalized_answer(response))
                value = scorer.is_equiv(pred, gold)
                send({"id": rid, "phase": "equiv", "pred": pred, "gold": gold, "value": 1 if value else 0})
            elif phase == "verify":
                try:
                    value = scorer.verify(gold, response)
                    send({"id": rid, "phase": "verify", "value": 1 if value else 0})
                except Exception as e:  # lm-eval would stop the run here
                    send({"id": rid, "phase": "verify", "value": 0, "error": "%s: %s" % (type(e).__name__, e)})
            else:
                send({"id": rid, "phase": phase, "value": 0, "error": "unknown phase"})


def main():
    global PROTO
    # Only protocol lines go to stdout: anything a library prints (Python or C) goes to stderr.
    PROTO = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    logging.disable(logging.CRITICAL)  # math_verify logs its timeouts; the verdicts carry them
    scorer, ready = ready_line()
    send(ready)
    if scorer is None:
        print("MATH scorer unavailable (%s): %s" % (sys.executable, ready["error"]), file=sys.stderr)
        return 3
    if "--check" in sys.argv[1:]:
        return 0
    return serve(scorer)


if __name__ == "__main__":
    sys.exit(main())
