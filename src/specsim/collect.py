"""The join of every point's Monte Carlo and exact files into per-point estimates.

``results/sim/<point>.parquet`` + ``results/exact/<point>.parquet`` (one pair per grid point,
each verified: schema, payload checksum, identity digest) -> ``results/points.parquet``, the
Monte Carlo estimates with confidence intervals beside the exact values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from specsim import exact, stats
from specsim.grid import Grid
from specsim.io import SCHEMAS, point_kinds, read_point_file, write_frame
from specsim.job import describe
from specsim.reference import round_tokens
from specsim.verify import rule_spec


def _long_run_estimates(row: pd.Series) -> dict[str, Any]:
    g, rule = int(row["gamma"]), str(row["rule"])
    hist = np.asarray(row["accepted_hist"], dtype=np.int64).reshape(int(row["batches"]), g + 1)
    k = np.arange(g + 1)
    rounds_b = hist.sum(axis=1)
    tokens_b = hist @ round_tokens(g, rule)
    hits_b = hist @ k
    trials_b = hist @ np.minimum(k + 1, g)
    tok, tlo, thi, tse = stats.batch_mean_interval(tokens_b, rounds_b)
    acc, alo, ahi, _ = stats.batch_mean_interval(hits_b, trials_b)
    frac, flo, fhi, _ = stats.batch_mean_interval(hits_b, g * rounds_b)
    fit, fit_lo, fit_hi = stats.fit_alpha(hist.sum(axis=0))
    return {
        "rounds_total": int(rounds_b.sum()),
        "tokens_per_round": tok, "tokens_ci_low": tlo, "tokens_ci_high": thi,
        "tokens_se": tse,
        "accept_rate": acc, "accept_ci_low": alo, "accept_ci_high": ahi,
        "accept_fraction": frac, "accept_fraction_ci_low": flo, "accept_fraction_ci_high": fhi,
        "alpha_fit": fit, "alpha_fit_low": fit_lo, "alpha_fit_high": fit_hi,
        # Eq. 1 inverted assumes tokens = accepted + 1: not so for a rule keeping its drafts
        "alpha_moment": float(stats.alpha_from_tokens(tok, g))
        if not rule_spec(rule).keep_drafts else np.nan,
        "max_tokens_observed": int(round_tokens(g, rule)[hist.sum(axis=0) > 0].max()),
    }


def _equivalence_estimates(row: pd.Series, level: float) -> dict[str, Any]:
    v = int(row["vocab"])
    counts = np.asarray(row["joint2"], dtype=np.int64)
    target = np.asarray(row["joint_target"], dtype=np.float64)
    n = int(counts.sum())
    gof = stats.gof_test(counts, target)
    out = {
        "trials_total": n,
        "tv_mc": exact.tv(counts / n, target),
        "tv_floor": stats.tv_floor(target, n),
        "g_statistic": gof.statistic, "g_df": gof.df,
        "p_value": gof.p_value,
        "verdict": stats.verdict(gof.p_value, level),
        "first_token_mc": (counts.reshape(v, v).sum(axis=1) / n).tolist(),
        "first_token_target": target.reshape(v, v).sum(axis=1).tolist(),
    }
    rule_law = np.asarray(row["joint_exact"], dtype=np.float64)
    # Engine vs theory: the simulated counts must fit the rule's own exact law.
    out["p_value_vs_exact"] = stats.gof_test(counts, rule_law).p_value if rule_law.size else np.nan
    # How likely this sample size was to detect the rule's exact bias (1 - type II error).
    out["power"] = stats.gof_power(rule_law, target, n, level) if rule_law.size else np.nan
    return out


def _scheme_estimates(row: pd.Series, level: float) -> dict[str, Any]:
    """Tokens per target call and draft tokens per round (batch-means CIs over chains), and
    the lossless check of the first two tokens, of a ``schemes`` point."""
    w = int(row["width"])
    hist = np.asarray(row["tokens_hist"], dtype=np.int64).reshape(int(row["batches"]), w)
    rounds_b = hist.sum(axis=1)
    tokens_b = hist @ np.arange(w)
    tok, tlo, thi, tse = stats.batch_mean_interval(tokens_b, rounds_b)
    dr, dlo, dhi, _ = stats.batch_mean_interval(np.asarray(row["drafted"], dtype=np.int64),
                                                rounds_b)
    return {"rounds_total": int(rounds_b.sum()), "tokens_per_round": tok,
            "tokens_ci_low": tlo, "tokens_ci_high": thi, "tokens_se": tse,
            "drafted_per_round": dr, "drafted_ci_low": dlo, "drafted_ci_high": dhi,
            "max_tokens_observed": int(np.flatnonzero(hist.sum(axis=0)).max()),
            # per batch, for speedups at any c (tables): ratio of sums with its own CI
            "tokens_batches": tokens_b.tolist(), "rounds_batches": rounds_b.tolist(),
            "drafted_batches": list(row["drafted"]),
            } | _equivalence_estimates(row, level)


def read_points(grid: Grid, results_dir: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every point's sim and exact rows, each file verified against its point's digest."""
    base = Path(results_dir)
    rows: dict[str, list[dict[str, Any]]] = {kind: [] for kind in SCHEMAS}
    for point in grid.points:
        want = describe(grid, point)["digest"]
        for folder, kind in zip(("sim", "exact"), point_kinds(point.measure), strict=True):
            path = base / folder / f"{point.path}.parquet"
            row = read_point_file(path, kind, want)
            if row["point_id"] != point.point_id:  # digest matched, so this is a foreign file
                raise RuntimeError(f"{path}: holds point {row['point_id']}, not "
                                   f"{point.point_id}; delete it and rerun snakemake")
            rows[kind].append(row)

    def frame(*kinds: str) -> pd.DataFrame:
        parts = [pa.Table.from_pylist(rows[k], schema=SCHEMAS[k]).to_pandas() for k in kinds]
        return pd.concat([p for p in parts if len(p)] or parts[:1], ignore_index=True)

    return frame("sim", "scheme_sim"), frame("exact", "scheme_exact")


def collect(grid: Grid, results_dir: str | Path, out: str) -> None:
    """Join the grid, every point's Monte Carlo and exact files, and the estimates."""
    sims, exact_df = read_points(grid, results_dir)
    grid_df = pd.DataFrame([p.to_record() for p in grid.points]).drop(columns=["spec", "path"])
    df = grid_df.merge(sims.drop(columns=["measure", "gamma"]), on="point_id", how="left")
    df = df.merge(exact_df, on="point_id", how="left")
    level = float(grid.config["significance"])
    est = []
    for _, row in df.iterrows():
        if row["measure"] == "long_run":
            est.append(_long_run_estimates(row))
        elif row["measure"] == "scheme":
            est.append(_scheme_estimates(row, level))
        else:
            est.append(_equivalence_estimates(row, level))
    df = pd.concat([df.reset_index(drop=True), pd.DataFrame(est)], axis=1)
    df = df.drop(columns=[c for c in ("accepted_hist", "tokens_hist", "drafted") if c in df])
    df = df.sort_values("point_id").reset_index(drop=True)
    write_frame(df, out)
