"""The n-gram backend's own figures, drawn from the tables (PDF + PNG, the house style of
specsim.figures); the pair_accept figure both backends draw is :mod:`specsim.pairs.figures`'.

Each is declared in :mod:`specsim.outputs.realtext` (name, caption, the step drawing it); its
builder takes ``read``, which gives a declared table by name
(:func:`specsim.figures.draw_stage_figures`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from specsim.pairs.figures import Read, draw_speedup, log2_gamma_axis, plain, plain_minor, timed


def _orders_legend(ax: Any, **kw: Any) -> None:
    ax.legend(title="draft order", title_fontsize=6.5, **kw)


def figure_beta(read: Read) -> Any:
    import matplotlib.pyplot as plt

    hist = read("realtext_beta")
    models = read("realtext_models").set_index("order")
    fig, ax = plt.subplots()
    for i, (k, g) in enumerate(hist.groupby("draft_order")):
        colour = f"C{i}"
        ax.stairs(g["density"], np.append(g["bin_low"], g["bin_high"].iloc[-1]), color=colour,
                  label=f"{k} (mean {models.loc[k, 'beta_mean']:.2f})")
        ax.axvline(models.loc[k, "beta_mean"], color=colour, ls=":", lw=0.9)
    ax.set_xlabel("per-context acceptance β(h) = Σ min(p, q)")
    ax.set_ylabel("density over held-out contexts")
    ax.set_xlim(0, 1)
    _orders_legend(ax, loc="upper left")
    return fig


def figure_tokens(read: Read) -> Any:
    import matplotlib.pyplot as plt

    from specsim.figures.style import WIDE

    df = read("realtext_speculative")
    fig, (ax, gap) = plt.subplots(1, 2, figsize=(WIDE, 2.6))
    for i, (k, g) in enumerate(df.groupby("draft_order")):
        mid = g["tokens_per_call"]
        err = [mid - g["tokens_ci_low"], g["tokens_ci_high"] - mid]
        ax.errorbar(g["gamma"], g["tokens_per_call"], yerr=err, fmt="o", color=f"C{i}",
                    label=f"{k}")
        ax.plot(g["gamma"], g["tokens_closed_form"], color=f"C{i}", lw=0.9)
        gap.errorbar(g["gamma"], g["jensen_gap"], yerr=err[::-1], fmt="o-", color=f"C{i}",
                     label=f"{k}")
    log2_gamma_axis(ax, df["gamma"])
    ax.set_ylabel("characters per target call")
    ax.set_title("observed (95% CI) and Eq. 1 at mean β (lines)")
    _orders_legend(ax, loc="upper left")
    gap.axhline(0, color="0.4", lw=0.6)
    log2_gamma_axis(gap, df["gamma"])
    gap.set_ylabel("Eq. 1 at mean β − observed")
    gap.set_title("Jensen's gap on real text")
    _orders_legend(gap, loc="upper left")
    return fig


def figure_costs(read: Read) -> Any:
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter

    from specsim.figures.style import WIDE

    df = read("realtext_costs")
    batches = sorted(df["batch"].unique())
    fig, axes = plt.subplots(1, 1 + len(batches), figsize=(WIDE, 3.0))
    ax = axes[0]
    kmax = int(df["positions"].max())
    ax.plot([1, kmax], [1, kmax], color="0.6", ls="--", lw=0.8, label="proportional to k")
    for j, (b, g) in enumerate(df[df["measure"] == "target_call"].groupby("batch")):
        timed(ax, g["positions"], g, "ratio", "os"[j % 2], "k" if j else "0.45",
              f"batch {b}")
    ax.set_xlabel("positions verified in one target call, k")
    ax.set_ylabel("T(k) / T(1)")
    ax.set_title("cost of verifying k positions\n(target call, order 5)")
    ax.legend(loc="upper left")
    spec = df[df["measure"] == "speculative"].astype({"draft_order": int})
    steps = df[df["measure"] == "draft_step"].astype({"draft_order": int})
    for sp, b in zip(axes[1:], batches, strict=True):
        sub = spec[spec["batch"] == b]
        for i, (_, g) in enumerate(sub.groupby("draft_order")):
            colour = f"C{i}"
            draw_speedup(sp, g["gamma"], g, "o", colour)
        sp.axhline(1, color="0.3", lw=0.6)
        log2_gamma_axis(sp, sub["gamma"])
        sp.set_yscale("log")
        sp.yaxis.set_major_formatter(FuncFormatter(plain))
        sp.yaxis.set_minor_formatter(FuncFormatter(plain_minor))
        sp.set_ylabel("speedup over the target alone")
        cs = ", ".join(f"{c:.2f}" for c in steps[steps["batch"] == b].sort_values(
            "draft_order")["c"])
        sp.set_title(f"batch of {b} prompt{'s' if b > 1 else ''}\nc = {cs}")
    orders = sorted(spec["draft_order"].unique())
    handles = [Line2D([], [], color=f"C{i}", marker="o", lw=1.2) for i in range(len(orders))]
    handles += [Line2D([], [], color="0.3", ls=ls, lw=lw) for ls, lw in (("--", 0.8), (":", 1.0))]
    handles.append(Line2D([], [], color="0.3", marker="o", mfc="white", ls="none"))
    labels = [f"draft order {k}, measured" for k in orders]
    labels += ["Thm 3.8 with measured c (assumes T(γ+1) = T(1))", "with measured c and T(γ+1)",
               "timing unreliable (repeats disagree)"]
    fig.legend(handles, labels, loc="lower center", ncol=3, frameon=False)
    fig.tight_layout(rect=(0, 0.14, 1, 1))
    return fig


def figure_engine_schedule(read: Read) -> Any:
    """The engine route's schedule (:func:`specsim.acceptance.figure.draw_schedule`)."""
    from specsim.acceptance.figure import draw_schedule

    return draw_schedule(read("engine_schedule"))
