"""Exact values per grid point, and the join of shards + exact values into per-point estimates.

``results/exact/points.parquet``  exact (DP / enumeration / closed form / labelled quadrature)
``results/points.parquet``        Monte Carlo estimates with confidence intervals beside them
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from specsim import exact, stats
from specsim.grid import Grid, Point
from specsim.io import ShardError, atomic_path, read_shards
from specsim.models import iid_pairs, markov_pair
from specsim.simulate import equivalence_model


def round_tokens(gamma: int, rule: str) -> np.ndarray:
    """Tokens emitted in a round with k = 0..γ accepted drafts."""
    k = np.arange(gamma + 1)
    if rule == "continue":
        return np.where(k < gamma, gamma, gamma + 1)
    return k + 1


def _truncated_geometric_moments(b: np.ndarray, gamma: int, rule: str) -> dict[str, np.ndarray]:
    """Per-round means when every position accepts independently with probability b."""
    powers = b[..., None] ** np.arange(gamma + 1)  # b^0..b^γ
    law = np.concatenate([powers[..., :gamma] * (1 - b[..., None]), powers[..., gamma:]], -1)
    k = np.arange(gamma + 1)
    return {
        "tokens": law @ round_tokens(gamma, rule),
        "accepted": law @ k,
        "trials": law @ np.minimum(k + 1, gamma),
    }


def _iid_reference(point: Point, root_seed: int, pairs: int) -> dict[str, Any]:
    """Monte Carlo quadrature over the stub's (p, q) distribution -- labelled, with its error."""
    spec = point.spec
    rng = np.random.default_rng(point.seed(root_seed).spawn(1)[0].generate_state(4))
    p, q = iid_pairs(spec, point.temperature, point.alpha, rng, (pairs,))
    if point.rule == "greedy":
        b = np.take_along_axis(q, p.argmax(axis=1)[:, None], axis=1)[:, 0]
    else:
        b = np.minimum(p, q).sum(axis=1)
    g, rule = point.gamma, point.rule
    if spec.share == "round":  # one pair per round: average the per-round law (Jensen)
        m = _truncated_geometric_moments(b, g, rule)
        tokens = float(m["tokens"].mean())
        se = float(m["tokens"].std(ddof=1) / np.sqrt(b.size))
        acc, trials = float(m["accepted"].mean()), float(m["trials"].mean())
    else:  # a fresh pair per position: positions independent with the mean acceptance
        mb = _truncated_geometric_moments(np.array(b.mean()), g, rule)
        tokens, acc, trials = float(mb["tokens"]), float(mb["accepted"]), float(mb["trials"])
        # delta method: d tokens / d mean-beta by a central difference, times SE(mean beta)
        h = 1e-6
        up, down = (float(_truncated_geometric_moments(np.array(b.mean() + d), g, rule)["tokens"])
                    for d in (h, -h))
        se = abs(up - down) / (2 * h) * float(b.std(ddof=1) / np.sqrt(b.size))
    return {
        "tokens_exact": tokens,
        "tokens_exact_se": se,
        "accept_rate_exact": acc / trials,
        "accept_fraction_exact": acc / g,
        "alpha_bar": float(b.mean()),
        "tokens_stationary": tokens,
        "exact_method": f"quadrature_mc(n={b.size})",
    }


def _exact_long_run(point: Point, root_seed: int, budget: dict[str, Any]) -> dict[str, Any]:
    if not point.spec.is_markov:
        return _iid_reference(point, root_seed, int(budget["quadrature_pairs"]))
    p, q = markov_pair(point.spec, point.temperature, point.alpha)
    h = exact.horizon_average(p, q, point.gamma, point.rule, 0, int(budget["burn_in"]),
                              int(budget["rounds"]))
    try:  # the limit a long simulation converges to, where the round-start chain has one
        lr = exact.long_run(p, q, point.gamma, point.rule)
        stationary_tokens, alpha_bar = lr.tokens_per_round, lr.alpha_bar
    except ValueError:
        stationary_tokens = alpha_bar = np.nan
    return {
        "tokens_exact": h.tokens_per_round,
        "tokens_exact_se": 0.0,
        "tokens_stationary": stationary_tokens,
        "accept_rate_exact": h.accepted_per_round / h.trials_per_round,
        "accept_fraction_exact": h.accepted_per_round / point.gamma,
        "alpha_bar": alpha_bar,
        "exact_method": "dp_horizon",
    }


