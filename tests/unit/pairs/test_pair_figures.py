"""The pair_accept figure, drawn once for both backends (:mod:`specsim.pairs.figures`), on
synthetic tables of the one schema (:data:`specsim.pairs.accept.COLUMNS`)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from specsim.outputs import stage_figures
from specsim.pairs import figures
from specsim.pairs.accept import COLUMNS


def _table(pairs: dict[str, tuple[str, ...]], gammas: tuple[int, ...] = (1, 2, 4)
           ) -> pd.DataFrame:
    """pair_accept rows: each pair measured by its engines at every γ."""
    rows = []
    for i, (pair, engines) in enumerate(pairs.items()):
        alpha = 0.3 + 0.2 * i
        for engine in engines:
            for g in gammas:
                pred = 1 + alpha * g / 2
                meas = pred * (0.97 if engine == "specsim" else 1.02)
                rows.append({c: np.nan for c in COLUMNS} | {
                    "pair": pair, "engine": engine, "gamma": g, "tokens_predicted": pred,
                    "tokens_predicted_ci_low": pred - 0.05, "tokens_predicted_ci_high": pred + 0.05,
                    "tokens_measured": meas, "tokens_measured_ci_low": meas - 0.1,
                    "tokens_measured_ci_high": meas + 0.1, "difference": pred - meas,
                    "difference_ci_low": pred - meas - 0.1, "difference_ci_high": pred - meas + 0.1,
                    "relative_difference": (pred - meas) / meas, "alpha_mean": alpha,
                    "tokens_eq1_mean_alpha": pred + 0.1})
    return pd.DataFrame(rows, columns=list(COLUMNS))


@pytest.mark.parametrize("pairs", [
    {"ngram_o1": ("specsim",), "ngram_o2": ("specsim",), "ngram_o3": ("specsim",)},
    {"ngram-3": ("specsim",), "int8": ("specsim", "transformers")},
])
def test_every_pair_and_engine_is_drawn_and_named(pairs: dict[str, tuple[str, ...]]) -> None:
    df = _table(pairs)
    fig = figures.draw_pair_accept(df, "tokens")
    ax, diff = fig.axes
    series = sum(len(e) for e in pairs.values())
    # one band a pair; one set of error bars a (pair, engine) in each panel
    assert len(ax.containers) == len(diff.containers) == series
    bands = [c for c in ax.collections if type(c).__name__ in ("PolyCollection",
                                                                  "FillBetweenPolyCollection")]
    assert len(bands) == len(pairs)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    engines = list(dict.fromkeys(e for es in pairs.values() for e in es))
    assert labels == [f"{p} (mean α {0.3 + 0.2 * i:.2f})" for i, p in enumerate(pairs)] + [
        f"measured, {e}" for e in engines] + ["Eq. 1 at mean α"]
    # the measured points sit at their γ (engines side by side around it), the difference
    # panel in percent of the measurement
    xs = np.concatenate([c.lines[0].get_xdata() for c in ax.containers]).astype(float)
    assert np.allclose(np.sort(np.round(np.log2(xs))), np.sort(np.log2(
        np.tile([1, 2, 4], series))))
    rel = np.concatenate([c.lines[0].get_ydata() for c in diff.containers]).astype(float)
    np.testing.assert_allclose(np.sort(rel), np.sort(df["relative_difference"] * 100))
    assert ax.get_ylabel() == "tokens per target call"
    plt.close(fig)


def test_each_backend_declares_the_one_drawing_over_its_own_table() -> None:
    declared = {f.name: f for stage in ("realtext", "llm") for f in stage_figures(stage)}
    for name, unit in (("pair_accept", "characters"), ("llm_pair_accept", "tokens")):
        f = declared[name]
        assert f.reads == (name,)
        read: list[str] = []

        def table(n: str, read: list[str] = read) -> pd.DataFrame:
            read.append(n)
            return _table({"a": ("specsim",)})

        fig = f.build()(table)
        assert read == [name] and fig.axes[0].get_ylabel() == f"{unit} per target call"
        plt.close(fig)


def test_a_speedup_is_drawn_with_its_quartiles_its_theory_and_its_unreliable_medians_hollow(
        ) -> None:
    g = pd.DataFrame({"gamma": [1, 2, 4], "speedup_measured": [1.2, 1.5, 1.1],
                      "speedup_measured_q25": [1.1, 1.4, 1.0],
                      "speedup_measured_q75": [1.3, 1.7, 1.2], "reliable": [True, False, True],
                      "speedup_thm38": [1.3, 1.6, 1.4], "speedup_cost_model": [1.25, 1.5, 1.2]})
    fig, ax = plt.subplots()
    figures.draw_speedup(ax, g["gamma"], g, "o", "C0", label="measured")
    (bars,) = ax.containers
    low, high = (seg[:, 1] for seg in np.stack([s for s in bars.lines[2][0].get_segments()],
                                               axis=1))
    np.testing.assert_allclose(low, g["speedup_measured_q25"])
    np.testing.assert_allclose(high, g["speedup_measured_q75"])
    hollow = [line for line in ax.lines if line.get_markerfacecolor() == "white"]
    assert len(hollow) == 1 and list(hollow[0].get_xdata()) == [2.0]
    styles = {line.get_linestyle(): list(line.get_ydata()) for line in ax.lines}
    assert styles["--"] == [1.3, 1.6, 1.4] and styles[":"] == [1.25, 1.5, 1.2]
    assert [t.get_text() for t in ax.legend().get_texts()] == ["measured"]
    plt.close(fig)
