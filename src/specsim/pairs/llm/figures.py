"""The transformers backend's own figures, drawn from the tables in results/llm/ (PDF + PNG,
specsim.figures' style); the pair_accept figure both backends draw is :mod:`specsim.pairs.figures`'.

Each is declared in :mod:`specsim.outputs.llm` (name, caption, the step drawing it); its builder
takes ``read``, which gives a declared table by name (:func:`specsim.figures.draw_stage_figures`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specsim.pairs.figures import Read, draw_speedup


def figure_costs(read: Read) -> Any:
    import matplotlib.pyplot as plt

    from specsim.figures.style import WIDE

    inten = read("llm_intensity")
    spec = read("llm_speculative")
    spec = spec[spec["gamma"] > 0]
    fig, (mb, ax, sp) = plt.subplots(1, 3, figsize=(WIDE, 2.8))
    k = inten["positions"]
    ridge = inten["ridge_macs_per_byte"].iloc[0]
    mb.plot(k, inten["macs_per_byte"], "o-", color="C0", label="SmolLM2-135M pass (fp32)")
    mb.axhline(ridge, color="C1", label=f"ridge of this CPU ({ridge:.1f})")
    mb.set_xlabel("positions in one pass, k")
    mb.set_ylabel("MACs per byte")
    mb.set_title("arithmetic intensity")
    mb.legend(loc="upper left")
    ax.plot(k, k, color="0.6", ls="--", lw=0.8, label="proportional to k")
    ax.plot(k, inten["measured_ratio"], "o-", color="k", label="measured (KV cache)")
    ax.plot(k, inten["roofline_ratio"], "-", color="C1", label="roofline of this CPU")
    ax.set_xlabel("positions verified in one target call, k")
    ax.set_ylabel("T(k) / T(1)")
    ax.set_title("cost of verifying k positions")
    ax.legend(loc="upper left")
    for i, (name, g) in enumerate(spec.groupby("draft", sort=False)):
        col = f"C{i}"
        draw_speedup(sp, g["gamma"], g, "o", col, f"{name} (c = {g['c'].iloc[0]:.2f})")
    sp.axhline(1, color="0.3", lw=0.6)
    sp.set_xlabel("draft length γ")
    sp.set_xticks(sorted(spec["gamma"].unique()))
    sp.set_ylabel("speedup over the target alone")
    sp.set_title("measured (o-), Thm 3.8 (--),\nEq. 1 over γc + T(γ+1)/T(1) (:)")
    sp.legend(loc="best")
    return fig


def figure_alpha(read: Read) -> Any:
    import matplotlib.pyplot as plt

    a = read("llm_alpha")
    a = a[a["draft"] != "target"]
    spec = read("llm_speculative")
    spec = spec[spec["gamma"] > 0]
    fig, ax = plt.subplots(layout="constrained")
    xs = np.arange(len(a))
    ax.bar(xs, a["alpha_heldout"], color="C0", alpha=0.7, label="held-out Σ min(p, q)")
    ax.errorbar(xs, a["alpha_median"], yerr=[a["alpha_median"] - a["alpha_p10"],
                                             a["alpha_p90"] - a["alpha_median"]],
                fmt="none", color="0.3", lw=0.8, label="median, 10-90%")
    for name, g in spec.groupby("draft"):
        i = list(a["draft"]).index(name)
        ax.plot(np.full(len(g), i) + np.linspace(-0.2, 0.2, len(g)), g["accept_rate"], "D",
                color="C1", ms=3)
    ax.plot([], [], "D", color="C1", ms=3, label="acceptance in Alg. 1 (per γ)")
    labels = a["draft"].str.replace(" (batched pass)", "\nbatched", regex=False)
    ax.set_xticks(xs, labels, rotation=35, ha="right")
    ax.set_ylabel("α (per-position acceptance)")
    ax.set_ylim(0, 1.05)
    ax.set_yticks(np.linspace(0, 1, 6))
    # above the axes: at 7 pt two columns are wider than the axes, not than the figure
    fig.legend(loc="outside upper center", ncol=2, frameon=False)
    return fig


def figure_assisted(read: Read) -> Any:
    """specsim's loop beside transformers' assisted generation (same pair): tokens per target
    call, tokens per second and speedup over each library's plain sampling, against γ."""
    import matplotlib.pyplot as plt

    from specsim.figures.style import WIDE

    t = read("llm_assisted")
    plain = t[t["draft"] == "target alone"].set_index("loop")
    runs = t[t["draft"] != "target alone"]
    drafts = list(dict.fromkeys(runs["draft"]))
    colour = {"specsim": "C0", "transformers-fixed": "C1", "transformers-default": "C2"}
    marks = "osD^v"
    fig, (tc, ts, sp) = plt.subplots(1, 3, figsize=(WIDE, 2.8))
    for j, name in enumerate(drafts):
        for loop, g in runs[runs["draft"] == name].groupby("loop", sort=False):
            col, mk = colour.get(str(loop), "k"), marks[j % len(marks)]
            label = str(loop) + (f", {name}" if len(drafts) > 1 else "")
            # the default policy drafts a variable number: placed at its mean draft length
            x = g["gamma_mean"] if loop == "transformers-default" else g["gamma"]
            style = "" if loop == "transformers-default" else "-"
            tc.plot(x, g["tokens_per_call"], mk + style, color=col, label=label)
            tc.plot(x, g["tokens_eq1"], mk + "--", color=col, mfc="none", lw=0.8)
            ts.plot(x, g["tokens_per_second"], mk + style, color=col, label=label)
            draw_speedup(sp, x, g, mk, col, label, style)
    for lib, col in (("specsim", "C0"), ("transformers", "C1")):
        if lib in plain.index:
            ts.axhline(plain.loc[lib, "tokens_per_second"], color=col, ls=":", lw=1.0,
                       label=f"{lib}, target alone")
    sp.axhline(1, color="0.3", lw=0.6)
    gammas = sorted(runs.loc[runs["loop"] != "transformers-default", "gamma"].unique())
    for ax in (tc, ts, sp):
        ax.set_xlabel("tokens drafted per round, γ")
        ax.set_xticks(gammas)
    tc.set_ylabel("tokens per target call")
    tc.set_title("measured (filled), Eq. 1 at the\nmeasured α (open, --)")
    tc.legend(loc="upper left")
    ts.set_ylim(0, None)
    sp.set_ylim(0, None)
    ts.set_ylabel("tokens per second")
    ts.set_title("wall clock (dotted: target alone)")
    ts.legend(loc="lower right")
    sp.set_ylabel("speedup over the same library alone")
    sp.set_title("measured, Thm 3.8 (--),\nwith measured T(γ+1)/T(1) (:)")
    return fig


