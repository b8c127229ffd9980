"""The ``schemes`` analysis' figures, from ``schemes.csv`` and ``schemes_policies.csv``.

* ``schemes_speed`` -- tokens per target call and speedup vs γ for every scheme on one model:
  exact (lines, open markers) and simulated ± 95% CI (dots);
* ``schemes_multidraft`` -- the k-draft schemes against the registry's ``bound`` rule (the
  LP optimum of k i.i.d. drafts), tokens per call vs γ, one panel per k;
* ``schemes_frontier`` -- the fidelity-speed frontier of the lossy rules: exact TV of the first
  two tokens vs exact speedup as each rule's knob varies, the simulated TV beside it and the
  sampling floor below which a simulation cannot see a bias;
* ``schemes_policies`` -- transformers' draft-length policies against the best fixed γ over c,
  its defaults (``num_assistant_tokens`` = 20 with ``assistant_confidence_threshold`` = 0.4;
  the ``heuristic`` schedule from 5) marked.

Declared in :mod:`specsim.outputs.schemes`; style and helpers are :mod:`specsim.figures.style`'s.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator, ScalarFormatter

from specsim.figures.style import (
    MIN_FONTSIZE,
    WIDE,
    colors,
    load_table,
    matches,
    nothing_to_draw,
    rule_label,
    unique,
    yerr,
)
from specsim.grid import Grid
from specsim.tables.schemes import KNOB_COLUMNS
from specsim.verify import RULES

__all__ = ["optimal_gamma_batch", "schemes_frontier", "schemes_multidraft", "schemes_policies",
           "schemes_speed"]

DEFAULTS = {"confidence": (20, 0.4), "heuristic": (5, None)}  # transformers' (γ, threshold)
TREE = (0, (4, 1, 1, 1, 1, 1))  # line style of the best token tree (optimal_gamma_batch)


def _scheme_label(row: pd.Series) -> str:
    knobs = [f"{k}={row[k] if isinstance(row[k], str) else format(row[k], 'g')}"
             for k in KNOB_COLUMNS if k in row and pd.notna(row[k])
             and k not in ("threshold", "cap")]
    return row["rule"] + (f" ({', '.join(knobs)})" if knobs else "")


def _speed_study(df: pd.DataFrame) -> tuple[str, str]:
    """The (study, model) with the most draft lengths, then the most rules, under the fixed
    policy (the first such in table order)."""
    fixed = df[df["policy"] == "fixed"]
    by = fixed.groupby(["study", "model"], sort=False)
    rank = pd.DataFrame({"gammas": by["gamma"].nunique(), "rules": by["rule"].nunique()})
    return rank.sort_values(["gammas", "rules"], ascending=False, kind="mergesort").index[0]


def schemes_speed(grid: Grid, tables_dir: str) -> plt.Figure:
    """Tokens per call (left) and speedup at the study's smallest c (right) vs γ."""
    df = load_table(tables_dir, "schemes")
    if not (df["policy"] == "fixed").any():
        return nothing_to_draw("no schemes study runs the fixed draft length (policy fixed): "
                               "nothing to draw against γ")
    study, model = _speed_study(df)
    d = df[(df["study"] == study) & (df["model"] == model) & (df["policy"] == "fixed")].copy()
    d["scheme"] = [_scheme_label(r) for _, r in d.iterrows()]
    c = min(grid.studies[study]["c"])
    ct = f"{float(c):g}"
    schemes = unique(d["scheme"])
    rules = unique(d["rule"])
    rcol = colors(rules)  # one colour per rule, one line style per knob value
    rule_of = dict(zip(d["scheme"], d["rule"], strict=True))
    nth = {s: [t for t in schemes if rule_of[t] == rule_of[s]].index(s) for s in schemes}
    col = {s: rcol[rule_of[s]] for s in schemes}
    style = {s: ("-", "--", ":", "-.")[nth[s] % 4] for s in schemes}
    fig, axes = plt.subplots(1, 2, figsize=(WIDE, 3.4), layout="constrained")
    fig.get_layout_engine().set(w_pad=0.06)
    n = len(schemes)
    for i, s in enumerate(schemes):
        g = d[d["scheme"] == s].sort_values("gamma")
        dx = (i - (n - 1) / 2) * 0.015
        for ax, mid, lo, hi, ex in (
                (axes[0], "tokens_per_call", "tokens_ci_low", "tokens_ci_high",
                 "tokens_stationary"),
                (axes[1], f"speedup_c{ct}", f"speedup_ci_low_c{ct}", f"speedup_ci_high_c{ct}",
                 f"speedup_exact_c{ct}")):
            ax.plot(g["gamma"], g[ex], ls=style[s], color=col[s], lw=0.9, marker="o",
                    mfc="white", ms=4, zorder=2)
            ax.errorbar(g["gamma"] + dx, g[mid], yerr=yerr(g, mid, lo, hi), fmt=".",
                        ms=2.5, color=col[s], elinewidth=0.6, zorder=3)
    gammas = sorted(d["gamma"].unique())
    for ax in axes:
        ax.set_xlabel("draft length γ")
        ax.set_xticks(gammas)
    axes[0].set_ylabel("tokens per target call")
    axes[1].set_ylabel(f"speedup at c = {ct}")
    axes[1].axhline(1.0, color="0.4", lw=0.6, ls=":")
    handles = [Line2D([], [], color=col[s], ls=style[s], marker="o", mfc="white", ms=4, lw=0.9,
                      label=s) for s in schemes]
    handles += [Line2D([], [], color="0.3", marker="o", mfc="white", ms=4, lw=0.9,
                       label="exact"),
                Line2D([], [], color="0.3", marker=".", ms=3, ls="", label="simulated ± 95% CI")]
    fig.legend(handles=handles, loc="outside lower center", ncol=4, handletextpad=0.3,
               frameon=False)
    fig.suptitle(f"Verification schemes on {model} (study {study}): tokens per call "
                 f"and speedup", fontsize=8)
    return fig


