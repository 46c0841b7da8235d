#!/usr/bin/python3
"""Accuracy-vs-effective-bits frontier of each KV method in one setting (model x cache mode),
with 95% bootstrap interval bars.

    frontier.py SPEC.json OUT.png

SPEC: {"title": str, "xlabel": str, "ylabel": str, "budgets": [float, ...],
       "series": [{"name": str, "points": [{"name": str, "x": float, "y": float, "lo": float,
                                            "hi": float, "frontier": bool}, ...]}, ...]}
Every cell is drawn; a method's frontier cells (upper-left Pareto front) are filled, joined by
a line and carry interval bars; its dominated cells are hollow. Dotted verticals mark the
matched budgets of the table. Used by `dllmq grid` for OUT/frontier-<setting>.png.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]


def main():
    spec = json.load(open(sys.argv[1]))
    series = spec["series"]
    cmap = plt.get_cmap("tab10" if len(series) <= 10 else "tab20")
    fig, ax = plt.subplots(figsize=(9.5, 5.8), dpi=110)
    for b in spec.get("budgets", []):
        ax.axvline(b, color="grey", linestyle=":", linewidth=1.0, alpha=0.7)
    for si, s in enumerate(series):
        col = cmap(si % cmap.N)
        mk = MARKERS[si % len(MARKERS)]
        pts = sorted(s["points"], key=lambda p: p["x"])
        front = [p for p in pts if p.get("frontier")]
        rest = [p for p in pts if not p.get("frontier")]
        if rest:
            ax.scatter([p["x"] for p in rest], [p["y"] for p in rest], marker=mk, s=30,
                       facecolors="none", edgecolors=col, linewidths=1.0, alpha=0.7, zorder=2)
        if front:
            xs = [p["x"] for p in front]
            ys = [p["y"] for p in front]
            err = [[p["y"] - p["lo"] for p in front], [p["hi"] - p["y"] for p in front]]
            ax.errorbar(xs, ys, yerr=err, color=col, marker=mk, markersize=6, linewidth=1.6,
                        capsize=3, elinewidth=1.0, label=s["name"], zorder=3)
    ax.set_title(spec.get("title", ""), fontsize=12)
    ax.set_xlabel(spec.get("xlabel", ""), fontsize=11)
    ax.set_ylabel(spec.get("ylabel", ""), fontsize=11)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=9, frameon=False,
              title="frontier (filled)\ndominated: hollow", title_fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2])


if __name__ == "__main__":
    main()
