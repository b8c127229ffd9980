"""Why verifying γ + 1 tokens costs about as much as decoding one: ``roofline`` (arithmetic
intensity of one forward pass against the devices' ridge points).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D

from specsim.figures.style import (
    COLUMN,
    colors,
    load_table,
    unique,
)
from specsim.grid import Grid

# ---------------------------------------------------------------------------------------------
# 9. roofline: why verifying γ + 1 tokens costs about as much as decoding one
# ---------------------------------------------------------------------------------------------
# Per model shape, in drawing order: each later line is narrower and its marker smaller and of
# another shape, so where the lines coincide (they nearly do: a pass uses each weight once per
# token and reads it once, whatever the model's size) each stays visible as a band edge and a
# marker of its own. No offsets: every line is drawn at its own data.
ROOFLINE_SHAPE_STYLE = (("o", 6.5, 2.8), ("s", 4.3, 1.7), ("^", 2.4, 0.8))


def roofline_spread(it: pd.DataFrame, formula: str = "full") -> float:
    """Largest relative spread, max/min - 1, of MACs per byte across shapes at one token count."""
    g = it[it["formula"] == formula].groupby("tokens_in_pass")["macs_per_byte"]
    return float((g.max() / g.min() - 1.0).max())


def roofline(grid: Grid, tables_dir: str) -> plt.Figure:
    """MACs per byte vs tokens in one pass (full and seed formula) against device ridges."""
    it = load_table(tables_dir, "intensity")
    rl = load_table(tables_dir, "roofline")
    shapes = unique(it["shape"])
    col = colors(shapes)
    sty = {s: ROOFLINE_SHAPE_STYLE[i % len(ROOFLINE_SHAPE_STYLE)] for i, s in enumerate(shapes)}
    fig, ax = plt.subplots(figsize=(COLUMN, 4.3), layout="constrained")
    for i, s in enumerate(shapes):
        mk, ms, lw = sty[s]
        for formula in ("full", "seed"):
            g = it[(it["shape"] == s) & (it["formula"] == formula)].sort_values("tokens_in_pass")
            if g.empty:
                continue
            if formula == "full":
                ax.plot(g["tokens_in_pass"], g["macs_per_byte"], ls="-", marker=mk, ms=ms,
                        mfc="white" if i < len(shapes) - 1 else col[s], mec=col[s], mew=0.8,
                        color=col[s], lw=lw, zorder=2 + i, label=f"{s} (full count)")
            else:
                ax.plot(g["tokens_in_pass"], g["macs_per_byte"], ls="--", color=col[s],
                        lw=0.75 * lw, zorder=2 + i, label=f"{s} (seed formula)")
    xmax = it["tokens_in_pass"].max()
    devices = rl.drop_duplicates("device").sort_values("ridge_macs_per_byte", ascending=False)
    dev_style = [("0.2", ":"), ("0.45", "-."), ("0.6", (0, (4, 1.5)))]
    dev_handles: list[Line2D] = []
    for _, d in devices.iterrows():
        ridge = d["ridge_macs_per_byte"]
        sub = rl[rl["device"] == d["device"]]
        kmin, kmax = int(sub["max_tokens_memory_bound"].min()), int(
            sub["max_tokens_memory_bound"].max())
        ax.axhline(ridge, color=dev_style[len(dev_handles) % 3][0],
                   ls=dev_style[len(dev_handles) % 3][1], lw=0.8, zorder=0)
        ax.plot(sub["max_tokens_memory_bound"], [ridge] * len(sub), ls="", marker="|", ms=6,
                color="0.2", mew=1.0, zorder=6)
        span = f"{kmin}" if kmin == kmax else f"{kmin}–{kmax}"
        dev_handles.append(Line2D([], [], color=dev_style[len(dev_handles) % 3][0],
                                  ls=dev_style[len(dev_handles) % 3][1], lw=0.8,
                                  label=f"{d['device']}: {ridge:.0f} → ≤ {span} tokens"))
    ax.axhspan(it["macs_per_byte"].min() / 2, devices["ridge_macs_per_byte"].min(),
               color="0.95", lw=0, zorder=-1)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ticks = sorted(it["tokens_in_pass"].unique())
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(int(t)) for t in ticks])
    ax.minorticks_off()
    ax.set_xlim(0.8, xmax * 1.25)
    ax.set_ylim(it["macs_per_byte"].min() / 1.6, it["macs_per_byte"].max() * 6)
    n_ctx = int(it["n_ctx"].iloc[0])
    ax.set_xlabel(f"tokens in one pass (after {n_ctx} cached tokens)")
    ax.set_ylabel("arithmetic intensity (MACs per byte)")
    ax.set_title("One pass verifies γ + 1 tokens for the bytes of one")
    ax.legend(handles=dev_handles, loc="upper left",
              title="device ridge (MACs/byte) → memory-bound")
    handles = [Line2D([], [], color=col[s], lw=sty[s][2], marker=sty[s][0], ms=sty[s][1],
                      mfc="white" if i < len(shapes) - 1 else col[s], mec=col[s], mew=0.8,
                      label=s) for i, s in enumerate(shapes)]
    handles += [
        Line2D([], [], color="0.3", lw=0.9, label="full count (GQA, SwiGLU, lm_head, KV)"),
        Line2D([], [], color="0.3", lw=0.8, ls="--", label="seed program's formula"),
        Line2D([], [], color="0.2", marker="|", ls="", ms=6, mew=1.0,
               label="last memory-bound token count"),
    ]
    spread = roofline_spread(it)
    fig.legend(handles=handles, loc="outside lower center", ncol=2, frameon=False,
               title=f"The sizes' full-count lines overlap (≤ {spread:.0%} apart): a pass\n"
                     "reads each weight once and uses it once per token,\n"
                     "so MACs per byte hardly depend on the model's size",
               handletextpad=0.4, columnspacing=0.8)
    return fig