def schemes_multidraft(grid: Grid, tables_dir: str) -> plt.Figure:
    """Tokens per target call vs γ of every rule drafting k sequences (a ``width_knob`` of
    ``drafts``) beside the ``bound`` rule of the registry, one panel per k, on the first
    (study, model) that runs a bound rule: exact (lines) and simulated ± 95% CI (dots)."""
    df = load_table(tables_dir, "schemes")
    rules = [r for r in unique(df["rule"]) if RULES[r].width_knob == "drafts"]  # type: ignore[index]
    d = df[(df["policy"] == "fixed") & df["rule"].isin(rules)]
    bound = d[[RULES[r].bound for r in d["rule"]]]  # type: ignore[index]
    if bound.empty:
        return nothing_to_draw("no schemes study runs a k-draft rule beside its bound "
                               "(multi_draft_optimal): nothing to compare")
    study, model = bound.iloc[0]["study"], bound.iloc[0]["model"]
    d = d[(d["study"] == study) & (d["model"] == model)]
    ks = sorted(int(k) for k in d["drafts"].dropna().unique())
    col = colors(unique(d["rule"]))
    fig, axes = plt.subplots(1, len(ks), figsize=(WIDE, 3.0), layout="constrained",
                             sharey=True, squeeze=False)
    fig.get_layout_engine().set(w_pad=0.1)  # room for the y label at the canvas's edge
    for ax, k in zip(axes[0], ks, strict=True):
        for rule, g in d[d["drafts"] == k].groupby("rule", sort=False):
            g = g.sort_values("gamma")
            top = RULES[rule].bound  # type: ignore[index]
            ax.plot(g["gamma"], g["tokens_stationary"], color="k" if top else col[rule],
                    ls=":" if top else "-", lw=1.4 if top else 0.9, marker="o", mfc="white",
                    ms=4, zorder=2)
            ax.errorbar(g["gamma"], g["tokens_per_call"],
                        yerr=yerr(g, "tokens_per_call", "tokens_ci_low", "tokens_ci_high"),
                        fmt=".", ms=2.5, color="k" if top else col[rule], elinewidth=0.6,
                        zorder=3)
        ax.set_title(f"k = {k} drafts")
        ax.set_xlabel("draft length γ")
        ax.set_xticks(sorted(d["gamma"].unique()))
    axes[0][0].set_ylabel("tokens per target call")
    handles = [Line2D([], [], color="k" if RULES[r].bound else col[r],  # type: ignore[index]
                      ls=":" if RULES[r].bound else "-", marker="o", mfc="white", ms=4,  # type: ignore[index]
                      label=rule_label(r)) for r in unique(d["rule"])]
    handles.append(Line2D([], [], color="0.3", marker=".", ms=3, ls="",
                          label="simulated ± 95% CI"))
    fig.legend(handles=handles, loc="outside lower center", ncol=2, frameon=False)
    fig.suptitle(f"k drafts against the optimum of any verification ({model}, study {study})",
                 fontsize=8)
    return fig


