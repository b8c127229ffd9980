"""What the exact layers share: checked tables and draft lengths, and the one-position kernels
of a rule's accept step and rejection law (:func:`kernels`), per context of Markov tables or per
position of given rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.verify import (
    CLASSIC_RULES,
    Rule,
    acceptance_probability,
    rejection_distribution,
    residual,
    rule_spec,
)

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
RULES: Final[tuple[Rule, ...]] = CLASSIC_RULES  # the schemes have their own laws

_ROW_SUM_TOL: Final = 1e-9


def as_output(x: FloatArray) -> float | FloatArray:
    """Return a Python float for 0-d results, the array otherwise."""
    return float(x) if x.ndim == 0 else x


def check_table(T: ArrayLike, name: str) -> FloatArray:
    """A square row-stochastic table as float64; ValueError naming ``name`` otherwise."""
    A = np.asarray(T, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] == 0:
        raise ValueError(f"{name} must be a square (V, V) table, got shape {A.shape}")
    if not np.all(np.isfinite(A)) or np.any(A < 0.0):
        raise ValueError(f"{name} must be finite and non-negative")
    if np.any(np.abs(A.sum(axis=1) - 1.0) > _ROW_SUM_TOL):
        raise ValueError(f"{name} rows must sum to 1 (tolerance {_ROW_SUM_TOL})")
    return A


def check_pair(P: ArrayLike, Q: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Target and draft tables (:func:`check_table`) of one shape."""
    Pa, Qa = check_table(P, "P"), check_table(Q, "Q")
    if Pa.shape != Qa.shape:
        raise ValueError(f"P and Q shapes differ: {Pa.shape} vs {Qa.shape}")
    return Pa, Qa


def check_rule(rule: str) -> Rule:
    """One of the classic rules (:data:`RULES`), or a ValueError naming them."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; expected one of {RULES}")
    return cast("Rule", rule)


def check_gamma(gamma: int) -> int:
    """A draft length: an integer >= 1."""
    if int(gamma) != gamma or gamma < 1:
        raise ValueError(f"gamma must be an integer >= 1, got {gamma!r}")
    return int(gamma)


def context_acceptance(P: ArrayLike, Q: ArrayLike) -> FloatArray:
    """[L] Def 3.1 / Thm 3.5: beta(s) = sum_x min(P[s, x], Q[s, x]) per context s."""
    Pa, Qa = check_pair(P, Q)
    return np.minimum(Pa, Qa).sum(axis=1)


def residual_table(P: ArrayLike, Q: ArrayLike) -> FloatArray:
    """[L] Alg 1 / [C] Alg 2: rows norm(max(P - Q, 0)); rows with zero mass fall back to P."""
    Pa, Qa = check_pair(P, Q)
    return residual(Pa, Qa)  # specsim.verify.residual: the one residual


@dataclass(frozen=True)
class Kernels:
    """Sub-stochastic one-position kernels shared by the round DP and the prefix laws."""

    acc: FloatArray  # acc[c, x]: mass of "draft x from context c and accept it"
    rej: FloatArray  # rej[c, x]: mass of "draft x from context c and reject it"
    rho: FloatArray  # rho[c] = rej[c].sum(): rejection probability in context c
    final: FloatArray  # final[c, y]: law of the token emitted on rejection in context c


def kernels(P: FloatArray, Q: FloatArray, rule: Rule) -> Kernels:
    """Per row (context, or position) of P, Q (..., V): the rule's accept step as masses
    q(x) a(x) with a = :func:`specsim.verify.acceptance_probability` (written min(p, q) for the
    ratio rules, which is q min(1, p/q) without rounding), and its rejection distribution."""
    spec = rule_spec(rule)
    if spec.accept == "argmax":
        acc = Q * acceptance_probability(P, Q, rule)
        rej = Q - acc
    else:
        acc = np.minimum(P, Q)  # q[x] * min(1, p[x]/q[x])
        rej = np.maximum(Q - P, 0.0)  # q[x] - min(p[x], q[x])
    final = rejection_distribution(P, Q, rule)
    return Kernels(acc=acc, rej=rej, rho=rej.sum(axis=-1), final=final)
