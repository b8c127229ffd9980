"""The schedule's figure: best draft length and its speedup against batch size.

Left: the best K' at each batch size (0: speculation off), picks extrapolated beyond the
engine's K hollow. Right, for one source: the speedup of every K' against batch size (dashed
where extrapolated), the best's 95% interval as error bars; for several sources (a ``pair``
column): each one's best speedup with its interval. The line 1 (plain decoding) dotted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from specsim.figures.style import MARKERS, PALETTE, STYLE, WIDE, plt, save

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["draw_schedule", "figure_schedule"]


def _best_k(ax: Axes, best: pd.DataFrame, color: str, label: str) -> None:
    batches = best["batch"].to_numpy()
    gamma = best["gamma"].to_numpy()
    ident = ~best["extrapolated"].to_numpy(dtype=bool)
    ax.step(batches, gamma, where="mid", color=color, lw=0.9)
    ax.plot(batches[ident], gamma[ident], "o", ms=3.5, color=color, label=label)
    if (~ident).any():
        ax.plot(batches[~ident], gamma[~ident], "o", ms=3.5, mfc="white", color=color)


def _with_ci(ax: Axes, best: pd.DataFrame, color: str, marker: str, label: str) -> None:
    err = np.vstack([best["speedup"] - best["speedup_ci_low"],
                     best["speedup_ci_high"] - best["speedup"]])
    ax.errorbar(best["batch"], best["speedup"], yerr=err, fmt=marker + "-", ms=3.5, lw=0.8,
                color=color, capsize=2, label=label, zorder=5)


def figure_schedule(table: pd.DataFrame, pdf_path: str, title: str = "") -> None:
    """Draw ``table`` (:data:`specsim.acceptance.schedule.COLUMNS`, optionally a ``pair``
    column) to ``pdf_path`` and its PNG twin."""
    with plt.rc_context(STYLE):
        save(draw_schedule(table, title), pdf_path)


def draw_schedule(table: pd.DataFrame, title: str = "") -> Figure:
    """The schedule's figure of ``table`` (draw it under :data:`STYLE`)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(WIDE, 2.8))
    sources = sorted(table["pair"].unique()) if "pair" in table else [None]
    for i, src in enumerate(sources):
        rows = table if src is None else table[table["pair"] == src]
        best = rows[rows["best"]].sort_values("batch")
        color = PALETTE[i % len(PALETTE)]
        _best_k(left, best, color, "best K'" if src is None else str(src))
        if len(sources) > 1:
            _with_ci(right, best, color, MARKERS[i % len(MARKERS)], "_nolegend_")
    if len(sources) == 1:
        for i, g in enumerate(sorted(int(g) for g in table["gamma"].unique() if g > 0)):
            rows = table[table["gamma"] == g].sort_values("batch")
            extra = bool(rows["extrapolated"].any())
            right.plot(rows["batch"], rows["speedup"], "--" if extra else "-", lw=0.8,
                       color=PALETTE[(i + 1) % len(PALETTE)],
                       label=f"K' = {g}" + (" (extrapolated)" if extra else ""))
        _with_ci(right, table[table["best"]].sort_values("batch"), "black", "o",
                 "best K' (95% CI)")
    left.plot([], [], "o", ms=3.5, mfc="white", color="grey", label="extrapolated (K' > K)")
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch size b (sequences)")
    left.set_ylabel("best draft length K'")
    top = max(1, int(table["gamma"].max()))
    left.set_ylim(-0.3, top + 0.3 + 0.6 * (len(sources) + 1))  # room for the legend
    left.set_yticks(range(top + 1))
    left.legend(loc="upper right", ncol=2)
    right.axhline(1.0, color="grey", ls=":", lw=0.8)
    right.set_ylabel("speedup of the best K' (95% CI)" if len(sources) > 1
                     else "speedup over plain decoding")
    if len(sources) == 1:
        right.legend(ncol=2, loc="upper right")
    if title:
        fig.suptitle(title)
    return fig
