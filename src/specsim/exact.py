"""Exact (sampling-free) theory of speculative decoding for order-1 Markov "models".

Sources: Leviathan, Kalman & Matias 2022, "Fast Inference from Transformers via Speculative
Decoding" (arXiv 2211.17192), cited below as [L]; Chen et al. 2023, "Accelerating Large
Language Model Decoding with Speculative Sampling" (arXiv 2302.01318), cited as [C].

Four layers:

1. Closed forms of [L] Section 3 (i.i.d. acceptance with rate ``alpha``), numpy-broadcasting.
2. An exact forward dynamic programme over one speculative round for Markov tables ``P``
   (target) and ``Q`` (draft), both ``(V, V)`` row-stochastic, where the context/state is the
   last emitted token. It yields per start context the exact law of the number of accepted
   drafts, of emitted tokens and of the next round's start context, and from the stationary
   law of the round-start chain the exact long-run rates.
3. The exact joint law of the first ``n`` emitted tokens (lossless check, [L] Thm 3.5 /
   [C] Thm 1), compared with the target's own law.
4. The exact law of one round of :func:`specsim.verify.verify` on given per-position rows
   (:func:`verify_law`), or on rows that depend on the drafted prefix (:func:`verify_law_tree`).

Round semantics (the seed program's ``verify_round``): from start context ``s`` the draft
proposes ``x_1..x_gamma`` autoregressively from ``Q``; position ``i`` (0-based) is tested in
context ``c_i`` (``c_0 = s``, ``c_i = x_i``) with ``p = P[c_i]``, ``q = Q[c_i]``:

* ``correct``: accept ``x`` w.p. ``min(1, p[x]/q[x])``; on rejection emit one token from
  ``residual(p, q) = norm(max(p - q, 0))`` (``p`` itself if that mass is 0) and stop.
* ``greedy``: accept iff ``x == argmax(p)`` (first index on ties); rejection as ``correct``.
* ``no_resample``: as ``correct`` but the rejection token is drawn from ``p``.
* ``continue``: as ``correct`` but after the residual token the remaining drafts
  ``x_{i+2}..x_gamma`` are emitted too (``gamma`` tokens in all; ``i`` counted accepted).

If all ``gamma`` drafts are accepted a bonus token is drawn from ``P[x_gamma]``. The next
round starts at the last emitted token.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.verify import (
    CLASSIC_RULES,
    ROW_TOL,
    Rule,
    acceptance_probability,
    check_round,
    check_rows,
    rejection_distribution,
    residual,
    rule_spec,
)

__all__ = [
    "RULES",
    "LongRun",
    "RoundLaw",
    "Rule",
    "VerifyLaw",
    "arithmetic_operations",
    "break_even_c",
    "context_acceptance",
    "expected_tokens",
    "first_tokens_distribution",
    "long_run",
    "optimal_gamma",
    "residual_table",
    "round_law",
    "round_tokens",
    "speedup_exists",
    "stationary",
    "table1_rows",
    "target_joint",
    "truncated_geometric_moments",
    "tv",
    "verify_law",
    "verify_law_tree",
    "walltime_improvement",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
RULES: Final[tuple[Rule, ...]] = CLASSIC_RULES  # the schemes have their own laws

_ROW_SUM_TOL: Final = 1e-9
_TIE_RTOL: Final = 1e-12


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _out(x: FloatArray) -> float | FloatArray:
    """Return a Python float for 0-d results, the array otherwise."""
    return float(x) if x.ndim == 0 else x


def _alpha(alpha: ArrayLike) -> FloatArray:
    a = np.asarray(alpha, dtype=np.float64)
    if np.any(~np.isfinite(a)) or np.any((a < 0.0) | (a > 1.0)):
        raise ValueError("alpha must lie in [0, 1]")
    return a


def _gamma(gamma: ArrayLike) -> FloatArray:
    g = np.asarray(gamma, dtype=np.float64)
    if np.any(~np.isfinite(g)) or np.any(g < 0.0):
        raise ValueError("gamma must be finite and >= 0")
    return g


def _geometric_sum(alpha: FloatArray, m: FloatArray) -> FloatArray:
    """Sum_{k<m} alpha^k = (1 - alpha^m)/(1 - alpha), = m at alpha = 1 ([L] Eq. 1 numerator).

    Uses ``-expm1(m log1p(alpha - 1))`` so the value is accurate near ``alpha = 1``.
    """
    a, mm = np.broadcast_arrays(alpha, m)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_a = np.log1p(a - 1.0)  # -inf at alpha = 0
        num = np.where(a == 0.0, np.where(mm == 0.0, 0.0, 1.0), -np.expm1(mm * log_a))
        den = 1.0 - a
        res = np.where(den == 0.0, mm, num / np.where(den == 0.0, 1.0, den))
    return np.asarray(res, dtype=np.float64)


def _check_table(T: ArrayLike, name: str) -> FloatArray:
    A = np.asarray(T, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] == 0:
        raise ValueError(f"{name} must be a square (V, V) table, got shape {A.shape}")
    if not np.all(np.isfinite(A)) or np.any(A < 0.0):
        raise ValueError(f"{name} must be finite and non-negative")
    if np.any(np.abs(A.sum(axis=1) - 1.0) > _ROW_SUM_TOL):
        raise ValueError(f"{name} rows must sum to 1 (tolerance {_ROW_SUM_TOL})")
    return A


def _check_pair(P: ArrayLike, Q: ArrayLike) -> tuple[FloatArray, FloatArray]:
    Pa, Qa = _check_table(P, "P"), _check_table(Q, "Q")
    if Pa.shape != Qa.shape:
        raise ValueError(f"P and Q shapes differ: {Pa.shape} vs {Qa.shape}")
    return Pa, Qa


def _check_rule(rule: str) -> Rule:
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; expected one of {RULES}")
    return cast("Rule", rule)


def _check_gamma_int(gamma: int) -> int:
    if int(gamma) != gamma or gamma < 1:
        raise ValueError(f"gamma must be an integer >= 1, got {gamma!r}")
    return int(gamma)


# ---------------------------------------------------------------------------------------------
# 1. closed forms
# ---------------------------------------------------------------------------------------------
def expected_tokens(alpha: ArrayLike, gamma: ArrayLike) -> float | FloatArray:
    """[L] Eq. 1: E[#tokens per round] = (1 - alpha^(gamma+1)) / (1 - alpha); gamma+1 at 1."""
    return _out(_geometric_sum(_alpha(alpha), _gamma(gamma) + 1.0))


def walltime_improvement(alpha: ArrayLike, gamma: ArrayLike, c: ArrayLike) -> float | FloatArray:
    """[L] Thm 3.8: walltime factor (1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + 1))."""
    g = _gamma(gamma)
    cc = np.asarray(c, dtype=np.float64)
    if np.any(cc < 0.0):
        raise ValueError("c must be >= 0")
    return _out(_geometric_sum(_alpha(alpha), g + 1.0) / (g * cc + 1.0))


def arithmetic_operations(
    alpha: ArrayLike, gamma: ArrayLike, c_hat: ArrayLike
) -> float | FloatArray:
    """[L] Thm 3.11: ops factor (1 - alpha)(gamma c_hat + gamma + 1) / (1 - alpha^(gamma+1))."""
    g = _gamma(gamma)
    ch = np.asarray(c_hat, dtype=np.float64)
    if np.any(ch < 0.0):
        raise ValueError("c_hat must be >= 0")
    return _out((g * ch + g + 1.0) / _geometric_sum(_alpha(alpha), g + 1.0))


def speedup_exists(alpha: ArrayLike, c: ArrayLike) -> bool | NDArray[np.bool_]:
    """[L] Cor 3.9: some integer gamma >= 1 gives walltime improvement > 1 iff alpha > c."""
    res = np.asarray(_alpha(alpha) > np.asarray(c, dtype=np.float64))
    return bool(res) if res.ndim == 0 else res


def break_even_c(tokens_per_round: ArrayLike, gamma: ArrayLike) -> float | FloatArray:
    """[L] Thm 3.8 rearranged: improvement E/(gamma c + 1) > 1 iff c < (E - 1)/gamma."""
    g = np.asarray(gamma, dtype=np.float64)
    if np.any(g <= 0.0):
        raise ValueError("gamma must be > 0")
    return _out((np.asarray(tokens_per_round, dtype=np.float64) - 1.0) / g)


def optimal_gamma(
    alpha: ArrayLike, c: ArrayLike, gamma_max: int = 64
) -> tuple[int | IntArray, float | FloatArray]:
    """[L] Sec 3.5 / Fig 3: argmax over integer gamma in 1..gamma_max of Thm 3.8's factor.

    Broadcasts over ``alpha`` and ``c``. Ties (values within a relative 1e-12 of the maximum)
    go to the smallest gamma. Returns ``(gamma_opt, improvement_at_gamma_opt)``.
    """
    gm = _check_gamma_int(gamma_max)
    a, cc = np.broadcast_arrays(_alpha(alpha), np.asarray(c, dtype=np.float64))
    gammas = np.arange(1, gm + 1, dtype=np.float64)
    imp = np.asarray(walltime_improvement(a[..., None], gammas, cc[..., None]))
    best = imp.max(axis=-1, keepdims=True)
    idx = np.argmax(imp >= best * (1.0 - _TIE_RTOL), axis=-1)
    g_opt = (idx + 1).astype(np.int64)
    val = np.take_along_axis(imp, idx[..., None], axis=-1)[..., 0]
    if g_opt.ndim == 0:
        return int(g_opt), float(val)
    return g_opt, val


def round_tokens(gamma: int, rule: str = "correct") -> IntArray:
    """Tokens emitted in a round with k = 0..γ accepted drafts: k + 1 ([L] Alg. 1: the accepted
    drafts and one residual or bonus token), or γ / γ + 1 for a rule that keeps its drafts
    after a rejection (:attr:`specsim.verify.RuleSpec.keep_drafts`)."""
    k = np.arange(gamma + 1)
    if rule_spec(rule).keep_drafts:
        return np.where(k < gamma, gamma, gamma + 1)
    return k + 1


def truncated_geometric_moments(b: ArrayLike, gamma: int,
                                rule: str = "correct") -> dict[str, FloatArray]:
    """Per-round means when every position accepts independently with probability ``b``.

    The accepted count is a geometric truncated at γ ([L] §3.1, the law behind Eq. 1):
    P(k) = b^k (1 - b) for k < γ and b^γ for k = γ. Broadcasts over ``b``; returns the mean
    tokens (:func:`round_tokens`), accepted drafts and accept decisions (min(k + 1, γ)).
    """
    b = np.asarray(b, dtype=np.float64)
    powers = b[..., None] ** np.arange(gamma + 1)  # b^0..b^γ
    law = np.concatenate([powers[..., :gamma] * (1 - b[..., None]), powers[..., gamma:]], -1)
    k = np.arange(gamma + 1)
    return {
        "tokens": law @ round_tokens(gamma, rule),
        "accepted": law @ k,
        "trials": law @ np.minimum(k + 1, gamma),
    }


def table1_rows(
    alphas: ArrayLike, gammas: ArrayLike, c: float = 0.0, c_hat: float = 0.0
) -> dict[str, FloatArray]:
    """[L] Thm 3.8 & 3.11 on an (alpha, gamma) grid: speed and operations factors.

    This is *not* a transcription of [L] Table 1 (which reports measured T5 results); it is the
    analytic grid behind [L] Fig. 4 ("speed" = walltime improvement, "operations" = increase
    in arithmetic operations), by default at the idealised c = c_hat = 0. Returns a dict of
    equal-length 1-D columns ``alpha, gamma, operations, speed`` (alpha-major order).
    """
    a = np.asarray(alphas, dtype=np.float64).ravel()
    g = np.asarray(gammas, dtype=np.float64).ravel()
    A, G = np.meshgrid(a, g, indexing="ij")
    A, G = A.ravel(), G.ravel()
    return {
        "alpha": A,
        "gamma": G,
        "operations": np.asarray(arithmetic_operations(A, G, c_hat), dtype=np.float64),
        "speed": np.asarray(walltime_improvement(A, G, c), dtype=np.float64),
    }


# ---------------------------------------------------------------------------------------------
# 2. Markov dynamic programme
# ---------------------------------------------------------------------------------------------
def context_acceptance(P: ArrayLike, Q: ArrayLike) -> FloatArray:
    """[L] Def 3.1 / Thm 3.5: beta(s) = sum_x min(P[s, x], Q[s, x]) per context s."""
    Pa, Qa = _check_pair(P, Q)
    return np.minimum(Pa, Qa).sum(axis=1)


def residual_table(P: ArrayLike, Q: ArrayLike) -> FloatArray:
    """[L] Alg 1 / [C] Alg 2: rows norm(max(P - Q, 0)); rows with zero mass fall back to P."""
    Pa, Qa = _check_pair(P, Q)
    return _residual(Pa, Qa)


def _residual(P: FloatArray, Q: FloatArray) -> FloatArray:
    return residual(P, Q)  # specsim.verify.residual: the one residual


@dataclass(frozen=True)
class _Kernels:
    """Sub-stochastic one-position kernels shared by the round DP and the prefix laws."""

    acc: FloatArray  # acc[c, x]: mass of "draft x from context c and accept it"
    rej: FloatArray  # rej[c, x]: mass of "draft x from context c and reject it"
    rho: FloatArray  # rho[c] = rej[c].sum(): rejection probability in context c
    final: FloatArray  # final[c, y]: law of the token emitted on rejection in context c


def _kernels(P: FloatArray, Q: FloatArray, rule: Rule) -> _Kernels:
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
    return _Kernels(acc=acc, rej=rej, rho=rej.sum(axis=-1), final=final)


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
    Pa, Qa = _check_pair(P, Q)
    g = _check_gamma_int(gamma)
    r = _check_rule(rule)
    k = _kernels(Pa, Qa, r)
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
    Ka = _check_table(K, "K")
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


# ---------------------------------------------------------------------------------------------
# 3. exact output distributions
# ---------------------------------------------------------------------------------------------
def _extend(X: FloatArray, K: FloatArray) -> FloatArray:
    """Append one token axis: out[..., c, z] = X[..., c] * K[c, z]."""
    return X[..., :, None] * K


def _paths(acc: FloatArray, upto: int) -> list[FloatArray]:
    """paths[i][s, t_1..t_i] = prod_j acc[t_{j-1}, t_j], t_0 = s (i accepted drafts)."""
    out = [np.ones(acc.shape[0])]
    for _ in range(upto):
        out.append(_extend(out[-1], acc))
    return out


def _round_prefix_laws(
    P: FloatArray, Q: FloatArray, gamma: int, rule: Rule, n: int
) -> tuple[dict[int, FloatArray], FloatArray]:
    """Per-round laws truncated to n tokens.

    Returns ``(T, U)``: ``T[L][s, t_1..t_L]`` = P(round from s emits exactly t_1..t_L) for
    1 <= L < n, and ``U[s, t_1..t_n]`` = P(round emits >= n tokens, the first n being t).
    Only the first min(gamma, n) drafted positions are materialised.
    """
    V = P.shape[0]
    k = _kernels(P, Q, rule)
    zeros_u = np.zeros((V,) * (n + 1))
    T: dict[int, FloatArray] = {}
    if not rule_spec(rule).keep_drafts:
        # lengths 1..gamma+1: L-1 accepted then the rejection token, or gamma + bonus.
        emit = k.rho[:, None] * k.final
        paths = _paths(k.acc, min(gamma, n))
        for ell in range(1, min(n, gamma + 1) + 1):
            T[ell] = _extend(paths[ell - 1], emit) if ell <= gamma else _extend(paths[gamma], P)
        U = T.pop(n, zeros_u) + (paths[n] if n <= gamma else 0.0)
        return T, U
    # continue: lengths gamma (rejected somewhere) or gamma + 1 (all accepted).
    m = min(n, gamma)
    paths = _paths(k.acc, m)
    rq = k.rej @ Q  # rq[c, z]: draft rejected in context c, next draft z from it
    rejected = np.zeros((V,) * (m + 1))
    for i in range(m):  # rejection at position i < m (outputs t_1..t_i, r, x_{i+2}..x_m)
        X = _extend(paths[i], k.final)  # [..., c, r]
        if i + 1 == m:
            X = X * k.rho[:, None]
        else:
            X = X[..., None] * rq[:, None, :]  # [..., c, r, z]
            for _ in range(m - i - 2):
                X = _extend(X, Q)
        rejected = rejected + X
    if n <= gamma:  # every round emits >= gamma >= n tokens
        return T, rejected + paths[m]
    T[gamma] = rejected  # exactly gamma tokens <=> a rejection happened
    bonus = _extend(paths[gamma], P)
    if n == gamma + 1:
        return T, bonus
    T[gamma + 1] = bonus
    return T, zeros_u


def first_tokens_distribution(
    P: ArrayLike,
    Q: ArrayLike,
    ctx0: int,
    gamma: int,
    rule: str = "correct",
    n: int = 2,
    max_cells: int = 2_000_000,
) -> FloatArray:
    """Exact joint law (shape (V,)*n) of the first n emitted tokens ([L] Thm 3.5 check).

    Generation starts at context ``ctx0`` and runs further rounds while fewer than n tokens have
    been emitted, each starting at the last emitted token. Only the first min(gamma, n) drafted
    positions (plus the rejection/bonus token) can influence the first n outputs, so the work
    is about V^(n+1) cells (not V^gamma): with ``G_j[s, t_1..t_j]`` the law of the first j
    tokens from round start s, ``G_j = U_j + sum_{L<j} T_L[s, t_1..t_L] G_{j-L}[t_L, ...]``.
    Raises ValueError if V^(n+1) exceeds ``max_cells``.
    """
    Pa, Qa = _check_pair(P, Q)
    g = _check_gamma_int(gamma)
    r = _check_rule(rule)
    V = Pa.shape[0]
    if int(n) != n or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if not 0 <= ctx0 < V:
        raise ValueError(f"ctx0={ctx0} out of range for V={V}")
    cells = V ** (n + 1)
    if cells > max_cells:
        raise ValueError(
            f"first_tokens_distribution needs V**(n+1) = {V}**{n + 1} = {cells} cells "
            f"(V={V}, n={n}, gamma={g}), more than max_cells={max_cells}"
        )
    T, U_n = _round_prefix_laws(Pa, Qa, g, r, n)
    U: dict[int, FloatArray] = {n: U_n}
    for j in range(n - 1, 0, -1):  # P(len >= j, t_1..t_j) = P(len >= j+1, ...) summed + T_j
        U[j] = U[j + 1].sum(axis=-1) + T.get(j, 0.0)
    G: dict[int, FloatArray] = {}
    for j in range(1, n + 1):
        acc = U[j].reshape(V**j, V)
        for L in range(1, j):
            if L in T:
                left = T[L].reshape(V**L, V, 1)
                right = G[j - L].reshape(1, V, V ** (j - L))
                acc = acc + (left * right).reshape(V**j, V)
        G[j] = acc
    return np.asarray(G[n].reshape((V,) * (n + 1))[ctx0], dtype=np.float64)


def target_joint(P: ArrayLike, ctx0: int, n: int) -> FloatArray:
    """Target's own law of n tokens from ctx0: prod_j P[t_{j-1}, t_j] ([L] Sec 2 sampling)."""
    Pa = _check_table(P, "P")
    if int(n) != n or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    X = Pa[ctx0]
    for _ in range(n - 1):
        X = _extend(X, Pa)
    return np.asarray(X, dtype=np.float64)


def tv(a: ArrayLike, b: ArrayLike) -> float:
    """Total variation distance 0.5 sum |a - b| ([L] Sec 3.1 uses D_LK = TV)."""
    return float(0.5 * np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b)).sum())


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


