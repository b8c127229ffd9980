"""The grid studies' tables, computed from ``results/points.parquet`` (and exact theory); each is
declared, with what it answers and its columns, in :mod:`specsim.outputs.study_tables`.

Column names follow the design's contract (columns may be added, never renamed). Numbers of a
model that no point file holds come from the stage that owns the model, the exact reference
(:func:`specsim.measures.long_run.exact_curve`, ``optimal_k_exact``) or the model's family
(:meth:`specsim.families.Family.example_rows`, ``worked_example``), with their inputs read from
the config.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specsim import exact, intensity
from specsim.costs import SEQUENTIAL, ConstantCost
from specsim.engine import residual
from specsim.families import family_of
from specsim.grid import Grid, Point
from specsim.grid import worked_example as worked_example_settings
from specsim.measures.long_run import exact_curve
from specsim.precision import covers, first_max
from specsim.tables.points import KEYS, sort_rows, study_points

GAMMA_MAX_CLOSED_FORM = 64


def equivalence(grid: Grid, points: pd.DataFrame) -> pd.DataFrame:
    df = study_points(grid, points, "equivalence")
    df["trials_total"] = df["trials_total"].astype("int64")
    cols = ["study", *KEYS, "trials_total", "tv_exact", "tv_mc", "tv_floor", "g_statistic",
            "g_df", "p_value", "verdict", "power", "p_value_vs_exact", "exact_method"]
    return sort_rows(df[cols], ["study", *KEYS])


def first_token(grid: Grid, points: pd.DataFrame) -> pd.DataFrame:
    """The seed program's first-token marginal table, target vs speculative, per rule."""
    df = study_points(grid, points, "equivalence")
    rows = []
    for _, r in df.iterrows():
        for tok, (t, s) in enumerate(zip(r["first_token_target"], r["first_token_mc"],
                                         strict=True)):
            rows.append({**{k: r[k] for k in ["study", *KEYS]}, "token": tok,
                         "target": t, "speculative": s, "diff": s - t})
    return sort_rows(pd.DataFrame(rows), ["study", *KEYS, "token"])


def _long_run(grid: Grid, points: pd.DataFrame, analysis: str) -> pd.DataFrame:
    df = study_points(grid, points, analysis)
    df["alpha_exact"] = np.where(df["alpha"].notna(), df["alpha"], df["accept_rate_exact"])
    df["tokens_closed_form"] = exact.expected_tokens(df["alpha_exact"].to_numpy(float),
                                                     df["gamma"].to_numpy(float))
    df["tokens_closed_form_mc"] = exact.expected_tokens(df["accept_rate"].to_numpy(float),
                                                        df["gamma"].to_numpy(float))
    df["jensen_gap"] = df["tokens_exact"] - df["tokens_closed_form"]
    df["covered"] = covers(df["tokens_ci_low"], df["tokens_ci_high"], df["tokens_exact"])
    return df


def accept_curve(grid: Grid, points: pd.DataFrame) -> pd.DataFrame:
    df = _long_run(grid, points, "accept_curve")
    df["rounds_total"] = df["rounds_total"].astype("int64")
    cols = ["study", *KEYS, "family", "rounds_total", "accept_rate", "accept_ci_low",
            "accept_ci_high",
            "accept_fraction", "tokens_per_round", "tokens_ci_low", "tokens_ci_high",
            "tokens_se", "batches", "tokens_exact", "tokens_exact_se", "tokens_closed_form",
            "tokens_closed_form_mc",
            "jensen_gap", "covered", "alpha_exact", "alpha_bar", "alpha_fit", "alpha_fit_low",
            "alpha_fit_high", "alpha_moment", "max_tokens_observed", "exact_method"]
    return sort_rows(df[cols], ["study", *KEYS])


def _with_c(df: pd.DataFrame) -> pd.DataFrame:
    df = df.explode("c_list").rename(columns={"c_list": "c"})
    df["c"] = df["c"].astype(float)
    cost = ConstantCost(df["c"]).total(df["gamma"], 1, SEQUENTIAL)  # 1 + γ c
    df["speedup"] = df["tokens_per_round"] / cost
    df["speedup_ci_low"] = df["tokens_ci_low"] / cost
    df["speedup_ci_high"] = df["tokens_ci_high"] / cost
    df["speedup_exact"] = df["tokens_exact"] / cost
    return df


def temperature(grid: Grid, points: pd.DataFrame) -> pd.DataFrame:
    df = _with_c(_long_run(grid, points, "temperature"))
    cols = ["study", *KEYS, "c", "accept_rate", "accept_ci_low", "accept_ci_high",
            "accept_rate_exact", "accept_fraction", "accept_fraction_ci_low",
            "accept_fraction_ci_high", "tokens_per_round", "tokens_ci_low", "tokens_ci_high",
            "tokens_exact", "speedup", "speedup_exact", "alpha_bar"]
    return sort_rows(df[cols], ["study", *KEYS, "c"])