def _label_points(ax: plt.Axes, x: np.ndarray, y: np.ndarray, knobs: np.ndarray, color: str,
                  below: bool) -> None:
    """Knob values beside their points; points that coincide (the same exact law, e.g. typical
    acceptance once ε exceeds its entropy threshold) share one label "a, b"."""
    groups: list[tuple[float, float, list[str]]] = []
    for xi, yi, k in zip(x, y, knobs, strict=True):
        for gx, gy, names in groups:
            if np.isclose(xi, gx, rtol=1e-9) and np.isclose(yi, gy, rtol=1e-9):
                names.append(f"{k:g}")
                break
        else:
            groups.append((xi, yi, [f"{k:g}"]))
    for i, (gx, gy, names) in enumerate(sorted(groups)):
        dy = (-9 - 8 * (i % 2)) if below else (3 + 8 * (i % 2))  # neighbours alternate rows
        ax.annotate(", ".join(sorted(names, key=float)), (gx, gy), textcoords="offset points",
                    xytext=(3, dy), fontsize=MIN_FONTSIZE, color=color)


def schemes_frontier(grid: Grid, tables_dir: str) -> plt.Figure:
    """Exact TV vs exact speedup of the lossy rules as their knob varies, one panel per c."""
    df = load_table(tables_dir, "schemes")
    lossy = df[~df["lossless"].astype(bool) & (df["policy"] == "fixed")]
    if lossy.empty:
        return nothing_to_draw("no schemes study runs a lossy rule (lenient, typical) at a fixed "
                               "draft length: no fidelity-speed frontier to draw")
    counts = lossy.groupby(["study", "model", "gamma"], sort=False).size()
    study, model, gamma = counts.idxmax()
    d = lossy[(lossy["study"] == study) & (lossy["model"] == model) & (lossy["gamma"] == gamma)]
    ref = df[(df["model"] == model) & (df["gamma"] == gamma) & (df["rule"] == "correct")
             & (df["policy"] == "fixed")]
    cs = [f"{float(c):g}" for c in grid.studies[study]["c"]]
    rules = unique(d["rule"])
    col = colors(rules)
    knob_of = {r: RULES[r].knobs[0].name for r in rules if RULES[r].knobs}  # the labelled knob
    floor_tv = 1e-6  # exact TV below this (lossless to machine precision) is drawn on it
    fig, axes = plt.subplots(1, len(cs), figsize=(WIDE, 3.0), layout="constrained",
                             squeeze=False)
    for ax, ct in zip(axes[0], cs, strict=True):
        floor = d["tv_floor"].max()
        ax.axhspan(floor_tv, floor, color="0.88", lw=0, zorder=0)
        for rule in rules:
            g = d[d["rule"] == rule].sort_values(f"speedup_exact_c{ct}")
            x = g[f"speedup_exact_c{ct}"]
            ax.plot(x, np.maximum(g["tv_exact"], floor_tv), "-", marker="o", mfc="white", ms=4,
                    color=col[rule], lw=0.9, zorder=2)
            biased = g["verdict"] == "biased"
            ax.plot(x[biased], g["tv_mc"][biased], "X", color=col[rule], ms=4, zorder=3)
            ax.plot(x[~biased], g["tv_mc"][~biased], "o", color=col[rule], mec="black",
                    mew=0.5, ms=3.5, zorder=3)
            knob = knob_of.get(rule)
            if knob in g:
                _label_points(ax, x.to_numpy(), np.maximum(g["tv_exact"], floor_tv).to_numpy(),
                              g[knob].to_numpy(), col[rule], below=rule != rules[0])
        if not ref.empty:
            ax.axvline(ref[f"speedup_exact_c{ct}"].iloc[0], color="0.3", lw=0.8, ls="--")
        ax.set_yscale("log")
        ax.set_ylim(floor_tv / 2, 1.0)
        ax.set_xlabel(f"exact speedup at c = {ct}")
        ax.set_title(f"c = {ct}")
    axes[0][0].set_ylabel("TV to the target (first two tokens)")
    handles = [Line2D([], [], color=col[r], marker="o", mfc="white", ms=4, lw=0.9,
                      label=f"{rule_label(r)}, exact (labels: {knob_of.get(r, 'knob')})")
               for r in rules]
    handles += [Line2D([], [], color="0.3", marker="o", mec="black", mew=0.5, ms=3.5, ls="",
                       label="simulated, judged lossless"),
                Line2D([], [], color="0.3", marker="X", ms=4, ls="", label="simulated, biased"),
                Line2D([], [], color="0.3", ls="--", lw=0.8, label="correct (lossless)"),
                plt.Rectangle((0, 0), 1, 1, color="0.88", label="sampling floor")]
    fig.legend(handles=handles, loc="outside lower center", ncol=3, handletextpad=0.3,
               frameon=False)
    fig.suptitle(f"Fidelity vs speed of the lossy rules ({model}, γ = {gamma}; exact TV "
                 f"< {floor_tv:g} drawn at {floor_tv:g})", fontsize=8)
    return fig