# ---------------------------------------------------------------------------------------------
# 4. one round on given rows: the exact law of specsim.verify
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class VerifyLaw:
    """Exact law of one round of :func:`specsim.verify.verify` ([L] Alg. 1 or a broken rule).

    Leading axes (if any) are those of the inputs; then, with N the number of accepted drafts:

    accepted[..., k]     P(N = k), k = 0..gamma.
    n_emitted[..., m]    P(m tokens emitted), m = 0..gamma+1 (index 0 is always 0).
    final[..., k, y]     P(N = k and the token the round draws -- the rejection token for
                         k < gamma, the bonus token for k = gamma -- is y).
    emitted[..., j, y]   P(the j-th emitted token of the round is y), j = 0..gamma; row j sums
                         to P(n_emitted > j). For ``correct`` it is P(N >= j) p_j ([L] Thm 3.5
                         position by position), so ``first_token`` is p_0 exactly.
    """

    rule: Rule
    gamma: int
    accepted: FloatArray
    n_emitted: FloatArray
    final: FloatArray
    emitted: FloatArray

    @property
    def first_token(self) -> FloatArray:
        """Law of the round's first emitted token (always emitted): emitted[..., 0, :]."""
        return np.asarray(self.emitted[..., 0, :])

    @property
    def mean_accepted(self) -> FloatArray | float:
        return _out(self.accepted @ np.arange(self.gamma + 1, dtype=np.float64))

    @property
    def mean_emitted(self) -> FloatArray | float:
        return _out(self.n_emitted @ np.arange(self.gamma + 2, dtype=np.float64))


