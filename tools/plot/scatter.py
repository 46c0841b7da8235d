#!/usr/bin/python3
"""Scatter plot of labelled points (a grid's headline metric against effective KV bits).

    scatter.py SPEC.json OUT.png

SPEC: {"title": str, "xlabel": str, "ylabel": str,
       "points": [{"x": float, "y": float, "label": str, "series": str, "marker": str,
                   "hollow": bool}, ...]}
Points of one series share a colour and are joined in x order; "marker" groups a second axis
(e.g. the cache mode). Used by `dllmq grid` for OUT/grid.png.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]


def main():
    spec = json.load(open(sys.argv[1]))
    pts = spec["points"]
    series = list(dict.fromkeys(p.get("series", p["label"]) for p in pts))
    markers = list(dict.fromkeys(p.get("marker", "") for p in pts))
    cmap = plt.get_cmap("tab10" if len(series) <= 10 else "tab20")
    fig, ax = plt.subplots(figsize=(9.5, 5.8), dpi=110)
    for si, s in enumerate(series):
        col = cmap(si % cmap.N)
        for mi, m in enumerate(markers):
            sel = sorted((p for p in pts if p.get("series", p["label"]) == s and p.get("marker", "") == m),
                         key=lambda p: p["x"])
            if not sel:
                continue
            xs = [p["x"] for p in sel]
            ys = [p["y"] for p in sel]
            if len(sel) > 1:
                ax.plot(xs, ys, color=col, linewidth=1.0, alpha=0.6)
            for p in sel:
                ax.scatter([p["x"]], [p["y"]], marker=MARKERS[mi % len(MARKERS)], s=48,
                           facecolors="none" if p.get("hollow") else col, edgecolors=col,
                           linewidths=1.4, zorder=3)
        ax.scatter([], [], marker="o", color=col, label=s)
    if len(markers) > 1:
        for mi, m in enumerate(markers):
            ax.scatter([], [], marker=MARKERS[mi % len(MARKERS)], facecolors="none",
                       edgecolors="black", label=m)
    ax.set_title(spec.get("title", ""), fontsize=12)
    ax.set_xlabel(spec.get("xlabel", ""), fontsize=11)
    ax.set_ylabel(spec.get("ylabel", ""), fontsize=11)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=9, frameon=False)
    fig.tight_layout()
    fig.savefig(sys.argv[2])


if __name__ == "__main__":
    main()