def figure_speedup_explained(read: Read) -> Any:
    """Top: measured speedup (median, quartiles) beside Thm 3.8 and the cost model, per pair.
    Bottom: the measured speedup of specsim's loop as a product of factors, in log2: the ideal
    γ+1 up, what α, the draft cost c, the verify cost and the rest take away."""
    import matplotlib.pyplot as plt

    from specsim.figures.style import WIDE

    t = read("llm_speedup_explained")
    pairs = list(dict.fromkeys(t["pair"]))
    fig, axes = plt.subplots(2, len(pairs), figsize=(WIDE, 4.8), squeeze=False,
                             layout="constrained")
    factors = ("factor_ideal", "factor_alpha", "factor_draft", "factor_verify", "factor_other")
    for k, name in enumerate(pairs):
        top, bottom = axes[0][k], axes[1][k]
        g = t[t["pair"] == name]
        for j, (engine, e) in enumerate(g.groupby("engine", sort=False)):
            col = f"C{j}"
            top.errorbar(e["gamma"], e["speedup_measured"], yerr=[
                e["speedup_measured"] - e["speedup_measured_q25"],
                e["speedup_measured_q75"] - e["speedup_measured"]], fmt="o-", color=col,
                ms=3, capsize=2, label=f"measured, {engine}")
        first = g.drop_duplicates("gamma").sort_values("gamma")
        top.plot(first["gamma"], first["speedup_thm38"], "--", color="k", lw=0.8,
                 label="Thm 3.8 (mean α, c)")
        top.plot(first["gamma"], first["speedup_predicted"], ":", color="k",
                 label="trace / (γc + T(γ+1)/T(1))")
        top.axhline(1, color="0.3", lw=0.6)
        top.set_title(f"{name} (c = {g['c'].iloc[0]:.2f})")
        top.set_xticks(sorted(g["gamma"].unique()))
        spec = g[g["engine"] == g["engine"].iloc[0]].sort_values("gamma")
        xs = np.arange(len(spec))
        up = np.zeros(len(spec))
        down = np.zeros(len(spec))
        for i, f in enumerate(factors):
            v = np.log2(spec[f].to_numpy())
            base = np.where(v >= 0, up, down)
            bottom.bar(xs, v, bottom=base, color=f"C{i + 2}", width=0.6,
                       label=f.removeprefix("factor_"))
            up += np.where(v >= 0, v, 0)
            down += np.where(v < 0, v, 0)
        bottom.plot(xs, np.log2(spec["speedup_measured"]), "k_", ms=14, mew=2,
                    label="measured (sum)")
        bottom.axhline(0, color="0.3", lw=0.6)
        bottom.set_xticks(xs, [f"γ={int(x)}" for x in spec["gamma"]])
        bottom.set_title(f"{spec['engine'].iloc[0]}: log2 factors")
    axes[0][0].set_ylabel("speedup over the target alone")
    axes[1][0].set_ylabel("log2 factor")
    seen: dict[str, Any] = {}
    for ax in axes[0]:  # every engine's line, whichever panel has it
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, h)
    axes[0][0].legend(list(seen.values()), list(seen), loc="best")
    handles, labels = axes[1][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), frameon=False)
    return fig
