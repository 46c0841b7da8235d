#!/usr/bin/python3
"""The weights x KV table and plot of a finished configs/weights_synth.json grid.

    weights_report.py [--run runs/weights-synth] [--png docs/img/weights_synth.png]
                      [--w8a8-runs runs/weights-synth-w8a8] > table.md

Reads the grid's grid.json (each cell's summary: accuracy, mean KV bytes, and the checkpoint's
weight_bytes that `dllmq eval` records) and each cell's samples.jsonl (per-problem correctness),
and writes:
- a markdown table, one row per model x cache mode x KV store: accuracy with bf16, int8 and
  int4-g128 weights, each quantized format's difference from bf16 with an exact McNemar p-value
  on the same problems (two-sided binomial test on the discordant pairs), and the total bytes
  (weights + KV) of each;
- one figure (a panel per model x cache mode) of accuracy against total bytes: colour = KV store,
  marker = weight format;
- with --w8a8-runs DIR, a second table: `dllmq eval --w8a8` runs in DIR named
  MODEL-FORMAT-CACHE-KV (e.g. synth-llada-int8-dual-fp16) against the grid's exact cell with the
  same weights, cache and KV store (difference and McNemar p on the same problems).
Run with Debian's /usr/bin/python3 (python3-matplotlib).
"""
import argparse
import json
import math
import os
import re
import sys

WEIGHTS = [("bf16", ""), ("int8", "-int8"), ("int4-g128", "-int4")]
MODELS = ["synth-llada", "synth-dream"]
CACHES = ["prefix", "dual"]
KVS = ["fp16", "kivi-4", "kvquant-trace-4", "dllm-kvq-trace-4", "kivi-2", "kvquant-trace-2", "dllm-kvq-trace-2"]


def mcnemar_p(a, b):
    """Exact two-sided McNemar p on paired 0/1 lists: binomial(n_discordant, 1/2)."""
    n01 = sum(1 for x, y in zip(a, b) if x and not y)
    n10 = sum(1 for x, y in zip(a, b) if y and not x)
    n = n01 + n10
    if n == 0:
        return 1.0
    k = min(n01, n10)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0 ** n
    return min(1.0, 2 * tail)


def cells_of(run):
    """{(model label, cache, kv name): cell} from the grid's grid.json (its cells' run directories and
    summaries); the cache mode is read from the run's generation settings, so a grid whose cache
    axis has one value (left out of the directory labels) reads the same."""
    out = {}
    for e in json.load(open(os.path.join(run, "grid.json"))):
        s = e.get("summary") or {}
        if e.get("exit_code") != 0 or "strict_match" not in s:
            continue
        point = dict(kv.split("=", 1) for kv in e["point"].split(",") if "=" in kv)
        cache = re.search(r"cache (\w+)", s["config"]["generation"]).group(1)
        rows = [json.loads(x) for x in open(os.path.join(e["run_dir"], "samples.jsonl")) if x.strip()]
        out[(point.get("model"), cache, point.get("kv", "?"))] = {
            "acc": s["strict_match"], "n": s["n"], "ok": {r["task_id"]: bool(r.get("correct")) for r in rows},
            "total": s.get("weight_bytes", 0) + s.get("mean_kv_bytes", 0), "bits": s.get("kv_bits_effective")}
    return out


def read_run(d):
    """Accuracy and per-problem correctness of one `dllmq eval` run directory."""
    s = json.load(open(os.path.join(d, "summary.json")))
    rows = [json.loads(x) for x in open(os.path.join(d, "samples.jsonl")) if x.strip()]
    return {"acc": s["strict_match"], "n": s["n"], "ok": {r["task_id"]: bool(r.get("correct")) for r in rows}}


