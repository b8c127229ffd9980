"""Exact reference values of one grid point: what its Monte Carlo estimate must agree with.

The long-run reference is the model family's (:meth:`specsim.families.Family.exact_long_run`):
for tables the finite-horizon DP average of exactly what the simulation reports and the
stationary limit; for the i.i.d. stub a labelled Monte Carlo quadrature with its own standard
error. The equivalence reference is the same for every family: the enumerated law of the first
two emitted tokens of the family's equivalence chain (Leviathan et al. 2022 Thm 3.5 says the
correct rule's law is the target's). :func:`exact_curve` gives the stationary exact tokens of a
point's model at other draft lengths, for the tables that figures draw curves from.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specsim import exact
from specsim.exact import round_tokens
from specsim.grid import Point
from specsim.simulate import equivalence_model

__all__ = ["collapse", "exact_curve", "exact_point", "round_tokens", "target_first_two"]


def collapse(joint: np.ndarray, token_of: np.ndarray, vocab: int) -> np.ndarray:
    """Sum a joint law over states (S, S) into tokens (V, V)."""
    out = np.zeros((vocab, vocab))
    np.add.at(out, (token_of[:, None], token_of[None, :]), joint)
    return out


def target_first_two(p: np.ndarray, start: int, token_of: np.ndarray, vocab: int) -> np.ndarray:
    """The target's exact joint law of the first two emitted tokens (V, V) ([L] Thm 3.5's
    reference) from ``start`` of an equivalence chain."""
    return collapse(exact.target_joint(p, start, 2), token_of, vocab)


def _exact_equivalence(point: Point, max_cells: int) -> dict[str, Any]:
    p, q, start, token_of = equivalence_model(point)
    target = target_first_two(p, start, token_of, point.spec.vocab)
    try:
        law = exact.first_tokens_distribution(p, q, start, point.gamma, point.rule, n=2,
                                              max_cells=max_cells)
    except ValueError as err:  # too large to enumerate: Monte Carlo only, said so
        return {"joint_target": target.ravel().tolist(), "joint_exact": [],
                "tv_exact": np.nan, "exact_method": f"mc_only ({err})"}
    rule_joint = collapse(law, token_of, point.spec.vocab)
    return {
        "joint_target": target.ravel().tolist(),
        "joint_exact": rule_joint.ravel().tolist(),
        "tv_exact": exact.tv(rule_joint, target),
        "exact_method": "enumeration",
    }


def exact_point(point: Point, budget: dict[str, Any], root_seed: int) -> dict[str, Any]:
    """The exact reference record of one point (``results/exact/<point>.parquet``)."""
    if point.measure == "scheme":  # a schemes study's rule and policy
        from specsim.schemes.measure import exact_scheme
        return exact_scheme(point, budget)
    row: dict[str, Any] = {"point_id": point.point_id}
    if point.measure == "equivalence":
        row |= _exact_equivalence(point, int(budget["max_enumeration"]))
    else:
        row |= point.family.exact_long_run(point, root_seed, budget)
    if point.alpha is not None:
        row["tokens_closed_form"] = float(exact.expected_tokens(point.alpha, point.gamma))
    return row


def exact_curve(point: Point, gammas: np.ndarray, budget: dict[str, Any],
                root_seed: int) -> tuple[np.ndarray, str]:
    """Stationary exact tokens per round of the point's model, α, temperature and rule at
    each draft length in ``gammas``, and how they were obtained.

    A calibrated draft accepts with probability exactly α in every context, so Leviathan et al.
    2022 Eq. 1, E[tokens] = (1 - α^(γ+1)) / (1 - α), is exact for every family; otherwise the
    family's own method (:meth:`specsim.families.Family.exact_curve`).
    """
    if point.alpha is not None:
        return np.asarray(exact.expected_tokens(point.alpha, gammas), dtype=np.float64), "Eq. 1"
    return point.family.exact_curve(point, np.asarray(gammas), root_seed, budget)