def _collapse(joint: np.ndarray, token_of: np.ndarray, vocab: int) -> np.ndarray:
    """Sum a joint law over states (S, S) into tokens (V, V)."""
    out = np.zeros((vocab, vocab))
    np.add.at(out, (token_of[:, None], token_of[None, :]), joint)
    return out


def _exact_equivalence(point: Point, max_cells: int) -> dict[str, Any]:
    p, q, start, token_of = equivalence_model(point)
    target = _collapse(exact.target_joint(p, start, 2), token_of, point.spec.vocab)
    try:
        law = exact.first_tokens_distribution(p, q, start, point.gamma, point.rule, n=2,
                                              max_cells=max_cells)
    except ValueError as err:  # too large to enumerate: Monte Carlo only, said so
        return {"joint_target": target.ravel().tolist(), "joint_exact": [],
                "tv_exact": np.nan, "exact_method": f"mc_only ({err})"}
    rule_joint = _collapse(law, token_of, point.spec.vocab)
    return {
        "joint_target": target.ravel().tolist(),
        "joint_exact": rule_joint.ravel().tolist(),
        "tv_exact": exact.tv(rule_joint, target),
        "exact_method": "enumeration",
    }


def exact_points(grid: Grid, out: str) -> None:
    root = int(grid.config["seed"])
    max_cells = int(grid.config["budget"]["max_enumeration"])
    rows = []
    for point in grid.points:
        row: dict[str, Any] = {"point_id": point.point_id}
        if point.measure == "equivalence":
            row |= _exact_equivalence(point, max_cells)
        else:
            row |= _exact_long_run(point, root, grid.config["budget"])
        if point.alpha is not None:
            row["tokens_closed_form"] = float(exact.expected_tokens(point.alpha, point.gamma))
        rows.append(row)
    df = pd.DataFrame(rows)
    with atomic_path(out) as tmp:
        df.to_parquet(tmp, index=False)


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
        "alpha_moment": float(stats.alpha_from_tokens(tok, g)) if rule != "continue"
        else np.nan,
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


def collect(grid: Grid, shard_paths: list[str], exact_path: str, out: str) -> None:
    """Join shards, exact values and the grid; refuse missing, foreign or duplicated points."""
    sims = read_shards(shard_paths, grid.config_digest)
    want = {p.point_id for p in grid.points}
    got = list(sims["point_id"])
    if len(got) != len(set(got)):
        raise ShardError("the shards contain duplicated points; delete results/shards and rerun")
    if set(got) != want:
        missing, extra = want - set(got), set(got) - want
        raise ShardError(f"the shards do not match the grid: {len(missing)} points missing, "
                         f"{len(extra)} not in the grid (e.g. {sorted(missing | extra)[:3]})")
    grid_df = pd.DataFrame([p.to_record() for p in grid.points]).drop(columns=["spec"])
    exact_df = pd.read_parquet(exact_path)
    df = grid_df.merge(sims.drop(columns=["measure", "gamma"]), on="point_id", how="left")
    df = df.merge(exact_df, on="point_id", how="left")
    level = float(grid.config["significance"])
    est = []
    for _, row in df.iterrows():
        if row["measure"] == "long_run":
            est.append(_long_run_estimates(row))
        else:
            est.append(_equivalence_estimates(row, level))
    df = pd.concat([df.reset_index(drop=True), pd.DataFrame(est)], axis=1)
    df = df.drop(columns=["accepted_hist"]).sort_values("point_id").reset_index(drop=True)
    with atomic_path(out) as tmp:
        df.to_parquet(tmp, index=False)
