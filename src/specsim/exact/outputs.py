"""Exact output laws: the joint law of the first ``n`` emitted tokens of a generation on Markov
tables ([L] Thm 3.5 / [C] Thm 1's lossless check) beside the target's own, and the exact law of
one round of :func:`specsim.verify.verify` on given rows (:func:`verify_law`) or on rows that
depend on the drafted prefix (:func:`verify_law_tree`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from specsim.exact.footprints import enumeration_refusal
from specsim.exact.kernels import (
    FloatArray,
    as_output,
    check_gamma,
    check_pair,
    check_rule,
    check_table,
    kernels,
)
from specsim.verify import ROW_TOL, Rule, check_round, check_rows, rule_spec


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
    k = kernels(P, Q, rule)
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
    Pa, Qa = check_pair(P, Q)
    g = check_gamma(gamma)
    r = check_rule(rule)
    V = Pa.shape[0]
    if int(n) != n or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if not 0 <= ctx0 < V:
        raise ValueError(f"ctx0={ctx0} out of range for V={V}")
    why = enumeration_refusal(V, g, n, max_cells)
    if why:
        raise ValueError(why)
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
    Pa = check_table(P, "P")
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
        return as_output(self.accepted @ np.arange(self.gamma + 1, dtype=np.float64))

    @property
    def mean_emitted(self) -> FloatArray | float:
        return as_output(self.n_emitted @ np.arange(self.gamma + 2, dtype=np.float64))


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
    r = check_rule(rule)
    spec = rule_spec(r)
    pa, qa = check_round(p, q, row_tol)
    g = qa.shape[-2]
    k = kernels(pa[..., :g, :], qa, r)  # rows (..., gamma, V)
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
    :func:`verify_law`; with Markov tables it equals :func:`specsim.exact.round_law` (tests check
    both).
    """
    r = check_rule(rule)
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
        k = kernels(p_i, row(draft, "draft", prefix), r)
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
