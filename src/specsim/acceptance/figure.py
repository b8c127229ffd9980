"""The schedule's figure: best draft length and its speedup against batch size.

Left: the best K' at each batch size (0: speculation off), extrapolated picks hollow. Right: the
speedup of every K' against batch size, the best's 95% interval as error bars, the line 1
(plain decoding) dashed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specsim.figures.style import PALETTE, WIDE, plt, save

__all__ = ["figure_schedule"]


def figure_schedule(table: pd.DataFrame, pdf_path: str, title: str = "") -> None:
    """Draw ``table`` (:data:`specsim.acceptance.schedule.COLUMNS`) to ``pdf_path`` (+ PNG)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(WIDE, 2.8))
    best = table[table["best"]].sort_values("batch")
    batches = best["batch"].to_numpy()
    ident = ~best["extrapolated"].to_numpy(dtype=bool)
    left.step(batches, best["gamma"], where="mid", color=PALETTE[0], lw=1)
    left.plot(batches[ident], best["gamma"].to_numpy()[ident], "o", color=PALETTE[0],
              label="identified by the counters")
    if (~ident).any():
        left.plot(batches[~ident], best["gamma"].to_numpy()[~ident], "o", mfc="white",
                  color=PALETTE[0], label="extrapolated (K' > engine's K)")
    left.set_xscale("log", base=2)
    left.set_xlabel("batch size b (sequences)")
    left.set_ylabel("best draft length K'")
    left.set_ylim(-0.3, max(1, int(table["gamma"].max())) + 0.3)
    left.legend(loc="upper right")
    gammas = sorted(int(g) for g in table["gamma"].unique() if g > 0)
    for i, g in enumerate(gammas):
        rows = table[table["gamma"] == g].sort_values("batch")
        extra = bool(rows["extrapolated"].any())
        right.plot(rows["batch"], rows["speedup"], ("--" if extra else "-"), lw=0.9,
                   color=PALETTE[i % len(PALETTE)], label=f"K' = {g}" + (" (extrap.)" if extra
                                                                          else ""))
    err = np.vstack([best["speedup"] - best["speedup_ci_low"],
                     best["speedup_ci_high"] - best["speedup"]])
    right.errorbar(best["batch"], best["speedup"], yerr=err, fmt="o", ms=3.5, color="black",
                   capsize=2, lw=0.8, label="best K' (95% CI)", zorder=5)
    right.axhline(1.0, color="grey", ls=":", lw=0.8)
    right.set_xscale("log", base=2)
    right.set_xlabel("batch size b (sequences)")
    right.set_ylabel("speedup over plain decoding")
    right.legend(ncol=2, loc="best")
    if title:
        fig.suptitle(title)
    save(fig, pdf_path)