def optimal_k(grid: Grid, points: pd.DataFrame) -> pd.DataFrame:
    """Best γ per (model, α, T, c): simulated, exact over the study's γ, closed form over 1..64.

    ``gamma_tied`` lists the γ whose simulated speedup is within two standard errors (of the
    difference) of the simulated optimum: the optimum cannot be told apart from them.
    """
    df = _with_c(_long_run(grid, points, "optimal_k"))
    df["speedup_se"] = df["tokens_se"] / (1.0 + df["gamma"] * df["c"])
    group = ["study", "model", "draft", "knob", "alpha", "temperature", "rule", "c"]
    rows = []
    for key, g in df.groupby(group, dropna=False, sort=True):
        g = g.sort_values("gamma", kind="mergesort")  # exact ties go to the smallest γ
        best = g.iloc[int(np.argmax(g["speedup"].to_numpy()))]  # Monte Carlo: same bits anywhere
        best_exact = g.iloc[first_max(g["speedup_exact"].to_numpy())]
        diff_se = np.sqrt(g["speedup_se"] ** 2 + best["speedup_se"] ** 2)
        tied = g.loc[best["speedup"] - g["speedup"] <= 2 * diff_se, "gamma"]
        row = dict(zip(group, key, strict=True))
        alpha_cf = best["alpha_exact"]
        g_cf, s_cf = exact.optimal_gamma(alpha_cf, row["c"], GAMMA_MAX_CLOSED_FORM)
        row |= {
            "gammas": ";".join(str(int(v)) for v in sorted(g["gamma"])),
            "gamma_opt": int(best["gamma"]),
            "speedup_opt": float(best["speedup"]),
            "speedup_opt_ci_low": float(best["speedup_ci_low"]),
            "speedup_opt_ci_high": float(best["speedup_ci_high"]),
            "gamma_tied": ";".join(str(int(v)) for v in sorted(tied)),
            "gamma_opt_exact": int(best_exact["gamma"]),
            "speedup_opt_exact": float(best_exact["speedup_exact"]),
            "exact_in_tied": int(best_exact["gamma"]) in set(tied.astype(int)),
            "alpha_exact": float(alpha_cf),
            "gamma_opt_closed_form": int(g_cf),
            "speedup_opt_closed_form": float(s_cf),
        }
        rows.append(row)
    return pd.DataFrame(rows)


def optimal_k_curve(grid: Grid, points: pd.DataFrame) -> pd.DataFrame:
    """Speedup per γ behind optimal_k.csv (the program's demo 4 table), simulated and exact."""
    df = _with_c(_long_run(grid, points, "optimal_k"))
    cols = ["study", *KEYS, "c", "accept_rate", "tokens_per_round", "tokens_ci_low",
            "tokens_ci_high", "tokens_exact", "speedup", "speedup_ci_low", "speedup_ci_high",
            "speedup_exact"]
    return sort_rows(df[cols], ["study", *KEYS, "c"])


def optimal_k_exact(grid: Grid, points: pd.DataFrame) -> pd.DataFrame:
    """Stationary exact tokens per round at every γ from 1 to the study's largest, per
    (model, draft knob, α, temperature, rule) of the optimal_k studies: the curves of the
    optimal_k figure, between and beyond the simulated γ (Eq. 1 for calibrated drafts, the
    family's exact method otherwise: :func:`specsim.measures.long_run.exact_curve`)."""
    by_id = {p.point_id: p for p in grid.points}
    budget, root = grid.config["budget"], int(grid.config["seed"])
    rows = []
    for name, study in grid.studies.items():
        if study["analysis"] != "optimal_k":
            continue
        longest: dict[tuple, Point] = {}  # per curve, its point with the largest γ
        for pid in study["points"]:
            p = by_id[pid]
            key = (p.model, p.draft_knob, p.alpha, p.temperature, p.rule)
            if key not in longest or p.gamma > longest[key].gamma:
                longest[key] = p
        for p in longest.values():
            gammas = np.arange(1, p.gamma + 1)
            tokens, method = exact_curve(p, gammas, budget, root)
            rec = p.to_record()
            rows += [{"study": name, **{k: rec[k] for k in KEYS}, "gamma": int(g),
                      "tokens_stationary": float(t), "exact_method": method}
                     for g, t in zip(gammas, tokens, strict=True)]
    if not rows:
        raise ValueError("no study in the config has analysis 'optimal_k'")
    return sort_rows(pd.DataFrame(rows), ["study", *KEYS])


def break_even(grid: Grid, points: pd.DataFrame) -> pd.DataFrame:
    """c* = (E[tokens] - 1)/γ: simulated with CI, exact, and for calibrated drafts Eq. 1."""
    df = _long_run(grid, points, "break_even")
    g = df["gamma"]
    df["c_star"] = (df["tokens_per_round"] - 1) / g
    df["c_star_ci_low"] = (df["tokens_ci_low"] - 1) / g
    df["c_star_ci_high"] = (df["tokens_ci_high"] - 1) / g
    df["c_star_exact"] = (df["tokens_exact"] - 1) / g
    df["c_star_closed_form"] = (df["tokens_closed_form"] - 1) / g
    df["c_star_se"] = df["tokens_se"] / g
    cols = ["study", *KEYS, "tokens_per_round", "tokens_exact", "c_star", "c_star_ci_low",
            "c_star_ci_high", "c_star_se", "batches", "c_star_exact", "c_star_closed_form",
            "alpha_exact"]
    return sort_rows(df[cols], ["study", *KEYS])


