"""Tokens per target call: ``accept_curve`` (Eq. 1 against exact and simulation), ``jensen``
(where Eq. 1 at the mean acceptance fails), ``temperature`` (draft quality and temperature) and
``wallclock`` (the notebook's timing chart).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from specsim import exact
from specsim.families import KNOBS, Knob
from specsim.figures.style import (
    COLUMN,
    MARKERS,
    MIN_FONTSIZE,
    PALETTE,
    WIDE,
    colors,
    load_table,
    model_label,
    unique,
    yerr,
)
from specsim.grid import Grid


# ---------------------------------------------------------------------------------------------
# 2. accept_curve: Eq. 1 vs exact vs simulation
# ---------------------------------------------------------------------------------------------
def accept_curve(grid: Grid, tables_dir: str) -> plt.Figure:
    """E[tokens per round] vs γ: Eq. 1 (lines), exact (open), simulated with 95% CI (dots)."""
    df = load_table(tables_dir, "accept_curve")
    fig, (ax, res) = plt.subplots(2, 1, figsize=(COLUMN, 3.7), sharex=True,
                                  gridspec_kw={"height_ratios": [2.4, 1.0]})
    cal = df[df["alpha"].notna()]
    seeds = df[df["alpha"].isna()]
    alphas = sorted(cal["alpha"].unique())
    acol = colors(alphas)
    gmax = int(df["gamma"].max())
    dense = np.linspace(1, gmax, 200)
    for a in alphas:
        ax.plot(dense, exact.expected_tokens(a, dense), "-", color=acol[a], lw=0.9, zorder=1)
    cal_models = unique(cal["model"])
    seed_models = unique(seeds["model"])
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
                    yerr=yerr(g, "tokens_per_round", "tokens_ci_low", "tokens_ci_high"),
                    fmt=".", ms=2.5, color=col, elinewidth=0.6, zorder=3)
        dx = (i - (n - 1) / 2) * 0.045
        res.errorbar(g["gamma"] + dx, g["tokens_per_round"] - g["tokens_exact"],
                     yerr=yerr(g, "tokens_per_round", "tokens_ci_low", "tokens_ci_high",
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
                       ms=4, label=model_label(df, m)) for m in seed_models]
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
    df = _jensen_series(load_table(tables_dir, "accept_curve"))
    seeds = unique(df.loc[df["alpha"].isna(), "model"])
    order = [*seeds, "α-calibrated drafts (all α)"]
    col = colors(seeds) | {"α-calibrated drafts (all α)": "0.45"}
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
                        label=model_label(df, s))
        g = g.sort_values("gamma")
        mc = g["tokens_closed_form_mc"] - g["tokens_per_round"]
        err = yerr(g, "tokens_per_round", "tokens_ci_low", "tokens_ci_high")[::-1]
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
    df = load_table(tables_dir, "temperature")
    studies = sorted(unique(df["study"]), key=lambda s: _temperature_order(grid, df, s))
    models = unique(df["model"])
    mcol = colors(models)
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
                         yerr=yerr(h, "tokens_per_round", "tokens_ci_low", "tokens_ci_high"),
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
# 8. wallclock: the notebook's toy timing chart, for each configured latency pair
# ---------------------------------------------------------------------------------------------
WALLCLOCK_GAMMA = 4  # the notebook's GAMMA


def _wallclock_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Rows to draw: each calibrated α and each seed draft, at γ = 4 (or the γ nearest the
    median)."""
    have = sorted(set(df["gamma"]))
    # γ = 4, else the study's γ nearest the median (one the table has rows at)
    gam = WALLCLOCK_GAMMA if WALLCLOCK_GAMMA in have else min(
        have, key=lambda g: (abs(g - float(df["gamma"].median())), g))
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
    df = load_table(tables_dir, "accept_curve")
    pairs = [tuple(map(float, p)) for p in grid.config.get("latency", [[0.010, 0.001]])]
    rows = _wallclock_rows(df)
    ncol = min(len(pairs), 2)
    nrow = int(np.ceil(len(pairs) / ncol))
    fig, axes = plt.subplots(nrow, ncol, figsize=(COLUMN if ncol == 1 else WIDE,
                                                  0.4 + 0.22 * (len(rows) + 1) * nrow + 0.5),
                             squeeze=False, sharey=True)
    gamma = int(rows["gamma"].iloc[0])
    labels = ["target only", *(lbl.replace("\n", " ") for lbl in rows["label"])]
    bar_colors = ["0.6"] + [PALETTE[0] if not pd.isna(a) else PALETTE[1] for a in rows["alpha"]]
    for k, (t_target, t_draft) in enumerate(pairs):
        ax = axes.flat[k]
        round_s = t_target + gamma * t_draft
        rate = rows["tokens_per_round"] / round_s
        lo, hi = rows["tokens_ci_low"] / round_s, rows["tokens_ci_high"] / round_s
        vals = np.concatenate([[1.0 / t_target], rate])
        err = np.vstack([np.concatenate([[0.0], rate - lo]), np.concatenate([[0.0], hi - rate])])
        y = np.arange(len(vals))[::-1]
        ax.barh(y, vals, color=bar_colors, height=0.7, xerr=err,
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
