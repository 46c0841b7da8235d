#!/usr/bin/env python3
"""Deterministic generator of GSM8K-format synthetic word problems (dllmq-synth).

Each problem tells a short story about quantities below 100 and asks for one number.
The solution copies the numbers out of the question and combines them in 2-3 steps
(+, -, doubling, tripling), one equation per line, and ends with `#### N`.

Inside the steps every number is written zero-padded to two digits (`15 - 06 = 09`):
a fixed-width layout lets a tiny bidirectional model align digits by position
(a probe without padding stayed at 3-4% exact match, with padding ~96%).
After `####` the number is written plainly so GSM8K answer extraction works.

Two story families (chosen at random):
  chain:  one person starts with a quantity, then 2-3 events change it.
  pair:   person B's quantity is defined from person A's (more/fewer/twice/three
          times), optionally followed by one event, and the question asks for
          B's amount or for both together.
`--distractors` adds an unrelated fact about another person (harder variant).

Usage:
  python3 training/synth_task.py --out data/synth            # test+validation+train
The split is made by question text: validation and test questions never occur in train.
"""
import argparse
import json
import os
import random
import sys

NAMES_F = ["Mia", "Ava", "Emma", "Lily", "Zoe", "Nora", "Ella", "Ruby", "Lucy", "Sara",
           "Hana", "Iris", "Jade", "Kate", "Lena", "Maya", "Nina", "Olga", "Rosa", "Tara"]
NAMES_M = ["Liam", "Noah", "Owen", "Jack", "Leo", "Ben", "Sam", "Tom", "Max", "Eli",
           "Ivan", "Omar", "Paul", "Ravi", "Hugo", "Dan", "Finn", "Jonas", "Kai", "Luis"]
OBJECTS = ["apples", "marbles", "stickers", "pencils", "cookies", "books", "coins",
           "stamps", "shells", "cards", "balloons", "candies", "eggs", "toy cars",
           "flowers", "beads", "crayons", "oranges", "buttons", "rocks", "kites",
           "cupcakes", "plums", "erasers", "feathers"]
ADD = ["buys {n} more {o}", "finds {n} more {o}", "gets {n} more {o}",
       "is given {n} {o}", "picks up {n} {o}", "receives {n} {o} as a gift",
       "wins {n} {o}", "collects {n} more {o}"]
SUB = ["gives away {n} {o}", "loses {n} {o}", "sells {n} {o}", "uses {n} {o}",
       "gives {n} {o} to a friend", "trades away {n} {o}", "drops {n} {o}"]
DOUBLE = ["doubles the number of {o} {p} has", "ends up with twice as many {o}",
          "manages to double {pp} {o}"]
TRIPLE = ["triples the number of {o} {p} has", "ends up with three times as many {o}",
          "manages to triple {pp} {o}"]
THEN = ["Then", "After that", "Later", "Next"]
ASK_NOW = ["How many {o} does {x} have now?", "How many {o} does {x} have in the end?",
           "How many {o} does {x} end up with?"]
LIMIT = 99  # every quantity (given, intermediate, final) stays in 1..99


def person(rng, avoid=()):
    while True:
        female = rng.random() < 0.5
        name = rng.choice(NAMES_F if female else NAMES_M)
        if name not in avoid:
            return name, ("She" if female else "He"), ("she" if female else "he"), ("her" if female else "his")


def p2(n):
    return "%02d" % n  # fixed-width two-digit numbers inside the steps


def random_op(rng, cur):
    """Pick an operation that keeps the running value inside 1..LIMIT."""
    ops = []
    if cur < LIMIT:
        ops += ["add"] * 3
    if cur > 1:
        ops += ["sub"] * 3
    if 2 * cur <= LIMIT:
        ops.append("dbl")
    if 3 * cur <= LIMIT:
        ops.append("tpl")
    op = rng.choice(ops)
    if op == "add":
        n = rng.randint(1, min(40, LIMIT - cur))
        return op, n, cur + n
    if op == "sub":
        n = rng.randint(1, cur - 1)
        return op, n, cur - n
    return op, None, cur * (2 if op == "dbl" else 3)


def step_line(op, cur, n, new):
    if op == "add":
        return f"{p2(cur)} + {p2(n)} = {p2(new)}"
    if op == "sub":
        return f"{p2(cur)} - {p2(n)} = {p2(new)}"
    return f"{p2(cur)} * {2 if op == 'dbl' else 3} = {p2(new)}"


def event_text(rng, op, n, obj, pron, pos):
    if op == "add":
        return rng.choice(ADD).format(n=n, o=obj)
    if op == "sub":
        return rng.choice(SUB).format(n=n, o=obj)
    return rng.choice(DOUBLE if op == "dbl" else TRIPLE).format(o=obj, p=pron, pp=pos)


def distractor(rng, avoid, obj):
    name = person(rng, avoid)[0]
    other = rng.choice([o for o in OBJECTS if o != obj])
    return rng.choice([f"{name} has {rng.randint(1, 99)} {other}.",
                       f"{name} has {rng.randint(1, 99)} {obj}, but keeps them at home.",
                       f"{name} once bought {rng.randint(1, 99)} {other}."])


