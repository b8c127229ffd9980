"""Paper-style figures from the tables: one shared style, vector PDF plus PNG, one column wide.

Every figure is a function ``(grid, tables_dir) -> Figure`` registered in ``FIGURES``; ``NEEDS``
names the analysis whose table it reads (``None``: it needs no simulation, only exact theory or
the always-built tables), so ``available_figures`` can drop figures the config does not support.
Figures read the tables and the config only: no model is built here. Numbers of a model that
no simulated point holds (the exact curves of ``optimal_k``) come from the exact stage through
a table (``optimal_k_exact``); closed forms of :mod:`specsim.exact` (Eq. 1, Thm 3.8) are drawn
directly. Rule names and legend labels come from :data:`specsim.verify.RULES`, draft-knob axis
labels from :data:`specsim.families.KNOBS`.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from cycler import cycler
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from specsim import exact
from specsim.checks import expected_slower, slower_rows
from specsim.families import KNOBS, Knob
from specsim.grid import Grid
from specsim.io import atomic_path, read_table
from specsim.outputs import FIGURE_NEEDS, available_figures  # noqa: F401 (re-export)
from specsim.verify import RULE_NAMES, RULES

COLUMN = 3.4  # inches: one column of a two-column paper
# No text in any figure is smaller than this at the size it is saved (figures are saved at
# their figsize, no cropping or scaling), so a printed column stays readable.
MIN_FONTSIZE = 7.0
WIDE = 7.0  # inches: both columns, for multi-panel figures
# Okabe & Ito's colour-blind-safe palette (yellow left out: unreadable on white).
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"]
STYLE = {
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
README_FIGURES = ("accept_curve", "equivalence", "optimal_k_heatmap", "roofline", "jensen",
                  "schemes_frontier", "schemes_policies")


def _save(fig: plt.Figure, pdf_path: str) -> None:
    """Write the PDF and its PNG twin atomically (metadata fixed so reruns are identical)."""
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    with atomic_path(pdf_path) as tmp:
        fig.savefig(tmp, format="pdf", metadata={"CreationDate": None, "ModDate": None})
    with atomic_path(Path(pdf_path).with_suffix(".png")) as tmp:
        fig.savefig(tmp, format="png", metadata={"Software": None})
    plt.close(fig)


def _table(tables_dir: str, name: str) -> pd.DataFrame:
    return read_table(Path(tables_dir) / f"{name}.csv")


def _optional_table(tables_dir: str, name: str) -> pd.DataFrame | None:
    path = Path(tables_dir) / f"{name}.csv"
    return read_table(path) if path.exists() else None


def _yerr(df: pd.DataFrame, mid: str, lo: str, hi: str, shift: float | pd.Series = 0.0):
    """Asymmetric error bars [mid - lo, hi - mid] (clipped at 0 against rounding)."""
    m = df[mid] - shift
    return np.clip(np.vstack([m - (df[lo] - shift), (df[hi] - shift) - m]), 0.0, None)


def _colors(keys: Iterable) -> dict:
    return {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(keys)}


def _unique(values: Iterable) -> list:
    return list(dict.fromkeys(values))


def _matches(df: pd.DataFrame, **values: object) -> pd.Series:
    """Rows equal to every value, an empty cell (NaN) matching a missing value (None/NaN)."""
    mask = pd.Series(True, index=df.index)
    for col, v in values.items():
        mask &= df[col].isna() if pd.isna(v) else (df[col] == v)  # type: ignore[arg-type]
    return mask


def _model_label(df: pd.DataFrame, model: str, alpha: float | None = None) -> str:
    if alpha is not None and not pd.isna(alpha):
        return f"{model}, α = {alpha:g}"
    a = df.loc[df["model"] == model, "alpha_exact"] if "alpha_exact" in df else pd.Series()
    return f"{model} (ᾱ={a.mean():.2f})" if len(a) and a.notna().any() else model


# ---------------------------------------------------------------------------------------------
# 1. equivalence: is speculative sampling lossless?
# ---------------------------------------------------------------------------------------------
def equivalence(grid: Grid, tables_dir: str) -> plt.Figure:
    """Per model and rule: exact and simulated TV to the target, sampling floor, verdict."""
    df = _table(tables_dir, "equivalence")
    rules = [r for r in RULE_ORDER if r in set(df["rule"])]
    rules += [r for r in _unique(df["rule"]) if r not in rules]
    models = _unique(df["model"])
    rcol = _colors(rules)
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


# ---------------------------------------------------------------------------------------------
# 2. accept_curve: Eq. 1 vs exact vs simulation
# ---------------------------------------------------------------------------------------------
def accept_curve(grid: Grid, tables_dir: str) -> plt.Figure:
    """E[tokens per round] vs γ: Eq. 1 (lines), exact (open), simulated with 95% CI (dots)."""
    df = _table(tables_dir, "accept_curve")
    fig, (ax, res) = plt.subplots(2, 1, figsize=(COLUMN, 3.7), sharex=True,
                                  gridspec_kw={"height_ratios": [2.4, 1.0]})
    cal = df[df["alpha"].notna()]
    seeds = df[df["alpha"].isna()]
    alphas = sorted(cal["alpha"].unique())
    acol = _colors(alphas)
    gmax = int(df["gamma"].max())
    dense = np.linspace(1, gmax, 200)
    for a in alphas:
        ax.plot(dense, exact.expected_tokens(a, dense), "-", color=acol[a], lw=0.9, zorder=1)
    cal_models = _unique(cal["model"])
    seed_models = _unique(seeds["model"])
    mk = {m: MARKERS[i % len(MARKERS)] for i, m in enumerate(cal_models + seed_models)}
    greys = {m: c for m, c in zip(seed_models, ["0.35", "0.6", "0.15", "0.75"], strict=False)}
    series = [(m, a, g) for (m, a), g in cal.groupby(["model", "alpha"], sort=False)]
    series += [(m, None, g) for m, g in seeds.groupby("model", sort=False)]
    n = len(series)
    for i, (model, a, g) in enumerate(series):
        col = acol[a] if a is not None else greys.get(model, "0.4")
        g = g.sort_values("gamma")
        ax.plot(g["gamma"], g["tokens_exact"], ls="", marker=mk[model], ms=5, mfc="white",
                mec=col, mew=0.8, zorder=2)
        ax.errorbar(g["gamma"], g["tokens_per_round"],
                    yerr=_yerr(g, "tokens_per_round", "tokens_ci_low", "tokens_ci_high"),
                    fmt=".", ms=2.5, color=col, elinewidth=0.6, zorder=3)
        dx = (i - (n - 1) / 2) * 0.045
        res.errorbar(g["gamma"] + dx, g["tokens_per_round"] - g["tokens_exact"],
                     yerr=_yerr(g, "tokens_per_round", "tokens_ci_low", "tokens_ci_high",
                                shift=g["tokens_exact"]),
                     fmt=mk[model], ms=2.2, color=col, elinewidth=0.6, mew=0.5)
    res.axhline(0.0, color="0.3", lw=0.7)
    ax.set_ylabel("tokens per target call")
    res.set_ylabel("simulated − exact\n(tokens)")
    res.set_xlabel("draft length γ (tokens drafted per round)")
    ax.set_xticks(range(1, gmax + 1))
    ax.set_title("Eq. 1: E[tokens] = (1 − α^(γ+1)) / (1 − α)")
    handles = [Line2D([], [], color=acol[a], lw=0.9, label=f"Eq. 1, α = {a:g}")
               for a in alphas]
    handles += [Line2D([], [], color="0.3", marker=mk[m], mfc="white", ls="", ms=4,
                       label=m) for m in cal_models]
    handles += [Line2D([], [], color=greys.get(m, "0.4"), marker=mk[m], mfc="white", ls="",
                       ms=4, label=_model_label(df, m)) for m in seed_models]
    handles += [
        Line2D([], [], color="0.3", marker="o", mfc="white", ms=5, ls="", label="exact"),
        Line2D([], [], color="0.3", marker=".", ms=3, ls="-", lw=0.6,
               label="simulated ± 95% CI"),
    ]
    ax.legend(handles=handles, loc="upper left", ncol=2, handletextpad=0.3,
              columnspacing=0.6, borderaxespad=0.3)
    top = gmax + 1
    ax.set_ylim(0.9, top + 0.3 + 0.55 * (top - 1))
    return fig


# ---------------------------------------------------------------------------------------------
# 3. jensen: where Eq. 1 at the mean acceptance holds, and where Jensen's gap opens
# ---------------------------------------------------------------------------------------------
JENSEN_LINTHRESH = 1e-6


def _jensen_series(df: pd.DataFrame) -> pd.DataFrame:
    """Seed drafts one series each; every α-calibrated row pooled into one reference series."""
    df = df.copy()
    df["series"] = np.where(df["alpha"].notna(), "α-calibrated drafts (all α)", df["model"])
    return df


def jensen(grid: Grid, tables_dir: str) -> plt.Figure:
    """Eq. 1 at ᾱ minus E[tokens] vs γ: exact (top, ± MC CI) and simulated (bottom, ± CI)."""
    df = _jensen_series(_table(tables_dir, "accept_curve"))
    seeds = _unique(df.loc[df["alpha"].isna(), "model"])
    order = [*seeds, "α-calibrated drafts (all α)"]
    col = _colors(seeds) | {"α-calibrated drafts (all α)": "0.45"}
    mk = {s: MARKERS[i % len(MARKERS)] for i, s in enumerate(order)}
    fig, (ax, sim) = plt.subplots(2, 1, figsize=(COLUMN, 3.9), sharex=True,
                                  gridspec_kw={"height_ratios": [1.5, 1.0]})
    for i, s in enumerate(order):
        g = df[df["series"] == s]
        if g.empty:
            continue
        dx = (i - (len(order) - 1) / 2) * 0.035
        if s.startswith("α-calibrated"):
            worst = g.assign(a=(g["tokens_closed_form"] - g["tokens_exact"]).abs())
            worst = worst.groupby("gamma")["a"].max()
            ax.plot(worst.index * (1 + dx), worst.to_numpy(), ls="--", marker=mk[s], ms=3,
                    color=col[s], lw=0.8, label="α-calibrated drafts: max |gap| over α")
        else:
            g = g.sort_values("gamma")
            gap = g["tokens_closed_form"] - g["tokens_exact"]
            se = g["tokens_exact_se"].fillna(0.0)
            ax.errorbar(g["gamma"] * (1 + dx), gap, yerr=1.96 * se, fmt=mk[s], ls="-",
                        color=col[s], ms=3.5, lw=0.9, elinewidth=0.8,
                        label=_model_label(df, s))
        g = g.sort_values("gamma")
        mc = g["tokens_closed_form_mc"] - g["tokens_per_round"]
        err = _yerr(g, "tokens_per_round", "tokens_ci_low", "tokens_ci_high")[::-1]
        if s.startswith("α-calibrated"):
            sim.plot(g["gamma"] * (1 + dx), 1e3 * mc, ls="", marker=".", ms=2.5, color=col[s],
                     alpha=0.7)
        else:
            sim.errorbar(g["gamma"] * (1 + dx), 1e3 * mc, yerr=1e3 * err, fmt=mk[s],
                         color=col[s], ms=3.2, elinewidth=0.7, ls="-", lw=0.6)
    ax.set_yscale("symlog", linthresh=JENSEN_LINTHRESH, linscale=0.5)
    ax.axhspan(-JENSEN_LINTHRESH, JENSEN_LINTHRESH, color="0.92", lw=0, zorder=0)
    ax.set_ylim(-JENSEN_LINTHRESH, 1.0)
    ax.set_ylabel("exact: Eq. 1(ᾱ) − E[tokens]\n(tokens per round, symlog)")
    ax.set_title("Jensen's gap: Eq. 1 at the mean acceptance ᾱ\n"
                 "overestimates when acceptance varies")
    ax.legend(loc="upper left")
    sim.axhline(0.0, color="0.3", lw=0.7)
    sim.set_ylabel("simulated: Eq. 1(α̂) − tokens\n(10⁻³ tokens, ± 95% CI)")
    sim.set_xscale("log", base=2)
    gam = sorted(df["gamma"].unique())
    sim.set_xticks(gam)
    sim.set_xticklabels([str(int(g)) for g in gam])
    sim.minorticks_off()
    sim.set_xlabel("draft length γ")
    return fig


# ---------------------------------------------------------------------------------------------
# 4. temperature: draft quality, draft-temperature mismatch, sampling temperature
# ---------------------------------------------------------------------------------------------
def _swept_knob(grid: Grid, study: str, g: pd.DataFrame) -> tuple[bool, Knob | None, str]:
    """Whether a temperature study sweeps its draft's knob (the config says: a ``draft:``
    list) or the sampling temperature, the knob (:data:`specsim.families.KNOBS`, by the
    table's ``draft`` kind) and the draft kind."""
    kind = str(g["draft"].iloc[0])
    return "draft" in grid.config["studies"].get(study, {}), KNOBS.get(kind), kind


def _temperature_axis(grid: Grid, study: str, g: pd.DataFrame) -> tuple[str, pd.Series, str]:
    """Which knob a temperature study sweeps: the draft's knob or the sampling temperature."""
    sweeps, knob, kind = _swept_knob(grid, study, g)
    if sweeps:  # the study sweeps the draft's knob; otherwise the sampling temperature
        return "knob", g["knob"], knob.axis_label if knob else f"draft {kind} knob"
    return "temperature", g["temperature"], "sampling temperature T (0 = greedy)"


def _temperature_order(grid: Grid, df: pd.DataFrame, study: str) -> tuple[int, str]:
    """Draft-knob sweeps first, in the order of :data:`specsim.families.KNOBS` (quality,
    then draft temperature, ...), then sampling-temperature studies."""
    sweeps, _knob, kind = _swept_knob(grid, study, df[df["study"] == study])
    if not sweeps:
        return (len(KNOBS) + 1, study)
    return (list(KNOBS).index(kind) if kind in KNOBS else len(KNOBS), study)


def temperature(grid: Grid, tables_dir: str) -> plt.Figure:
    """Acceptance and tokens per call (speedup on the right axis) vs each study's knob."""
    df = _table(tables_dir, "temperature")
    studies = sorted(_unique(df["study"]), key=lambda s: _temperature_order(grid, df, s))
    models = _unique(df["model"])
    mcol = _colors(models)
    fig, axes = plt.subplots(2, len(studies), figsize=(WIDE, 3.9), sharey="row", squeeze=False)
    for j, study in enumerate(studies):
        g = df[df["study"] == study].copy()
        kind, x, xlabel = _temperature_axis(grid, study, g)
        g["x"] = x.astype(float)
        top, bot = axes[0, j], axes[1, j]
        for k, ((model, alpha), h) in enumerate(g.groupby(["model", "alpha"], dropna=False,
                                                          sort=False)):
            h = h.sort_values("x")
            label = model if pd.isna(alpha) else f"{model}, α = {alpha:g}"
            c = mcol[model]
            m = MARKERS[k % len(MARKERS)]
            top.plot(h["x"], h["accept_rate"], "-" + m, color=c, ms=3.5, lw=0.9, label=label)
            if "alpha_bar" in h and h["alpha_bar"].notna().any():
                top.plot(h["x"], h["alpha_bar"], ls="", marker=m, ms=6, mfc="none", mec=c,
                         mew=0.7)
            bot.errorbar(h["x"], h["tokens_per_round"],
                         yerr=_yerr(h, "tokens_per_round", "tokens_ci_low", "tokens_ci_high"),
                         fmt="-" + m, color=c, ms=3.5, lw=0.9, label=label)
            bot.plot(h["x"], h["tokens_exact"], ls="", marker=m, ms=6, mfc="none", mec=c,
                     mew=0.7)
        gam, cs = g["gamma"].unique(), g["c"].unique()
        if len(gam) == 1 and len(cs) == 1:
            cost = 1.0 + float(gam[0]) * float(cs[0])
            bot.axhline(cost, color="0.4", lw=0.7, ls=":")
            bot.annotate("break-even (speedup 1×)", (0.98, cost), xycoords=("axes fraction",
                         "data"), xytext=(0, 2), textcoords="offset points",
                         fontsize=MIN_FONTSIZE,
                         color="0.3", ha="right")
            sec = bot.secondary_yaxis("right", functions=(lambda t, k=cost: t / k,
                                                          lambda s, k=cost: s * k))
            sec.set_ylabel(f"speedup at γ = {int(gam[0])}, c = {float(cs[0]):g} (×)")
            if j < len(studies) - 1:
                sec.set_ylabel("")
        knob = _swept_knob(grid, study, g)[1]
        if kind == "knob" and knob is not None and knob.matched_at is not None:
            top.axvline(knob.matched_at, color="0.5", lw=0.7, ls=":")
            bot.axvline(knob.matched_at, color="0.5", lw=0.7, ls=":")
            top.annotate(f"matched\n{knob.name.removeprefix('draft ')}", (knob.matched_at, 0.3),
                         xycoords=("data", "axes fraction"),
                         xytext=(3, 0), textcoords="offset points", fontsize=MIN_FONTSIZE,
                         color="0.3")
        top.set_title(f"({chr(ord('a') + j)}) study {study}")
        top.tick_params(labelbottom=True)
        bot.set_xlabel(xlabel)
        top.legend(loc="lower right" if j != 0 else "lower left")
    axes[0, 0].set_ylabel("acceptance rate α̂")
    axes[1, 0].set_ylabel("tokens per target call")
    axes[0, 0].set_ylim(-0.02, 1.05)
    axes[1, 0].set_ylim(0.8, None)
    fig.legend(handles=[
        Line2D([], [], color="0.3", marker="o", ms=3.5, lw=0.9, label="simulated (± 95% CI)"),
        Line2D([], [], color="0.3", marker="o", ms=6, mfc="none", ls="",
               label="exact (acceptance: ᾱ = Σ π(s) β(s))"),
    ], loc="upper right", ncol=2, frameon=False, bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return fig


# ---------------------------------------------------------------------------------------------
# 5. optimal_k: how many tokens to draft
# ---------------------------------------------------------------------------------------------
def optimal_k(grid: Grid, tables_dir: str) -> plt.Figure:
    """Speedup vs γ per (model, α), one panel per c: exact curve, simulated optimum ± CI.

    The exact curves are the ``optimal_k_exact`` table's (Eq. 1 for calibrated drafts, the
    family's exact method otherwise, at every γ up to the study's largest); per-γ simulated
    points are drawn from an ``optimal_k_curve`` table when one exists.
    """
    best = _table(tables_dir, "optimal_k")
    exact_curves = _table(tables_dir, "optimal_k_exact")
    curve = _optional_table(tables_dir, "optimal_k_curve")
    cs = sorted(best["c"].unique())
    best = best.copy()
    best["series"] = [f"{m}, α = {a:g}" if not pd.isna(a) else m
                      for m, a in zip(best["model"], best["alpha"], strict=True)]
    order = _unique(best.sort_values(["alpha"], na_position="first", kind="mergesort")
                    ["series"])
    col = _colors(order)
    fig, axes = plt.subplots(1, len(cs), figsize=(WIDE if len(cs) > 1 else COLUMN, 3.4),
                             sharey=True, squeeze=False, layout="constrained")
    axes = axes[0]
    for j, c in enumerate(cs):
        ax = axes[j]
        for s in order:
            r = best[(best["series"] == s) & (best["c"] == c)]
            if r.empty:
                continue
            r = r.iloc[0]
            gams = np.array([int(v) for v in str(r["gammas"]).split(";")])
            ex = exact_curves[_matches(exact_curves, study=r["study"], model=r["model"],
                                       alpha=r["alpha"], temperature=r["temperature"],
                                       knob=r["knob"], rule=r["rule"])].sort_values("gamma")
            dense = ex["gamma"].to_numpy(int)
            sp = ex["tokens_stationary"].to_numpy(float) / (1.0 + dense * c)
            ax.plot(dense, sp, "-", color=col[s], lw=0.9, zorder=1)
            on_grid = np.isin(dense, gams)
            ax.plot(dense[on_grid], sp[on_grid], ls="", marker="o", ms=3.5, mfc="white", mec=col[s],
                    mew=0.7, zorder=2)
            if curve is not None:
                h = curve[(curve["model"] == r["model"]) & (curve["c"] == c)
                          & ((curve["alpha"] == r["alpha"])
                             | (curve["alpha"].isna() & pd.isna(r["alpha"])))]
                ax.errorbar(h["gamma"], h["speedup"],
                            yerr=_yerr(h, "speedup", "speedup_ci_low", "speedup_ci_high"),
                            fmt=".", ms=2.5, color=col[s], elinewidth=0.6, zorder=3)
            ax.errorbar([r["gamma_opt"]], [r["speedup_opt"]],
                        yerr=[[r["speedup_opt"] - r["speedup_opt_ci_low"]],
                              [r["speedup_opt_ci_high"] - r["speedup_opt"]]],
                        fmt="*", ms=8, color=col[s], mec="black", mew=0.4, zorder=4)
            i_star = int(np.argmax(sp))
            if dense[i_star] not in gams:
                ax.plot([dense[i_star]], [sp[i_star]], marker="|", ms=7, color=col[s], mew=1.0)
        ax.axhline(1.0, color="0.4", lw=0.7, ls=":")
        ax.set_title(f"draft cost c = {c:g} (of a target call)")
        ax.set_xlabel("draft length γ")
        ax.set_xscale("log", base=2)
        ticks = [1, 2, 4, 8, 16, 32, 64]
        gmax = int(best["gammas"].map(lambda v: max(int(t) for t in str(v).split(";"))).max())
        ax.set_xticks([t for t in ticks if t <= gmax])
        ax.set_xticklabels([str(t) for t in ticks if t <= gmax])
        ax.minorticks_off()
    axes[0].set_ylabel("speedup over target-only (×)")
    handles = [Line2D([], [], color=col[s], lw=0.9, label=s) for s in order]
    handles += [
        Line2D([], [], color="0.3", lw=0.9, marker="o", mfc="white", ms=3.5,
                label="exact (Eq. 1, or the model's exact method) / (1 + γc)"),
        Line2D([], [], color="0.3", marker="*", mec="black", mew=0.4, ms=8, ls="",
               label="simulated optimum ± 95% CI"),
        Line2D([], [], color="0.3", marker="|", ms=7, mew=1.0, ls="",
               label="exact optimum off the simulated γ grid"),
    ]
    if curve is not None:
        handles.append(Line2D([], [], color="0.3", marker=".", ms=3, ls="",
                              label="simulated ± 95% CI"))
    fig.legend(handles=handles, loc="outside lower center", ncol=3 if len(cs) > 1 else 1,
               frameon=False)
    return fig


# ---------------------------------------------------------------------------------------------
# 6. optimal_k_heatmap: Leviathan Fig. 3 as a map over (alpha, c)
# ---------------------------------------------------------------------------------------------
HEATMAP_ALPHA = np.round(np.linspace(0.5, 0.99, 50), 4)
HEATMAP_C = np.round(np.linspace(0.0, 0.5, 51), 4)
HEATMAP_GAMMA_MAX = 64
HEATMAP_LEVELS = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 24, 32, 48, 64)


def optimal_k_heatmap(grid: Grid, tables_dir: str) -> plt.Figure:
    """Optimal γ (colour) and its speedup (contours) over α x c, from Leviathan Thm 3.8."""
    A, C = np.meshgrid(HEATMAP_ALPHA, HEATMAP_C, indexing="xy")
    g_opt, s_opt = exact.optimal_gamma(A, C, HEATMAP_GAMMA_MAX)
    bounds = np.array((*HEATMAP_LEVELS[:-1], HEATMAP_GAMMA_MAX)) + 0.5
    bounds = np.concatenate([[0.5], bounds])
    cmap = ListedColormap(plt.get_cmap("viridis")(np.linspace(0.05, 1.0, len(bounds) - 1)))
    norm = BoundaryNorm(bounds, cmap.N)
    fig, ax = plt.subplots(figsize=(COLUMN, 2.9))
    da, dc = np.diff(HEATMAP_ALPHA)[0], np.diff(HEATMAP_C)[0]
    edges_a = np.concatenate([HEATMAP_ALPHA - da / 2, [HEATMAP_ALPHA[-1] + da / 2]])
    edges_c = np.concatenate([HEATMAP_C - dc / 2, [HEATMAP_C[-1] + dc / 2]])
    mesh = ax.pcolormesh(edges_a, edges_c, g_opt, cmap=cmap, norm=norm, rasterized=True)
    levels = [1.25, 1.5, 2, 3, 4, 6, 10]
    cont = ax.contour(A, C, s_opt, levels=levels, colors="white", linewidths=0.6)
    ax.clabel(cont, fmt=lambda v: f"{v:g}×", fontsize=MIN_FONTSIZE, inline_spacing=2)
    ax.grid(False)
    ticks = [1, 2, 3, 4, 6, 8, 12, 16, 32, 64]
    cb = fig.colorbar(mesh, ax=ax, ticks=ticks, pad=0.02, fraction=0.06)
    cb.ax.set_yticklabels([str(t) if t < HEATMAP_GAMMA_MAX else f"≥{t}" for t in ticks])
    cb.ax.tick_params(labelsize=MIN_FONTSIZE)
    cb.set_label("optimal draft length γ*")
    best = _optional_table(tables_dir, "optimal_k")
    if best is not None:
        pts = best[best["alpha"].notna() & best["alpha"].between(A.min(), A.max())
                   & best["c"].between(C.min(), C.max())]
        # each number in a white box sized to it (a fixed marker would clip "12" at 7 pt)
        for _, r in pts.iterrows():
            ax.annotate(str(int(r["gamma_opt"])), (r["alpha"], r["c"]), ha="center",
                        va="center", fontsize=MIN_FONTSIZE, fontweight="bold",
                        bbox={"boxstyle": "round,pad=0.25", "fc": "white", "ec": "black",
                              "lw": 0.5})
        if len(pts):
            ax.legend(handles=[Line2D([], [], ls="", marker="s", ms=7, mfc="white",
                                      mec="black", mew=0.5,
                                      label="simulated γ* (optimal_k study)")],
                      loc="upper left")
    ax.set_xlabel("acceptance rate α")
    ax.set_ylabel("draft cost c (fraction of a target call)")
    ax.set_title("Optimal γ (colour) and its speedup (contours)")
    return fig


# ---------------------------------------------------------------------------------------------
# 7. break_even: when does a draft make decoding slower?
# ---------------------------------------------------------------------------------------------
def break_even(grid: Grid, tables_dir: str) -> plt.Figure:
    """Speedup vs c per model: exact E[tokens]/(1 + γc), simulated ± CI, break-even c*."""
    sv = _table(tables_dir, "speedup_vs_c").copy()
    be = _table(tables_dir, "break_even").copy()
    for d in (sv, be):
        d["series"] = [f"{m}, α = {a:g}" if not pd.isna(a) else m
                       for m, a in zip(d["model"], d["alpha"], strict=True)]
    order = _unique(be.sort_values("c_star_exact", ascending=False)["series"])
    col = _colors(order)
    fig, ax = plt.subplots(figsize=(COLUMN, 2.6 + 0.16 * (len(order) + 2)),
                           layout="constrained")
    cmin, cmax = sv["c"].min(), sv["c"].max()
    dense = np.geomspace(cmin / 2, cmax * 1.5, 200)
    ymax = 0.0
    for i, s in enumerate(order):
        b = be[be["series"] == s].iloc[0]
        g = sv[sv["series"] == s].sort_values("c")
        gamma = float(b["gamma"])
        curve = b["tokens_exact"] / (1.0 + gamma * dense)
        ymax = max(ymax, curve.max())
        ax.plot(dense, curve, "-", color=col[s], lw=0.9, zorder=1,
                label=f"{s}: c* = {b['c_star_exact']:.3f}")
        ax.errorbar(g["c"], g["speedup"],
                    yerr=_yerr(g, "speedup", "speedup_ci_low", "speedup_ci_high"),
                    fmt=MARKERS[i % len(MARKERS)], color=col[s], ms=3.2, elinewidth=0.6,
                    zorder=3)
        ax.errorbar([b["c_star"]], [1.0],
                    xerr=[[b["c_star"] - b["c_star_ci_low"]], [b["c_star_ci_high"] - b["c_star"]]],
                    fmt="|", ms=9, mew=1.4, color=col[s], zorder=4)
    ax.axhline(1.0, color="0.3", lw=0.7)
    ax.axhspan(0.0, 1.0, color="0.92", lw=0, zorder=0)
    ax.text(dense[0] * 1.1, 0.93, "slower than target-only", fontsize=MIN_FONTSIZE, color="0.35",
            va="top")
    for study, claim in expected_slower(grid):  # the config's claims, e.g. the program's demo 5
        rows = sv[slower_rows(sv, study, claim)]
        if len(rows):
            p = rows.iloc[0]
            ax.annotate(f"{claim['label']}:\n{p['speedup']:.2f}× at c = {p['c']:g}",
                        (p["c"], p["speedup"]), xytext=(-52, -30), textcoords="offset points",
                        fontsize=MIN_FONTSIZE,
                        arrowprops={"arrowstyle": "->", "lw": 0.6, "color": "0.2"})
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(dense[0], dense[-1])
    ax.set_ylim(max(0.2, sv["speedup_ci_low"].min() * 0.7), ymax * 1.35)
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}×"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_yticks([0.25, 0.5, 1, 2, 3])
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("draft cost c per token (fraction of a target call)")
    gam = sorted(sv["gamma"].unique())
    ax.set_ylabel(f"speedup at γ = {', '.join(str(int(v)) for v in gam)}")
    ax.set_title("Break-even c*: E[tokens] / (1 + γc) = 1")
    handles, _labels = ax.get_legend_handles_labels()
    handles.append(Line2D([], [], color="0.3", marker="|", ms=8, mew=1.4, ls="",
                          label="simulated c* ± 95% CI"))
    handles.append(Line2D([], [], color="0.3", marker="o", ms=3.2, ls="",
                          label="simulated speedup ± 95% CI"))
    # below the axes: inside, at 7 pt, it would hide the curves at small c
    fig.legend(handles=handles, loc="outside lower center", frameon=False)
    return fig


