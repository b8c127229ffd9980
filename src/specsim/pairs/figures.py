"""The pair stage's figures that both backends draw, and the axis and timing helpers of both
backends' own figures (PDF + PNG, the house style of :mod:`specsim.figures`).

A figure is declared in :mod:`specsim.outputs.realtext` or :mod:`specsim.outputs.llm_pairs`
(name, caption, the step drawing it, the tables it reads); its builder takes ``read``, which
gives a declared table by name (:func:`specsim.figures.draw_stage_figures`). The
``pair_accept`` table has one schema on every backend (:mod:`specsim.pairs.accept`), so it is
drawn by one function, :func:`draw_pair_accept`: the two builders only name the table and
the unit of a token.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

Read = Callable[[str], "pd.DataFrame"]  # a declared table by name

#: Markers of the engines that measured a pair (in the order the table first names them).
ENGINE_MARKERS = "osD^v"


def plain(v: float, _pos: Any = None) -> str:
    """A tick label without mathtext: ``0.5``, ``2``."""
    return f"{v:g}"


def plain_minor(v: float, _pos: Any = None) -> str:
    """Label the 2s and 5s of a log axis' minor ticks only."""
    return f"{v:g}" if f"{v:g}".lstrip("0.")[:1] in ("2", "5") else ""


def log2_gamma_axis(ax: Any, gammas: Iterable[float]) -> None:
    """log2 x axis with the γ values as plain tick labels (no mathtext: faster PDFs)."""
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sorted(set(gammas))))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("draft length γ")


def timed(ax: Any, x: Any, g: pd.DataFrame, column: str, marker: str, colour: str,
          label: str | None = None, line: str = "-") -> None:
    """A timed quantity (:func:`specsim.timing.columns`): its median (joined by ``line``), its
    quartiles as error bars, and the medians whose repeats disagree (``reliable`` false) as
    hollow markers."""
    import numpy as np

    x = np.asarray(x, dtype=float)
    y = g[column].to_numpy(dtype=float)
    err = [y - g[f"{column}_q25"].to_numpy(dtype=float),
           g[f"{column}_q75"].to_numpy(dtype=float) - y]
    ax.errorbar(x, y, yerr=err, fmt=line or "none", color=colour, lw=1.0, elinewidth=0.8,
                capsize=2)
    bad = ~g["reliable"].astype(bool).to_numpy()
    ax.plot(x[~bad], y[~bad], marker, color=colour, ms=5, ls="none")
    if label is not None:
        ax.plot([], [], marker + line, color=colour, ms=5, lw=1.0, label=label)
    ax.plot(x[bad], y[bad], marker, mfc="white", mec=colour, ms=5, ls="none")


def draw_speedup(ax: Any, x: Any, g: pd.DataFrame, marker: str, colour: str,
                 label: str | None = None, line: str = "-") -> None:
    """A measured speedup (:func:`timed`) beside Thm 3.8's (dashed) and the cost model's
    (dotted, :mod:`specsim.pairs.speedup`): columns ``speedup_measured`` (with quartiles and
    ``reliable``), ``speedup_thm38``, ``speedup_cost_model``."""
    timed(ax, x, g, "speedup_measured", marker, colour, label, line)
    ax.plot(x, g["speedup_thm38"], "--", color=colour, lw=0.8)
    ax.plot(x, g["speedup_cost_model"], ":", color=colour, lw=1.0)


def figure_pair_accept(read: Read) -> Any:
    """The n-gram pairs' ``pair_accept`` table (characters per target call)."""
    return draw_pair_accept(read("pair_accept"), "characters")


def figure_llm_pair_accept(read: Read) -> Any:
    """The LLM tier's pairs' ``llm_pair_accept`` table (tokens per target call)."""
    return draw_pair_accept(read("llm_pair_accept"), "tokens")


def draw_pair_accept(df: pd.DataFrame, unit: str) -> Any:
    """Left: ``unit`` per target call against γ, per pair (one colour each, its mean α in the
    legend): the trace's positional prediction (line, band: 95% CI), Eq. 1 at the mean α
    (dotted) and each engine's measurement (points, one marker an engine, 95% CI). Right:
    their paired relative difference (95% CI over prompts), which ``covered`` tests. Engines
    and pairs side by side on the log axis."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    from specsim.figures.style import WIDE

    fig, (ax, diff) = plt.subplots(1, 2, figsize=(WIDE, 3.0), layout="constrained")
    pairs = list(dict.fromkeys(df["pair"]))
    engines = list(dict.fromkeys(df["engine"]))
    series = list(dict.fromkeys(zip(df["pair"], df["engine"], strict=True)))
    marker = {e: ENGINE_MARKERS[j % len(ENGINE_MARKERS)] for j, e in enumerate(engines)}
    for i, pair in enumerate(pairs):
        colour = f"C{i}"
        g = df[df["pair"] == pair]
        pred = g.drop_duplicates("gamma").sort_values("gamma")
        ax.fill_between(pred["gamma"], pred["tokens_predicted_ci_low"],
                        pred["tokens_predicted_ci_high"], color=colour, alpha=0.25, lw=0)
        ax.plot(pred["gamma"], pred["tokens_predicted"], color=colour, lw=1.0)
        ax.plot(pred["gamma"], pred["tokens_eq1_mean_alpha"], ":", color=colour, lw=0.8)
        for (_, e), m in g.groupby(["pair", "engine"], sort=False):
            m = m.sort_values("gamma")
            j, k = engines.index(e), series.index((pair, e))
            mid = m["tokens_measured"]
            ax.errorbar(m["gamma"] * _dodge(j, len(engines)), mid,
                        yerr=[mid - m["tokens_measured_ci_low"],
                              m["tokens_measured_ci_high"] - mid],
                        fmt=marker[e], ms=3, color=colour)
            rel = m["relative_difference"] * 100
            scale = 100 / m["tokens_measured"]
            diff.errorbar(m["gamma"] * _dodge(k, len(series)), rel,
                          yerr=[rel - m["difference_ci_low"] * scale,
                                m["difference_ci_high"] * scale - rel],
                          fmt=marker[e] + "-", ms=3, lw=0.8, color=colour)
    log2_gamma_axis(ax, df["gamma"])
    ax.set_ylabel(f"{unit} per target call")
    ax.set_title("predicted (line, band: 95% CI) and measured (points)")
    alpha = df.groupby("pair", sort=False)["alpha_mean"].first()
    handles = [Line2D([], [], color=f"C{i}", lw=1.0) for i in range(len(pairs))]
    labels = [f"{p} (mean α {alpha[p]:.2f})" for p in pairs]
    handles += [Line2D([], [], color="0.3", marker=marker[e], ms=3, ls="none")
                for e in engines]
    labels += [f"measured, {e}" for e in engines]
    handles.append(Line2D([], [], color="0.3", ls=":", lw=0.8))
    labels.append("Eq. 1 at mean α")
    # below the panels: inside, it would cover points of one tier or the other
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 4),
               frameon=False)
    diff.axhline(0, color="0.4", lw=0.6)
    log2_gamma_axis(diff, df["gamma"])
    diff.set_ylabel("(predicted − measured) / measured, %")
    diff.set_title("paired difference (95% CI over prompts)")
    return fig


def _dodge(i: int, n: int) -> float:
    """The factor placing series i of n side by side around a γ on a log axis."""
    return 1.0 + 0.04 * (i - (n - 1) / 2)