def gen_chain(rng, distract):
    name, He, he, his = person(rng)
    obj = rng.choice(OBJECTS)
    cur = rng.randint(2, 60)
    sents = [f"{name} has {cur} {obj}."]
    lines = []
    for i in range(rng.randint(2, 3)):
        op, n, new = random_op(rng, cur)
        ev = event_text(rng, op, n, obj, he, his)
        sents.append(f"{He} {ev}." if i == 0 else f"{rng.choice(THEN)} {he} {ev}.")
        lines.append(step_line(op, cur, n, new))
        cur = new
    if distract:  # at the end only: a new person before "Then he ..." would make the pronoun ambiguous
        sents.append(distractor(rng, {name}, obj))
    sents.append(rng.choice(ASK_NOW).format(o=obj, x=name))
    return " ".join(sents), lines, cur


def gen_pair(rng, distract):
    a, _, _, _ = person(rng)
    b, Hb, hb, hisb = person(rng, {a})
    obj = rng.choice(OBJECTS)
    va = rng.randint(2, 60)
    rel = rng.choice(["more", "fewer", "twice", "three"])
    if rel == "more" and va < LIMIT - 1:
        k = rng.randint(1, min(40, LIMIT - va - 1))
        vb, rtxt, line = va + k, f"{k} more {obj} than {a}", f"{p2(va)} + {p2(k)} = {p2(va + k)}"
    elif rel == "fewer" and va > 2:
        k = rng.randint(1, va - 1)
        vb, rtxt, line = va - k, f"{k} fewer {obj} than {a}", f"{p2(va)} - {p2(k)} = {p2(va - k)}"
    elif rel == "three" and 3 * va <= LIMIT:
        vb, rtxt, line = 3 * va, f"three times as many {obj} as {a}", f"{p2(va)} * 3 = {p2(3 * va)}"
    elif 2 * va <= LIMIT:
        vb, rtxt, line = 2 * va, f"twice as many {obj} as {a}", f"{p2(va)} * 2 = {p2(2 * va)}"
    else:
        k = rng.randint(1, va - 1)
        vb, rtxt, line = va - k, f"{k} fewer {obj} than {a}", f"{p2(va)} - {p2(k)} = {p2(va - k)}"
    sents = [f"{a} has {va} {obj}.", f"{b} has {rtxt}."]
    lines = [line]
    # second step: either total of both, or one event for B (then ask for B)
    if va + vb <= LIMIT and rng.random() < 0.5:
        if distract:
            sents.insert(rng.randint(1, len(sents)), distractor(rng, {a, b}, obj))
        asks = [f"How many {obj} do {a} and {b} have together?",
                f"How many {obj} do {a} and {b} have in total?"]
        if not distract:  # "they" would be ambiguous next to a distractor person
            asks.append(f"How many {obj} do they have in total?")
        sents.append(rng.choice(asks))
        lines.append(f"{p2(va)} + {p2(vb)} = {p2(va + vb)}")
        return " ".join(sents), lines, va + vb
    cur = vb
    for i in range(rng.randint(1, 2)):
        op, n, new = random_op(rng, cur)
        sents.append(f"{rng.choice(THEN)} {b} {event_text(rng, op, n, obj, hb, hisb)}.")
        lines.append(step_line(op, cur, n, new))
        cur = new
    if distract:
        sents.insert(rng.randint(1, len(sents)), distractor(rng, {a, b}, obj))
    sents.append(rng.choice(ASK_NOW).format(o=obj, x=b))
    return " ".join(sents), lines, cur


DRILL_START = ["Start with {n}.", "Take the number {n}.", "Begin at {n}."]
DRILL_OPS = {"add": ["Add {n}.", "Add {n} to it.", "Plus {n}."],
             "sub": ["Subtract {n}.", "Take away {n}.", "Minus {n}."],
             "dbl": ["Double it.", "Multiply it by 2."], "tpl": ["Triple it.", "Multiply it by 3."]}


def gen_drill(rng):
    """Arithmetic drill without a story: the same step lines, 1-3 of them, with the operands
    stated plainly (`Start with 59. Subtract 51. ...`). Training-only curriculum data: it
    isolates the two-digit arithmetic, the skill the story problems were slowest to learn."""
    cur = rng.randint(1, LIMIT)
    sents, lines = [rng.choice(DRILL_START).format(n=cur)], []
    for _ in range(rng.randint(1, 3)):
        op, n, new = random_op(rng, cur)
        sents.append(rng.choice(DRILL_OPS[op]).format(n=n))
        lines.append(step_line(op, cur, n, new))
        cur = new
    sents.append(rng.choice(["What is the result?", "What number do you get?", "What is the final number?"]))
    return " ".join(sents), lines, cur


