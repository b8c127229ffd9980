"""[L] Alg. 1 rounds on Markov tables: the exact law of one round from every start context by a
forward DP over positions, the stationary law of round starts, and the long-run and finite-
horizon rates (renewal-reward)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from specsim.exact.kernels import (
    FloatArray,
    check_gamma,
    check_pair,
    check_rule,
    check_table,
    context_acceptance,
    kernels,
)
from specsim.verify import Rule, rule_spec


@dataclass(frozen=True)
class RoundLaw:
    """Exact law of one speculative round, per start context ``s`` (rows).

    accepted[s, k]     P(k drafts accepted), k = 0..gamma.
    tokens[s, k]       P(k tokens emitted), k = 0..gamma+1 (index 0 is always 0).
    next_context[s, t] P(next round starts at t) (row-stochastic).
    trials[s]          E[#accept decisions] = E[min(accepted + 1, gamma)].
    """

    rule: Rule
    gamma: int
    accepted: FloatArray
    tokens: FloatArray
    next_context: FloatArray
    trials: FloatArray

    @property
    def mean_accepted(self) -> FloatArray:
        """E[accepted | s] (per start context)."""
        return self.accepted @ np.arange(self.gamma + 1, dtype=np.float64)

    @property
    def mean_tokens(self) -> FloatArray:
        """E[tokens | s] (per start context)."""
        return self.tokens @ np.arange(self.gamma + 2, dtype=np.float64)


def round_law(P: ArrayLike, Q: ArrayLike, gamma: int, rule: str = "correct") -> RoundLaw:
    """Exact one-round law by forward DP over positions ([L] Alg 1 for Markov P, Q).

    Carries ``A_i[s, c]`` = P(start s, first i drafts accepted, current context c); each step
    is one (V, V) matmul, so the cost is O(gamma V^3). For ``continue`` a rejection at position
    i < gamma - 1 leaves the last *drafted* token x_gamma as next context, whose law is
    ``A_i @ rej @ Q^(gamma-1-i)`` (the remaining drafts were drawn from Q after the rejected
    draft, not after the residual token).
    """
    Pa, Qa = check_pair(P, Q)
    g = check_gamma(gamma)
    r = check_rule(rule)
    k = kernels(Pa, Qa, r)
    V = Pa.shape[0]
    emit_on_reject = k.rho[:, None] * k.final
    cont_next: list[FloatArray] = []
    keep = rule_spec(r).keep_drafts
    if keep:  # cont_next[j] = rej @ Q^j, needed for j = gamma-1-i >= 1
        m = k.rej
        for _ in range(g):
            cont_next.append(m)
            m = m @ Qa
    A = np.eye(V)
    accepted = np.zeros((V, g + 1))
    nxt = np.zeros((V, V))
    for i in range(g):
        accepted[:, i] = A @ k.rho
        if keep and i < g - 1:
            nxt += A @ cont_next[g - 1 - i]
        else:
            nxt += A @ emit_on_reject
        A = A @ k.acc
    accepted[:, g] = A.sum(axis=1)
    nxt += A @ Pa  # bonus token after gamma acceptances
    tokens = np.zeros((V, g + 2))
    if keep:
        tokens[:, g] = accepted[:, :g].sum(axis=1)
        tokens[:, g + 1] = accepted[:, g]
    else:
        tokens[:, 1:] = accepted
    trials = accepted @ np.minimum(np.arange(1, g + 2), g).astype(np.float64)
    return RoundLaw(
        rule=r, gamma=g, accepted=accepted, tokens=tokens, next_context=nxt, trials=trials
    )


def stationary(K: ArrayLike, tol: float = 1e-9) -> FloatArray:
    """Stationary law pi K = pi, sum pi = 1, by least squares on [K^T - I; 1^T] pi = [0; 1].

    Raises ValueError when the solution is not unique (more than one closed class, detected as
    a rank-deficient system) or the residual exceeds ``tol``.
    """
    Ka = check_table(K, "K")
    V = Ka.shape[0]
    M = np.vstack([Ka.T - np.eye(V), np.ones((1, V))])
    b = np.zeros(V + 1)
    b[-1] = 1.0
    sv = np.linalg.svd(M, compute_uv=False)
    if sv[-1] <= tol * max(sv[0], 1.0):
        raise ValueError(
            f"stationary law not unique: smallest singular value {sv[-1]:.3e} of [K^T - I; 1^T]"
        )
    pi, *_ = np.linalg.lstsq(M, b, rcond=None)
    resid = float(np.abs(M @ pi - b).max())
    if resid > tol or np.any(pi < -tol):
        raise ValueError(f"stationary solve failed: residual {resid:.3e}, min {pi.min():.3e}")
    pi = np.clip(pi, 0.0, None)
    return np.asarray(pi / pi.sum(), dtype=np.float64)


@dataclass(frozen=True)
class LongRun:
    """Long-run (stationary round-start) averages of a rule; ratios are of long-run means."""

    rule: Rule
    gamma: int
    pi: FloatArray  # stationary law of the round's start context
    tokens_per_round: float  # = tokens per target call
    accepted_per_round: float
    trials_per_round: float
    accept_fraction: float  # accepted / gamma
    accept_rate: float  # accepted / trials
    alpha_bar: float  # sum_s pi(s) beta(s)


def long_run(P: ArrayLike, Q: ArrayLike, gamma: int, rule: str = "correct") -> LongRun:
    """Renewal-reward over the round-start chain: rate = pi . E[reward | s] ([L] Eq. 1 analogue)."""
    law = round_law(P, Q, gamma, rule)
    pi = stationary(law.next_context)
    acc = float(pi @ law.mean_accepted)
    trials = float(pi @ law.trials)
    return LongRun(
        rule=law.rule,
        gamma=law.gamma,
        pi=pi,
        tokens_per_round=float(pi @ law.mean_tokens),
        accepted_per_round=acc,
        trials_per_round=trials,
        accept_fraction=acc / law.gamma,
        accept_rate=acc / trials,
        alpha_bar=float(pi @ context_acceptance(P, Q)),
    )


@dataclass(frozen=True)
class HorizonAverage:
    """Exact expectations of the per-round averages a finite simulation reports."""

    weights: FloatArray  # average law of the round-start context over the counted rounds
    tokens_per_round: float
    accepted_per_round: float
    trials_per_round: float


def horizon_average(
    P: ArrayLike, Q: ArrayLike, gamma: int, rule: str, start: int, burn_in: int, rounds: int
) -> HorizonAverage:
    """Exact mean over rounds burn_in..burn_in+rounds-1 of chains started at context ``start``.

    This is the expectation of exactly what the engine estimates (no stationarity assumed), so
    it stays defined for reducible or periodic round-start chains (e.g. greedy decoding, T = 0),
    where :func:`stationary` has no unique answer. Cost: (burn_in + rounds) V x V products.
    """
    law = round_law(P, Q, gamma, rule)
    k = law.next_context
    dist = np.zeros(k.shape[0])
    dist[start] = 1.0
    total = np.zeros_like(dist)
    for r in range(burn_in + rounds):
        if r >= burn_in:
            total += dist
        dist = dist @ k
    w = total / rounds
    return HorizonAverage(
        weights=w,
        tokens_per_round=float(w @ law.mean_tokens),
        accepted_per_round=float(w @ law.mean_accepted),
        trials_per_round=float(w @ law.trials),
    )
