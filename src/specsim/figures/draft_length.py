"""How many tokens to draft, and when drafting loses: ``optimal_k`` (speedup against γ),
``optimal_k_heatmap`` (Leviathan Fig. 3 as a map over α and c) and ``break_even`` (speedup
against the draft cost c).
"""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.lines import Line2D

from specsim import exact
from specsim.figures.style import (
    COLUMN,
    MARKERS,
    MIN_FONTSIZE,
    WIDE,
    colors,
    load_optional_table,
    load_table,
    matches,
    unique,
    yerr,
)
from specsim.grid import Grid
from specsim.tables.points import expected_slower, slower_rows


# ---------------------------------------------------------------------------------------------
# 5. optimal_k: how many tokens to draft
# ---------------------------------------------------------------------------------------------
def optimal_k(grid: Grid, tables_dir: str) -> plt.Figure:
    """Speedup vs γ per (model, α), one panel per c: exact curve, simulated optimum ± CI.

    The exact curves are the ``optimal_k_exact`` table's (Eq. 1 for calibrated drafts, the
    family's exact method otherwise, at every γ up to the study's largest); per-γ simulated
    points are drawn from an ``optimal_k_curve`` table when one exists.
    """
    best = load_table(tables_dir, "optimal_k")
    exact_curves = load_table(tables_dir, "optimal_k_exact")
    curve = load_optional_table(tables_dir, "optimal_k_curve")
    cs = sorted(best["c"].unique())
    best = best.copy()
    best["series"] = [f"{m}, α = {a:g}" if not pd.isna(a) else m
                      for m, a in zip(best["model"], best["alpha"], strict=True)]
    order = unique(best.sort_values(["alpha"], na_position="first", kind="mergesort")
                    ["series"])
    col = colors(order)
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
            ex = exact_curves[matches(exact_curves, study=r["study"], model=r["model"],
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
                            yerr=yerr(h, "speedup", "speedup_ci_low", "speedup_ci_high"),
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
    best = load_optional_table(tables_dir, "optimal_k")
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
    sv = load_table(tables_dir, "speedup_vs_c").copy()
    be = load_table(tables_dir, "break_even").copy()
    for d in (sv, be):
        d["series"] = [f"{m}, α = {a:g}" if not pd.isna(a) else m
                       for m, a in zip(d["model"], d["alpha"], strict=True)]
    order = unique(be.sort_values("c_star_exact", ascending=False)["series"])
    col = colors(order)
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
                    yerr=yerr(g, "speedup", "speedup_ci_low", "speedup_ci_high"),
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