def make_drill(rng, bare=False):
    """bare: single step line and no `####` line, so the result appears nowhere else in the
    answer and can only be computed, never copied."""
    if bare:
        cur = rng.randint(1, LIMIT)
        op, n, new = random_op(rng, cur)
        q = f"{rng.choice(DRILL_START).format(n=cur)} " \
            f"{rng.choice(DRILL_OPS[op]).format(n=n)} What is the result?"
        return {"question": q, "answer": step_line(op, cur, n, new)}
    q, lines, ans = gen_drill(rng)
    return {"question": q, "answer": "\n".join(lines) + f"\n#### {ans}"}


def make_compute(rng):
    """`Compute 59 - 51.` -> `59 - 51 = 08`: the bare equation, operands written as in the
    question. Curriculum data for the arithmetic alone; learned fastest of the drill kinds, but by
    reading the question's equation, which does not carry over to the stories (model card, runs
    10-13). +/- with the first operand in 10..99, x2/x3 one time in ten."""
    r = rng.random()
    if r < 0.1:
        op, k = ("dbl", 2) if r < 0.05 else ("tpl", 3)
        a = rng.randint(1, LIMIT // k)
        return {"question": f"Compute {a} * {k}.", "answer": step_line(op, a, None, a * k)}
    a = rng.randint(10, LIMIT)
    if r < 0.55:
        b = rng.randint(0, LIMIT - a)
        return {"question": f"Compute {a} + {b}.", "answer": step_line("add", a, b, a + b)}
    b = rng.randint(0, a)
    return {"question": f"Compute {a} - {b}.", "answer": step_line("sub", a, b, a - b)}


def make_equation(rng):
    """`Write a true equation.` -> `59 - 51 = 08`: make_compute's equations with a question
    that carries no numbers, so the result can only be computed from the operands in the answer
    line itself, as in the stories (make_compute's question lets a model read the operands off the
    question instead: training/README.md, run 10)."""
    return {"question": "Write a true equation.", "answer": make_compute(rng)["answer"]}


def make_problem(rng, distract=False):
    gen = gen_chain if rng.random() < 0.6 else gen_pair
    q, lines, ans = gen(rng, distract)
    assert all(1 <= int(t) <= LIMIT for l in lines for t in l.replace("=", " ").split() if t.isdigit())
    return {"question": q, "answer": "\n".join(lines) + f"\n#### {ans}"}


def answer_value(answer):
    return answer.split("####")[-1].strip()


def generate(seed, n, exclude=frozenset(), distract=False):
    """n problems with distinct questions, none in `exclude`."""
    rng = random.Random(seed)
    seen, out = set(exclude), []
    while len(out) < n:
        p = make_problem(rng, distract)
        if p["question"] in seen:
            continue
        seen.add(p["question"])
        out.append(p)
    return out


def write_jsonl(path, rows):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
    from atomic_write import atomic_open  # the shipped data set, written crash-safe
    with atomic_open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="data/synth")
    ap.add_argument("--n-train", type=int, default=200_000)
    ap.add_argument("--n-val", type=int, default=500)
    ap.add_argument("--n-test", type=int, default=1000)
    ap.add_argument("--distractors", action="store_true", help="harder variant (suffix _distract)")
    ap.add_argument("--drills", type=int, default=0, help="write only N arithmetic drills to train_drills.jsonl")
    ap.add_argument("--bare", action="store_true", help="with --drills: one step line, no `####` line "
                    "(train_drills_bare.jsonl)")
    ap.add_argument("--compute", action="store_true", help="with --drills: `Compute A op B.` -> the equation "
                    "(train_drills_compute.jsonl)")
    ap.add_argument("--equations", action="store_true", help="with --drills: a number-free question -> an "
                    "equation (train_drills_equations.jsonl)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.drills:
        rng = random.Random(4004)
        if args.compute:
            name, make = "train_drills_compute.jsonl", make_compute
        elif args.equations:
            name, make = "train_drills_equations.jsonl", make_equation
        else:
            name = "train_drills_bare.jsonl" if args.bare else "train_drills.jsonl"
            make = lambda r: make_drill(r, args.bare)  # noqa: E731
        write_jsonl(os.path.join(args.out, name), [make(rng) for _ in range(args.drills)])
        print(f"wrote {args.drills} drills to {args.out}/{name}")
        return
    sfx = "_distract" if args.distractors else ""
    # separate seeds per split; test first, then validation excluding test, then train excluding both
    test = generate(1001, args.n_test, distract=args.distractors)
    val = generate(2002, args.n_val, {p["question"] for p in test}, args.distractors)
    held = {p["question"] for p in test + val}
    train = generate(3003, args.n_train, held, args.distractors)
    write_jsonl(os.path.join(args.out, f"test{sfx}.jsonl"), test)
    write_jsonl(os.path.join(args.out, f"validation{sfx}.jsonl"), val)
    write_jsonl(os.path.join(args.out, f"train{sfx}.jsonl"), train)
    print(f"wrote {len(train)} train, {len(val)} validation, {len(test)} test to {args.out}")


if __name__ == "__main__":
    main()
