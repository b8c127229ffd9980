"""Is speculative sampling lossless? ``equivalence``: exact and simulated TV of the first two
tokens per model and rule, against the sampling floor, with the G-test's verdict.
"""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from specsim.figures.style import (
    COLUMN,
    RULE_ORDER,
    colors,
    load_table,
    rule_label,
    unique,
)
from specsim.grid import Grid


# ---------------------------------------------------------------------------------------------
# 1. equivalence: is speculative sampling lossless?
# ---------------------------------------------------------------------------------------------
def equivalence(grid: Grid, tables_dir: str) -> plt.Figure:
    """Per model and rule: exact and simulated TV to the target, sampling floor, verdict."""
    df = load_table(tables_dir, "equivalence")
    rules = [r for r in RULE_ORDER if r in set(df["rule"])]
    rules += [r for r in unique(df["rule"]) if r not in rules]
    models = unique(df["model"])
    rcol = colors(rules)
    positive = pd.concat([df["tv_mc"], df["tv_exact"], df["tv_floor"]])
    ymin = 10 ** np.floor(np.log10(positive[positive > 1e-12].min()) - 0.6)
    fig, ax = plt.subplots(figsize=(COLUMN, 3.1), layout="constrained")
    step = len(rules) + 1
    for gi, model in enumerate(models):
        g = df[df["model"] == model]
        x0 = gi * step
        floor = g["tv_floor"].max()
        ax.fill_between([x0 - 0.5, x0 + len(rules) - 0.5], ymin, floor, color="0.85", lw=0,
                        zorder=0)
        ax.plot([x0 - 0.5, x0 + len(rules) - 0.5], [floor] * 2, color="0.55", lw=0.7, zorder=1)
        for ri, rule in enumerate(rules):
            r = g[g["rule"] == rule]
            if r.empty:
                continue
            r = r.iloc[0]
            x = x0 + ri
            tv_ex = r["tv_exact"]
            if tv_ex > ymin:
                ax.plot(x, tv_ex, marker="_", ms=11, mew=1.6, color=rcol[rule], zorder=3)
            else:
                ax.plot(x, ymin * 1.5, marker="v", ms=4, mfc="white", color=rcol[rule],
                        zorder=3)
            lossless = r["verdict"] == "lossless"
            ax.plot(x, r["tv_mc"], marker="o" if lossless else "X", ms=4.5 if lossless else 5,
                    color=rcol[rule],
                    mec="black" if lossless else rcol[rule], mew=0.6 if lossless else 0.3,
                    ls="", zorder=4)
    ax.set_yscale("log")
    ax.set_ylim(ymin, 1.0)
    ax.set_xlim(-0.7, len(models) * step - 1.3)
    ax.set_xticks([gi * step + (len(rules) - 1) / 2 for gi in range(len(models))])
    ax.set_xticklabels([m if pd.isna(a) else f"{m}\n(α = {a:g})" for m, a in
                        zip(models, df.groupby("model", sort=False)["alpha"].first(),
                            strict=True)])
    ax.grid(False, axis="x")
    ax.set_ylabel("TV distance to the target\n(first two tokens)")
    n = int(df["trials_total"].iloc[0])
    ax.set_title(f"Is it lossless? {n:,} generations per rule")
    # name on the first line, what the rule does on the second: two columns fit one column
    handles = [Line2D([], [], color=rcol[r], marker="s", ls="", ms=4,
                      label=rule_label(r).replace(" (", "\n(", 1)) for r in rules]
    kinds = [
        Line2D([], [], color="0.3", marker="_", ms=9, mew=1.6, ls="", label="exact"),
        Line2D([], [], color="0.3", marker="v", mfc="white", ms=4, ls="",
               label="exact = 0 (machine precision)"),
        Line2D([], [], color="0.3", marker="o", mec="black", mew=0.6, ms=4.5, ls="",
               label="simulated, judged lossless"),
        Line2D([], [], color="0.3", marker="X", ms=5, ls="", label="simulated, judged biased"),
        Patch(facecolor="0.85", edgecolor="0.55", lw=0.7, label="sampling floor"),
    ]
    leg = ax.legend(handles=handles, loc="upper left", ncol=2, title="rule",
                    bbox_to_anchor=(0.0, 1.0), handletextpad=0.3, columnspacing=0.8)
    ax.add_artist(leg)
    fig.legend(handles=kinds, loc="outside lower center", ncol=2, handletextpad=0.3,
               columnspacing=0.8, frameon=False)
    ax.set_ylim(ymin, 500.0)  # room above TV = 1 (its maximum) for the rule legend
    ax.set_yticks([10.0**e for e in range(int(np.log10(ymin)), 1)])
    ax.yaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    return fig
