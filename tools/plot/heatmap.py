#!/usr/bin/python3
"""Heat map of a [rows, cols] value grid with marked cells, drawn with matplotlib.

    heatmap.py SPEC.json OUT.png

SPEC: {"title": str, "xlabel": str, "ylabel": str, "colorbar": str, "values": [[...], ...],
       "row_labels": [str, ...] (optional), "marks": [[row, col], ...] (optional),
       "mark_label": str (legend text for the marks), "log": bool (log colour scale),
       "col_groups": int (optional: draw a separator every N columns, e.g. per KV head)}
Used by `dllmq calib-report` (channel scores per layer, chosen fp16 channels marked).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import LogNorm  # noqa: E402


def main():
    spec = json.load(open(sys.argv[1]))
    v = np.asarray(spec["values"], dtype=float)
    rows, cols = v.shape
    fig_w = min(16.0, max(7.0, cols / 16.0))
    fig_h = min(12.0, max(3.0, 0.45 * rows + 1.8))
    fig, ax = plt.subplots(figsize=(fig_w, fig_h), dpi=110)
    norm = None
    if spec.get("log"):
        pos = v[v > 0]
        lo = pos.min() if pos.size else 1e-12
        norm = LogNorm(vmin=max(lo, v.max() * 1e-6 if v.max() > 0 else 1e-12), vmax=max(v.max(), lo * 10))
        v = np.where(v > 0, v, norm.vmin)
    im = ax.imshow(v, aspect="auto", interpolation="nearest", cmap="viridis", norm=norm)
    cb = fig.colorbar(im, ax=ax, pad=0.01)
    cb.set_label(spec.get("colorbar", ""), fontsize=10)
    marks = spec.get("marks") or []
    if marks:
        m = np.asarray(marks)
        ax.scatter(m[:, 1], m[:, 0], marker="s", s=14, facecolors="none", edgecolors="red",
                   linewidths=0.9, label=spec.get("mark_label", "marked"))
        ax.legend(loc="upper right", fontsize=9, framealpha=0.85)
    g = spec.get("col_groups")
    if g and g < cols:
        for x in range(g, cols, g):
            ax.axvline(x - 0.5, color="white", linewidth=0.6, alpha=0.7)
    ax.set_title(spec.get("title", ""), fontsize=12)
    ax.set_xlabel(spec.get("xlabel", ""), fontsize=11)
    ax.set_ylabel(spec.get("ylabel", ""), fontsize=11)
    labels = spec.get("row_labels")
    ax.set_yticks(range(rows))
    ax.set_yticklabels(labels if labels else [str(r) for r in range(rows)], fontsize=9)
    fig.tight_layout()
    fig.savefig(sys.argv[2])


if __name__ == "__main__":
    main()
