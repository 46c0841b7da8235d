#!/usr/bin/python3
"""lm-eval v0.4.8 minerva_math `is_equiv` for the dllmq harness (src/eval/math_equiv_client.cpp).

    math_equiv.py --check       exit 0 if sympy's LaTeX parser works (needs antlr4-python3-runtime 4.11)
    math_equiv.py < pairs.jsonl  one {"a": normalized_pred, "b": normalized_gold} per line in,
                                 one {"equiv": bool} per line out, same order

Equivalence: parse_latex both, simplify(a - b) == 0, all under a 5 s SIGALRM; any parse,
subtract or simplify error or a timeout counts as not equivalent (no string fallback), as upstream.
"""
import json
import signal
import sys


def load():
    import sympy
    from sympy.parsing.latex import parse_latex
    parse_latex("1")  # raises ImportError when antlr4 is missing or the wrong version
    return sympy, parse_latex


class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout()


def is_equiv(sympy, parse_latex, a, b):
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(5)
    try:
        try:
            x, y = parse_latex(a), parse_latex(b)
        except Exception:
            return False
        try:
            diff = x - y
        except Exception:
            return False
        try:
            return bool(sympy.simplify(diff) == 0)
        except Exception:
            return False
    except Timeout:
        return False
    finally:
        signal.alarm(0)


def main():
    try:
        sympy, parse_latex = load()
    except Exception as e:  # ImportError, antlr version mismatch, ...
        print("sympy LaTeX parsing unavailable: %s" % str(e).splitlines()[0], file=sys.stderr)
        return 3
    if "--check" in sys.argv[1:]:
        return 0
    for line in sys.stdin:
        if not line.strip():
            continue
        p = json.loads(line)
        try:
            eq = is_equiv(sympy, parse_latex, p["a"], p["b"])
        except Timeout:
            eq = False
        sys.stdout.write(json.dumps({"equiv": eq}) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