def speedup_vs_c(grid: Grid, points: pd.DataFrame) -> pd.DataFrame:
    """The program's demo 5: speedup at each configured c, and whether decoding got slower."""
    df = _with_c(_long_run(grid, points, "break_even"))
    df["slower"] = df["speedup_ci_high"] < 1.0
    cols = ["study", *KEYS, "c", "speedup", "speedup_ci_low", "speedup_ci_high",
            "speedup_exact", "slower"]
    return sort_rows(df[cols], ["study", *KEYS, "c"])


TABLE1_ALPHAS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
TABLE1_GAMMAS = (1, 2, 3, 5, 7, 10)


def leviathan_table1(grid: Grid, points: pd.DataFrame) -> pd.DataFrame:
    """Leviathan et al. 2022 Thm 3.8 (speed) and Thm 3.11 (operations) at c = ĉ = 0."""
    df = pd.DataFrame(exact.table1_rows(TABLE1_ALPHAS, TABLE1_GAMMAS))
    df["gamma"] = df["gamma"].astype(int)
    df["tokens_per_call"] = exact.expected_tokens(df["alpha"].to_numpy(), df["gamma"].to_numpy())
    return df


def intensity_table(grid: Grid, points: pd.DataFrame) -> pd.DataFrame:
    return intensity.intensity_table()


def roofline(grid: Grid, points: pd.DataFrame) -> pd.DataFrame:
    return intensity.ridge_table()


def _token_names(vocab: int) -> list[str]:
    """The program's token names: a, b, c, ... (indices beyond 26 tokens)."""
    return [chr(ord("a") + i) for i in range(vocab)] if vocab <= 26 else \
        [str(i) for i in range(vocab)]


def worked_example(grid: Grid, points: pd.DataFrame) -> pd.DataFrame:
    """The program's demo 1: p, q, accept probability min(1, p/q) and residual, in one context
    of the model that config's ``worked_example`` names (defaults:
    :func:`specsim.grid.worked_example`)."""
    cfg = worked_example_settings(
        grid.config, {name: grid.model_spec(name) for name in grid.config["models"]})
    spec = grid.model_spec(cfg["model"])
    p, q = family_of(spec).example_rows(spec, float(cfg["temperature"]), cfg["alpha"],
                                        int(cfg["context"]))
    return pd.DataFrame({
        "token": _token_names(spec.vocab),
        "p": p,
        "q": q,
        "accept_prob": np.minimum(1.0, p / q),
        "p_minus_q": p - q,
        "residual": residual(p, q),
        "accepted_mass": np.minimum(p, q),
        "residual_mass": (1 - np.minimum(p, q).sum()) * residual(p, q),
    })


def argmax_drafting(grid: Grid, points: pd.DataFrame) -> pd.DataFrame:
    """Sampled against argmax drafting, per (model, knob, α, γ, T, rule) of the ``drafting``
    studies: each mode's simulated tokens per call (95% CI) and exact value, the ratio argmax /
    sample, and each mode's mean acceptance (Σ min(p, q) against p(argmax q))."""
    keys = ["study", "model", "knob", "alpha", "gamma", "temperature", "rule"]
    per_mode = ["tokens_per_round", "tokens_ci_low", "tokens_ci_high", "tokens_exact",
                "covered", "alpha_bar"]
    cols = [*keys, "draft", *(f"{c}_{m}" for m in ("sample", "argmax") for c in per_mode),
            "ratio", "ratio_exact", "winner_exact"]
    try:
        df = _long_run(grid, points, "drafting")
    except ValueError:  # no drafting study in the config
        return pd.DataFrame(columns=cols)
    rows = []
    for key, g in df.groupby(keys, dropna=False, sort=True):
        by = {r["drafting"]: r for _, r in g.iterrows()}
        if set(by) != {"sample", "argmax"}:
            continue  # a study that runs one mode only has nothing to compare here
        s, a = by["sample"], by["argmax"]
        row = dict(zip(keys, key, strict=True)) | {"draft": s["draft"]}
        for mode, r in (("sample", s), ("argmax", a)):
            row |= {f"{c}_{mode}": r[c] for c in per_mode}
        row["ratio"] = a["tokens_per_round"] / s["tokens_per_round"]
        row["ratio_exact"] = a["tokens_exact"] / s["tokens_exact"]
        # within EXACT_RTOL the exact values are equal (T = 0: both draft the argmax)
        row["winner_exact"] = ("tie" if bool(covers(s["tokens_exact"], s["tokens_exact"],
                                                    a["tokens_exact"]))
                               else "argmax" if a["tokens_exact"] > s["tokens_exact"]
                               else "sample")
        rows.append(row)
    return sort_rows(pd.DataFrame(rows, columns=cols), keys)
