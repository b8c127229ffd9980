"""Exact reference values of one grid point: what its Monte Carlo estimate must agree with.

Markov and custom tables: the finite-horizon average of exactly what the simulation reports
(:func:`specsim.exact.horizon_average`), the stationary limit where one exists, and for the
equivalence measure the enumerated law of the first two emitted tokens. The i.i.d. stub has no
finite state space, so its reference is a labelled Monte Carlo quadrature over its (p, q)
distribution, reported with its own standard error.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specsim import exact
from specsim.grid import Point
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


def exact_point(point: Point, budget: dict[str, Any], root_seed: int) -> dict[str, Any]:
    """The exact reference record of one point (``results/exact/<point>.parquet``)."""
    row: dict[str, Any] = {"point_id": point.point_id}
    if point.measure == "equivalence":
        row |= _exact_equivalence(point, int(budget["max_enumeration"]))
    else:
        row |= _exact_long_run(point, root_seed, budget)
    if point.alpha is not None:
        row["tokens_closed_form"] = float(exact.expected_tokens(point.alpha, point.gamma))
    return row