# ---------------------------------------------------------------------------------------------
# 8. wallclock: the notebook's toy timing chart, for each configured latency pair
# ---------------------------------------------------------------------------------------------
WALLCLOCK_GAMMA = 4  # the notebook's GAMMA


def _wallclock_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Rows to draw: each calibrated α and each seed draft, at γ = 4 (or the median γ)."""
    gam = WALLCLOCK_GAMMA if WALLCLOCK_GAMMA in set(df["gamma"]) else int(df["gamma"].median())
    d = df[df["gamma"] == gam]
    cal = d[d["alpha"].notna()]
    cal = cal[cal["model"] == cal["model"].iloc[0]] if len(cal) else cal
    rows = pd.concat([cal.sort_values("alpha"), d[d["alpha"].isna()]])
    rows = rows.assign(label=[f"α = {a:g}" if not pd.isna(a) else f"{m}\n(ᾱ = {ae:.2f})"
                              for m, a, ae in zip(rows["model"], rows["alpha"],
                                                  rows["alpha_exact"], strict=True)])
    return rows.reset_index(drop=True)


def wallclock(grid: Grid, tables_dir: str) -> plt.Figure:
    """Tokens per second, target-only vs speculative, per (target, draft) latency pair."""
    df = _table(tables_dir, "accept_curve")
    pairs = [tuple(map(float, p)) for p in grid.config.get("latency", [[0.010, 0.001]])]
    rows = _wallclock_rows(df)
    ncol = min(len(pairs), 2)
    nrow = int(np.ceil(len(pairs) / ncol))
    fig, axes = plt.subplots(nrow, ncol, figsize=(COLUMN if ncol == 1 else WIDE,
                                                  0.4 + 0.22 * (len(rows) + 1) * nrow + 0.5),
                             squeeze=False, sharey=True)
    gamma = int(rows["gamma"].iloc[0])
    labels = ["target only", *(lbl.replace("\n", " ") for lbl in rows["label"])]
    colors = ["0.6"] + [PALETTE[0] if not pd.isna(a) else PALETTE[1] for a in rows["alpha"]]
    for k, (t_target, t_draft) in enumerate(pairs):
        ax = axes.flat[k]
        round_s = t_target + gamma * t_draft
        rate = rows["tokens_per_round"] / round_s
        lo, hi = rows["tokens_ci_low"] / round_s, rows["tokens_ci_high"] / round_s
        vals = np.concatenate([[1.0 / t_target], rate])
        err = np.vstack([np.concatenate([[0.0], rate - lo]), np.concatenate([[0.0], hi - rate])])
        y = np.arange(len(vals))[::-1]
        ax.barh(y, vals, color=colors, height=0.7, xerr=err,
                error_kw={"elinewidth": 0.6, "capsize": 1.5})
        for yi, v in zip(y, vals, strict=True):
            ax.annotate(f"{v * t_target:.2f}×", (v, yi), xytext=(3, 0),
                        textcoords="offset points", va="center", fontsize=MIN_FONTSIZE)
        ax.set_yticks(y)
        ax.set_yticklabels(labels, fontsize=MIN_FONTSIZE)
        ax.grid(False, axis="y")
        ax.set_xlim(0, vals.max() * 1.22)
        ax.set_xlabel("tokens per second (labels: speedup)")
        ax.set_title(f"target {t_target * 1e3:g} ms, draft {t_draft * 1e3:g} ms/token "
                     f"(c = {t_draft / t_target:.2g}), γ = {gamma}", fontsize=MIN_FONTSIZE,
                     loc="right")
    for ax in list(axes.flat)[len(pairs):]:
        ax.set_visible(False)
    fig.legend(handles=[Patch(color=PALETTE[0], label="α-calibrated draft"),
                        Patch(color=PALETTE[1], label="seed draft (ᾱ: its mean acceptance)")],
               loc="lower center", ncol=2, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig


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
    it = _table(tables_dir, "intensity")
    rl = _table(tables_dir, "roofline")
    shapes = _unique(it["shape"])
    col = _colors(shapes)
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


FIGURES: dict[str, Callable[[Grid, str], plt.Figure]] = {
    "equivalence": equivalence,
    "accept_curve": accept_curve,
    "jensen": jensen,
    "temperature": temperature,
    "optimal_k": optimal_k,
    "optimal_k_heatmap": optimal_k_heatmap,
    "break_even": break_even,
    "wallclock": wallclock,
    "roofline": roofline,
}
NEEDS = FIGURE_NEEDS  # which analysis each figure needs: specsim.outputs, kept light


def _schemes_figure(name: str) -> Callable[[Grid, str], plt.Figure]:
    """The schemes analysis' figure ``name``: it lives in :mod:`specsim.schemes.figures`, which
    uses this module's helpers, so it is looked up when drawn (either module may load first)."""
    def draw(grid: Grid, tables_dir: str) -> plt.Figure:
        from specsim.schemes import figures as schemes_figures

        return getattr(schemes_figures, name)(grid, tables_dir)

    draw.__name__ = name
    return draw


FIGURES |= {name: _schemes_figure(name)
            for name, need in FIGURE_NEEDS.items() if need == "schemes"}


def make_figure(grid: Grid, tables_dir: str, name: str, out: str) -> None:
    if name not in FIGURES:
        raise ValueError(f"unknown figure {name!r}; known: {sorted(FIGURES)}")
    with plt.rc_context(STYLE):
        fig = FIGURES[name](grid, tables_dir)
        _save(fig, out)


def copy_readme_figures(src_dir: str | Path, dst_dir: str | Path,
                        names: Iterable[str] = README_FIGURES) -> list[Path]:
    """Copy the PNGs of the README's key figures from ``src_dir`` to ``dst_dir``.

    Raises ``FileNotFoundError`` naming every missing figure, so docs are never half stale.
    """
    src, dst = Path(src_dir), Path(dst_dir)
    missing = [n for n in names if not (src / f"{n}.png").is_file()]
    if missing:
        raise FileNotFoundError(f"no PNG in {src} for: {', '.join(missing)}")
    dst.mkdir(parents=True, exist_ok=True)
    return [Path(shutil.copyfile(src / f"{n}.png", dst / f"{n}.png")) for n in names]