def schemes_policies(grid: Grid, tables_dir: str) -> plt.Figure:
    """Exact speedup vs c of each policy and of the best fixed γ; simulated ± CI; and each
    policy's speedup relative to the best fixed γ."""
    df = load_table(tables_dir, "schemes_policies")
    if df.empty or not (df["policy"] == "best_fixed").any():
        return nothing_to_draw("no schemes study runs a draft-length policy beside fixed "
                               "draft lengths", height=4.0)
    fig, (ax, rel) = plt.subplots(1, 2, figsize=(WIDE, 4.0), layout="constrained")
    key = df.groupby(["study", "model", "alpha", "temperature"], dropna=False,
                     sort=False).size().idxmax()
    d = df[matches(df, study=key[0], model=key[1], alpha=key[2], temperature=key[3])]
    best = d[d["policy"] == "best_fixed"].sort_values("c")
    ax.plot(best["c"], best["speedup_exact"], "-", color="black", lw=1.4, zorder=4)
    for _, r in best.iterrows():
        ax.annotate(f"γ={int(r['gamma'])}", (r["c"], r["speedup_exact"]),
                    textcoords="offset points", xytext=(2, 4), fontsize=MIN_FONTSIZE)
    others = d[~d["policy"].isin(["best_fixed", "optimal"])]
    schemes = unique(others["scheme"])
    col = colors(schemes)
    handles = [Line2D([], [], color="black", lw=1.4, label="best fixed γ (exact)")]
    # the optimal policy (any study, same model, α and temperature): the bound of the others
    opt = df[(df["policy"] == "optimal") & matches(df, model=key[1], alpha=key[2],
                                                    temperature=key[3])]
    if not opt.empty:
        opt = opt[opt["gamma"] == opt["gamma"].max()].sort_values("c")
        ax.plot(opt["c"], opt["speedup_exact"], ":", color="black", lw=1.4, zorder=4)
        rel.plot(opt["c"], opt["vs_best_fixed"], ":", color="black", lw=1.4, zorder=4)
        handles.append(Line2D([], [], color="black", lw=1.4, ls=":",
                              label=f"optimal policy, γ≤{int(opt['gamma'].iloc[0])} (exact)"))
    for s in schemes:
        g = others[others["scheme"] == s].sort_values("c")
        r0 = g.iloc[0]
        default = DEFAULTS.get(r0["policy"])
        is_default = default is not None and int(r0["gamma"]) == default[0] and (
            default[1] is None or np.isclose(r0["threshold"], default[1]))
        lw, ls = (1.6, "-") if is_default else (0.8, "--" if r0["policy"] == "fixed" else "-")
        for axis, y in ((ax, g["speedup_exact"]), (rel, g["vs_best_fixed"])):
            axis.plot(g["c"], y, ls=ls, lw=lw, color=col[s], marker="*" if is_default else "",
                      ms=6, zorder=3)
        ax.errorbar(g["c"], g["speedup"], yerr=yerr(g, "speedup", "speedup_ci_low",
                                                       "speedup_ci_high"),
                    fmt=".", ms=2.5, color=col[s], elinewidth=0.6, zorder=3)
        handles.append(Line2D([], [], color=col[s], lw=lw, ls=ls,
                              marker="*" if is_default else "", ms=6, label=s))
    handles += [Line2D([], [], color="0.3", marker="*", ms=6, lw=1.6,
                       label="transformers' defaults"),
                Line2D([], [], color="0.3", marker=".", ms=3, ls="", label="simulated ± 95% CI")]
    for axis in (ax, rel):
        axis.set_xscale("log")
        axis.set_xlabel("draft cost c (per draft token, in target calls)")
    ax.set_ylabel("speedup over the target alone")
    rel.set_ylabel("speedup / best fixed γ's (exact)")
    rel.axhline(1.0, color="black", lw=1.0)
    fig.legend(handles=handles, loc="outside lower center", ncol=4, handletextpad=0.3,
               columnspacing=1.0, frameon=False)
    alpha = "" if pd.isna(key[2]) else f", α = {key[2]:g}"
    fig.suptitle(f"Draft-length policies vs the best fixed γ ({key[1]}{alpha})", fontsize=8)
    return fig


