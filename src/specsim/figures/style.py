"""The house style of every figure and the helpers figures share: one matplotlib style, sizes
that fit a paper column, the colour-blind-safe palette, legend labels of the rules, reading a
table, error bars, and saving a vector PDF plus its PNG twin.

Used by the figures here (:mod:`specsim.figures`), the ``schemes`` analysis'
(:mod:`specsim.figures.schemes`) and the real-text and LLM stages'.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from cycler import cycler

from specsim.io import atomic_path, read_table
from specsim.verify import RULE_NAMES, RULES

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

COLUMN = 3.4  # inches: one column of a two-column paper
# No text in any figure is smaller than this at the size it is saved (figures are saved at
# their figsize, no cropping or scaling), so a printed column stays readable.
MIN_FONTSIZE = 7.0
WIDE = 7.0  # inches: both columns, for multi-panel figures
# Okabe & Ito's colour-blind-safe palette (yellow left out: unreadable on white).
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"]
STYLE: dict[RcKeyType, Any] = {
    "figure.figsize": (COLUMN, 2.6),
    "figure.dpi": 150,
    "savefig.dpi": 200,
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "legend.fontsize": MIN_FONTSIZE,
    "legend.title_fontsize": MIN_FONTSIZE,
    "legend.framealpha": 0.85,
    "legend.edgecolor": "0.8",
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.5,
    "lines.linewidth": 1.2,
    "lines.markersize": 3.5,
    "errorbar.capsize": 1.5,
    "axes.prop_cycle": cycler(color=PALETTE),
    "axes.spines.top": False,
    "axes.spines.right": False,
    "pdf.fonttype": 42,
    "svg.hashsalt": "specsim",
}
RULE_ORDER: tuple[str, ...] = RULE_NAMES  # the registry's order


def rule_label(rule: str) -> str:
    """Legend label: the rule's name as config.yaml and the CSVs spell it, then what it does
    (:attr:`specsim.verify.RuleSpec.legend`)."""
    spec = RULES.get(rule)  # type: ignore[call-overload]
    return spec.legend if spec is not None else rule


MARKERS = "osD^vP"


def nothing_to_draw(what: str, height: float = 3.0) -> plt.Figure:
    """The honest empty state of a figure whose selection of its tables is empty (a valid
    config can ask for none of what it draws, e.g. a schemes study without a lossy rule): one
    panel saying what is missing, instead of an error."""
    fig, ax = plt.subplots(figsize=(WIDE, height), layout="constrained")
    ax.text(0.5, 0.5, what, ha="center", va="center", wrap=True, transform=ax.transAxes)
    ax.set_axis_off()
    return fig


def save(fig: plt.Figure, pdf_path: str) -> None:
    """Write the PDF and its PNG twin atomically (metadata fixed so reruns are identical)."""
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    with atomic_path(pdf_path) as tmp:
        fig.savefig(tmp, format="pdf", metadata={"CreationDate": None, "ModDate": None})
    with atomic_path(Path(pdf_path).with_suffix(".png")) as tmp:
        fig.savefig(tmp, format="png", metadata={"Software": None})
    plt.close(fig)


def load_table(tables_dir: str, name: str) -> pd.DataFrame:
    return read_table(Path(tables_dir) / f"{name}.csv")


def load_optional_table(tables_dir: str, name: str) -> pd.DataFrame | None:
    path = Path(tables_dir) / f"{name}.csv"
    return read_table(path) if path.exists() else None


def yerr(df: pd.DataFrame, mid: str, lo: str, hi: str, shift: float | pd.Series = 0.0):
    """Asymmetric error bars [mid - lo, hi - mid] (clipped at 0 against rounding)."""
    m = df[mid] - shift
    return np.clip(np.vstack([m - (df[lo] - shift), (df[hi] - shift) - m]), 0.0, None)


def colors(keys: Iterable) -> dict:
    return {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(keys)}


def unique(values: Iterable) -> list:
    return list(dict.fromkeys(values))


def matches(df: pd.DataFrame, **values: object) -> pd.Series:
    """Rows equal to every value, an empty cell (NaN) matching a missing value (None/NaN)."""
    mask = pd.Series(True, index=df.index)
    for col, v in values.items():
        mask &= df[col].isna() if pd.isna(v) else (df[col] == v)  # type: ignore[arg-type]
    return mask


def model_label(df: pd.DataFrame, model: str, alpha: float | None = None) -> str:
    if alpha is not None and not pd.isna(alpha):
        return f"{model}, α = {alpha:g}"
    a = df.loc[df["model"] == model, "alpha_exact"] if "alpha_exact" in df else pd.Series()
    return f"{model} (ᾱ={a.mean():.2f})" if len(a) and a.notna().any() else model