def verify_law(p: ArrayLike, q: ArrayLike, rule: str = "correct",
               row_tol: float = ROW_TOL) -> VerifyLaw:
    """Exact law of one verification round with fixed rows ([L] Alg. 1, [C] Alg. 2).

    ``p`` (..., gamma+1, V) and ``q`` (..., gamma, V) as for :func:`specsim.verify.verify`,
    validated and renormalised the same way (:func:`specsim.verify.check_round`), with the
    drafts x_i ~ q_i drawn independently: row i does not depend on the drafted prefix (the
    i.i.d. setting of [L] Sec. 3.1 when all rows are equal; see :func:`verify_law_tree` for
    prefix-dependent rows). With acc_i = q_i a_i (a from the rule's accept step), beta_i =
    sum acc_i and R_k = prod_{i<k} beta_i: P(N = k) = R_k (1 - beta_k) for k < gamma and
    P(N = gamma) = R_gamma ([L] Eq. 1 when beta_i = alpha). O(gamma V) per round.
    """
    r = _check_rule(rule)
    spec = rule_spec(r)
    pa, qa = check_round(p, q, row_tol)
    g = qa.shape[-2]
    k = _kernels(pa[..., :g, :], qa, r)  # rows (..., gamma, V)
    reach = np.concatenate([np.ones((*qa.shape[:-2], 1)), np.cumprod(k.acc.sum(axis=-1), -1)],
                           axis=-1)  # (..., gamma+1): P(N >= k)
    stop = reach[..., :g] * k.rho  # P(N = k), k < gamma
    accepted = np.concatenate([stop, reach[..., g:]], axis=-1)
    final = np.concatenate([stop[..., None] * k.final, reach[..., g:, None] * pa[..., g:, :]],
                           axis=-2)
    emitted = final.copy()
    emitted[..., :g, :] += reach[..., :g, None] * k.acc
    n_emitted = np.zeros((*accepted.shape[:-1], g + 2))
    if spec.keep_drafts:  # after a rejection at k < j the j-th token is the draft x_j ~ q_j
        below = np.cumsum(accepted, axis=-1) - accepted  # P(N < j)
        emitted[..., :g, :] += below[..., :g, None] * qa
        n_emitted[..., g] = stop.sum(axis=-1)
        n_emitted[..., g + 1] = accepted[..., g]
    else:
        n_emitted[..., 1:] = accepted
    return VerifyLaw(r, g, accepted, n_emitted, final, emitted)


