"""Paper-style figures from the tables: one shared style, vector PDF plus PNG, one column wide."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from specsim import exact  # noqa: E402
from specsim.grid import Grid  # noqa: E402
from specsim.io import atomic_path  # noqa: E402

COLUMN = 3.4  # inches: one column of a two-column paper
STYLE = {
    "figure.figsize": (COLUMN, 2.6),
    "figure.dpi": 150,
    "savefig.dpi": 200,
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "legend.fontsize": 6.5,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "lines.linewidth": 1.2,
    "lines.markersize": 3.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "pdf.fonttype": 42,
    "svg.hashsalt": "specsim",
}


def _save(fig: plt.Figure, pdf_path: str) -> None:
    """Write the PDF and its PNG twin atomically (metadata fixed so reruns are identical)."""
    fig.tight_layout()
    with atomic_path(pdf_path) as tmp:
        fig.savefig(tmp, format="pdf", metadata={"CreationDate": None, "ModDate": None})
    with atomic_path(Path(pdf_path).with_suffix(".png")) as tmp:
        fig.savefig(tmp, format="png", metadata={"Software": None})
    plt.close(fig)


def _table(tables_dir: str, name: str) -> pd.DataFrame:
    return pd.read_csv(Path(tables_dir) / f"{name}.csv")


def accept_curve(grid: Grid, tables_dir: str) -> plt.Figure:
    """E[tokens per round] vs γ: closed form (lines), exact (open), simulated with 95% CI."""
    df = _table(tables_dir, "accept_curve")
    fig, ax = plt.subplots()
    cal = df[df["alpha"].notna() & (df["model"] == df[df["alpha"].notna()]["model"].iloc[0])]
    gammas = np.arange(1, int(df["gamma"].max()) + 1)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (alpha, g) in enumerate(cal.groupby("alpha")):
        col = colors[i % len(colors)]
        ax.plot(gammas, exact.expected_tokens(alpha, gammas), "-", color=col, lw=0.9,
                label=f"α = {alpha:g}")
        ax.errorbar(g["gamma"], g["tokens_per_round"],
                    yerr=[g["tokens_per_round"] - g["tokens_ci_low"],
                          g["tokens_ci_high"] - g["tokens_per_round"]],
                    fmt="o", color=col, ms=3, capsize=1.5)
    for j, (model, g) in enumerate(df[df["alpha"].isna()].groupby("model")):
        ax.errorbar(g["gamma"], g["tokens_per_round"],
                    yerr=[g["tokens_per_round"] - g["tokens_ci_low"],
                          g["tokens_ci_high"] - g["tokens_per_round"]],
                    fmt="s--", color="0.35", ms=2.5, lw=0.7, capsize=1.5,
                    mfc=["0.35", "white", "0.7"][j % 3], label=f"{model} (simulated)")
    ax.set_xlabel("draft length γ")
    ax.set_ylabel("tokens per target call")
    ax.set_title("Eq. 1 (lines) vs simulation (markers, 95% CI)")
    ax.legend(ncol=2, loc="upper left")
    return fig


FIGURES: dict[str, Callable[[Grid, str], plt.Figure]] = {
    "accept_curve": accept_curve,
}
NEEDS: dict[str, str] = {"accept_curve": "accept_curve"}


def available_figures(grid: Grid) -> list[str]:
    analyses = {s["analysis"] for s in grid.studies.values()}
    return [name for name in FIGURES if NEEDS.get(name, name) in analyses]


def make_figure(grid: Grid, tables_dir: str, name: str, out: str) -> None:
    if name not in FIGURES:
        raise ValueError(f"unknown figure {name!r}; known: {sorted(FIGURES)}")
    with plt.rc_context(STYLE):
        fig = FIGURES[name](grid, tables_dir)
        _save(fig, out)