def w8a8_table(cells, root):
    out = ["| model | weights | cache | KV | exact acc | --w8a8 acc (Δ, p) |", "|---|---|---|---|---|---|"]
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        if not os.path.exists(os.path.join(d, "summary.json")):
            continue
        m = re.match(r"(synth-\w+)-(int8|int4)-(prefix|dual)-(.+)$", name)
        if not m:
            continue
        model, fmt, cache, kv = m.groups()
        w = "int8" if fmt == "int8" else "int4-g128"
        base = cells.get((model, w, cache, kv))
        if not base:
            continue
        q = read_run(d)
        ids = sorted(set(base["ok"]) & set(q["ok"]))
        p = mcnemar_p([base["ok"][i] for i in ids], [q["ok"][i] for i in ids])
        out.append("| %s | %s | %s | %s | %.3f | %.3f (%+.1f, p %.2g) |" % (
            model, w, cache, kv, base["acc"], q["acc"], 100 * (q["acc"] - base["acc"]), p))
    out.append("")
    out.append("--w8a8: activations rounded per row to int8 (docs/weight_quant.md); Δ in points against the exact "
               "kernels with the same weights; p: exact McNemar on the same problems.")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", default="runs/weights-synth")
    ap.add_argument("--png", default="docs/img/weights_synth.png")
    ap.add_argument("--w8a8-runs", default="")
    a = ap.parse_args()
    found = cells_of(a.run)
    cells = {}
    for m in MODELS:
        for w, suffix in WEIGHTS:
            mv = m if not suffix else os.path.join(a.run, "models", m + suffix)
            for (model, c, kv), x in found.items():
                if model == mv.replace("/", "_").replace(" ", "_"):  # as the grid labels it
                    cells[(m, w, c, kv)] = x
    if not cells:
        sys.exit("weights_report: no finished cells under %s" % a.run)

    out = ["| model | cache | KV | eff. KV bits | bf16 acc | int8 acc (Δ, p) | int4-g128 acc (Δ, p) "
           "| total MB bf16 / int8 / int4 |", "|---|---|---|---|---|---|---|---|"]
    for m in MODELS:
        for c in CACHES:
            for kv in KVS:
                base = cells.get((m, "bf16", c, kv))
                if not base:
                    continue
                cols = ["%.3f" % base["acc"]]
                sizes = ["%.2f" % (base["total"] / 1e6)]
                for w, _ in WEIGHTS[1:]:
                    q = cells.get((m, w, c, kv))
                    if not q:
                        cols.append("—")
                        sizes.append("—")
                        continue
                    ids = sorted(set(base["ok"]) & set(q["ok"]))
                    p = mcnemar_p([base["ok"][i] for i in ids], [q["ok"][i] for i in ids])
                    cols.append("%.3f (%+.1f, p %.2g)" % (q["acc"], 100 * (q["acc"] - base["acc"]), p))
                    sizes.append("%.2f" % (q["total"] / 1e6))
                bits = "%.2f" % base["bits"] if base.get("bits") else "—"
                out.append("| %s | %s | %s | %s | %s | %s |" % (m, c, kv, bits, " | ".join(cols), " / ".join(sizes)))
    n = sorted({x["n"] for x in cells.values()})
    out.append("")
    out.append("n = %s problems per cell (data/synth/test.jsonl); Δ in points against bf16 weights with the same "
               "cache; p: exact McNemar on the same problems." % "/".join(map(str, n)))
    print("\n".join(out))
    if a.w8a8_runs:
        print()
        print(w8a8_table(cells, a.w8a8_runs))

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    markers = {"bf16": "o", "int8": "s", "int4-g128": "^"}
    cmap = plt.get_cmap("tab10")
    fig, axes = plt.subplots(len(MODELS), len(CACHES), figsize=(12, 8.5), dpi=110, squeeze=False)
    for i, m in enumerate(MODELS):
        for j, c in enumerate(CACHES):
            ax = axes[i][j]
            for k, kv in enumerate(KVS):
                pts = [(cells[(m, w, c, kv)], w) for w, _ in WEIGHTS if (m, w, c, kv) in cells]
                if not pts:
                    continue
                xs = [p["total"] / 1e6 for p, _ in pts]
                ys = [100 * p["acc"] for p, _ in pts]
                ax.plot(xs, ys, "-", color=cmap(k), alpha=0.35, lw=1)
                for (p, w), x, y in zip(pts, xs, ys):
                    ax.scatter([x], [y], color=cmap(k), marker=markers[w], s=46, zorder=3)
            ax.set_title("%s, %s cache" % (m, c))
            if not any((m, w, c, kv) in cells for w, _ in WEIGHTS for kv in KVS):
                ax.text(0.5, 0.5, "no finished cells", ha="center", va="center", transform=ax.transAxes)
            ax.set_xlabel("total MB held (weights + mean KV cache)")
            ax.set_ylabel("exact match, %")
            ax.grid(alpha=0.3)
    handles, labels = [], []
    for k, kv in enumerate(KVS):  # one colour per KV store, the same in every panel
        if any(key[3] == kv for key in cells):
            handles.append(plt.Line2D([], [], color=cmap(k), marker="o", ls="-", label=kv))
            labels.append(kv)
    for w, mk in markers.items():
        handles.append(plt.Line2D([], [], color="gray", marker=mk, ls="", label="%s weights" % w))
        labels.append("%s weights" % w)
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=9, frameon=False)
    fig.suptitle("Weights x KV cache on the embedded models: accuracy against bytes held (%s problems per cell)"
                 % "/".join(map(str, n)))
    fig.tight_layout(rect=(0, 0.08, 1, 0.96))
    os.makedirs(os.path.dirname(a.png) or ".", exist_ok=True)
    tmp = a.png + ".tmp.png"
    fig.savefig(tmp)
    os.replace(tmp, a.png)
    print("wrote %s" % a.png, file=sys.stderr)


if __name__ == "__main__":
    main()