def verify_law_tree(
    target: Callable[[tuple[int, ...]], ArrayLike],
    draft: Callable[[tuple[int, ...]], ArrayLike],
    gamma: int,
    rule: str = "correct",
    row_tol: float = ROW_TOL,
    max_rows: int = 1_000_000,
) -> VerifyLaw:
    """Exact law of one round whose rows depend on the drafted prefix, by enumerating it.

    ``target(prefix)`` is the target's next-token row (V,) after the drafted tokens ``prefix``
    (a tuple of 0..gamma ints; ``()`` is the round's first position) and ``draft(prefix)`` the
    draft's (prefix of 0..gamma-1 ints): what an autoregressive draft and target give ([L]
    Alg. 1 with the rows M_q(x_<i), M_p(x_<i)). The round is a tree: depth-first over the
    accepted prefixes (only tokens with acceptance mass are expanded), plus, for ``continue``,
    the drafts that follow a rejection. The work is at most sum_k V^k rows; more than
    ``max_rows`` calls raise ValueError. With rows that ignore the prefix this equals
    :func:`verify_law`; with Markov tables it equals :func:`round_law` (tests check both).
    """
    r = _check_rule(rule)
    spec = rule_spec(r)
    g = int(gamma)
    if g != gamma or g < 0:
        raise ValueError(f"gamma must be an integer >= 0, got {gamma!r}")
    calls = 0
    laws: dict[str, FloatArray] = {}

    def row(fn: Callable[[tuple[int, ...]], ArrayLike], name: str,
            prefix: tuple[int, ...]) -> FloatArray:
        nonlocal calls
        calls += 1
        if calls > max_rows:
            raise ValueError(f"the round's tree needs more than max_rows={max_rows} rows")
        out = check_rows(fn(prefix), f"{name}{prefix}", row_tol)
        if out.ndim != 1:
            raise ValueError(f"{name}{prefix} must be one row (V,), got shape {out.shape}")
        if not laws:
            v = out.shape[0]
            laws.update(accepted=np.zeros(g + 1), final=np.zeros((g + 1, v)),
                        emitted=np.zeros((g + 1, v)))
        elif out.shape[0] != laws["final"].shape[1]:
            raise ValueError(f"{name}{prefix} has {out.shape[0]} entries, not "
                             f"V={laws['final'].shape[1]}")
        return out

    def drafts_after(prefix: tuple[int, ...], mass: float) -> None:
        """``continue``: the drafts after a rejection are emitted as drawn from q."""
        j = len(prefix)
        q_j = row(draft, "draft", prefix)
        laws["emitted"][j] += mass * q_j
        if j + 1 < g:
            for x in np.flatnonzero(q_j):
                drafts_after((*prefix, int(x)), mass * q_j[x])

    def visit(prefix: tuple[int, ...], mass: float) -> None:
        i = len(prefix)
        p_i = row(target, "target", prefix)
        if i == g:  # every draft accepted: the bonus token
            laws["accepted"][g] += mass
            laws["final"][g] += mass * p_i
            laws["emitted"][g] += mass * p_i
            return
        k = _kernels(p_i, row(draft, "draft", prefix), r)
        stop = mass * float(k.rho)
        laws["accepted"][i] += stop
        laws["final"][i] += stop * k.final
        laws["emitted"][i] += mass * k.acc + stop * k.final
        if spec.keep_drafts and i + 1 < g:
            for x in np.flatnonzero(k.rej):
                drafts_after((*prefix, int(x)), mass * k.rej[x])
        for x in np.flatnonzero(k.acc):
            visit((*prefix, int(x)), mass * k.acc[x])

    visit((), 1.0)
    accepted = laws["accepted"]
    n_emitted = np.zeros(g + 2)
    if spec.keep_drafts:
        n_emitted[g], n_emitted[g + 1] = accepted[:g].sum(), accepted[g]
    else:
        n_emitted[1:] = accepted
    return VerifyLaw(r, g, accepted, n_emitted, laws["final"], laws["emitted"])