def optimal_gamma_batch(grid: Grid, tables_dir: str) -> plt.Figure:
    """The best γ (left) and the best speedups (right) against batch size, one row per model,
    from ``cost_batch.csv``."""
    df = load_table(tables_dir, "cost_batch")
    if df.empty:
        return nothing_to_draw("the config's cost: section names no model: no round cost "
                               "against batch size to draw")
    models = unique(df["model"])
    df["line"] = [f"{d}" if df[["target", "draft_model"]].drop_duplicates().shape[0] == 1
                  else f"{t}/{m} on {d}" for t, m, d in
                  zip(df["target"], df["draft_model"], df["device"], strict=True)]
    lines = unique(df["line"])
    col = colors(lines)
    fig, axes = plt.subplots(len(models), 2, figsize=(WIDE, 2.4 * len(models) + 0.9),
                             layout="constrained", squeeze=False)
    for (ax, sp), model in zip(axes, models, strict=True):
        for line in lines:
            g = df[(df["model"] == model) & (df["line"] == line)].sort_values("batch")
            ax.plot(g["batch"], g["gamma_best"], "-o", color=col[line], ms=3, lw=1.0)
            ax.plot(g["batch"], g["gamma_constant"], ":", color=col[line], lw=1.0)
            sp.plot(g["batch"], g["speedup_best"], "-o", color=col[line], ms=3, lw=1.0)
            for drafting, ls in (("sequential", "--"), ("batched", "-.")):
                sp.plot(g["batch"], g[f"kdraft_{drafting}_speedup"], ls, color=col[line],
                        lw=0.9)
            if "tree_speedup" in g:
                sp.plot(g["batch"], g["tree_speedup"], ls=TREE, color=col[line], lw=0.9)
            if "sequoia_budget" in g and g["sequoia_budget"].notna().any():
                ax.plot(g["batch"], g["sequoia_budget"], "-s", color=col[line], ms=2.5, lw=0.6)
                sp.plot(g["batch"], g["sequoia_speedup"], "-s", color=col[line], ms=2.5, lw=0.6)
        ax.set_ylabel(f"{model}: best γ / tree nodes")
        sp.set_ylabel(f"{model}: speedup")
        sp.axhline(1.0, color="0.4", lw=0.6, ls=":")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        for a in (ax, sp):
            a.set_xscale("log", base=2)
            a.xaxis.set_major_formatter(ScalarFormatter())
    for a in axes[-1]:
        a.set_xlabel("batch size b (sequences decoded together)")
    pair = df[["target", "draft_model"]].drop_duplicates()
    handles = [Line2D([], [], color=col[s], marker="o", ms=3, lw=1.0, label=s) for s in lines]
    handles += [Line2D([], [], color="0.3", ls=":", lw=1.0, label="γ of 1 + γc (verify free)"),
                Line2D([], [], color="0.3", ls="--", lw=0.9, label="best k drafts, sequential"),
                Line2D([], [], color="0.3", ls="-.", lw=0.9, label="best k drafts, batched"),
                Line2D([], [], color="0.3", ls=TREE, lw=0.9, label="best token tree, batched"),
                Line2D([], [], color="0.3", marker="s", ms=2.5, lw=0.6,
                       label="Sequoia's best tree: nodes, speedup")]
    fig.legend(handles=handles, loc="outside lower center", ncol=3, handletextpad=0.3,
               frameon=False)
    what = ", ".join(f"{t} target, {d} draft" for t, d in pair.itertuples(index=False))
    fig.suptitle(f"Best draft length against batch size at the roofline's cost ({what}, "
                 f"n_ctx = {int(df['n_ctx'].iloc[0])})", fontsize=8)
    return fig
