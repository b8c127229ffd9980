"""A token-wise verification rule from tables: the exact law of its round and a vectorised round.

Leviathan, Kalman & Matias 2022 (arXiv 2211.17192), Algorithm 1, cited as [L], is one rule of
this kind; lenient and typical acceptance are others. On an order-1 Markov pair (P, Q), (S, S),
a *token-wise rule* is two (S, S) tables:

``accept[c, x]``  probability that a draft x proposed in context c is accepted;
``reject[c, :]``  law of the token emitted when the round stops at a rejection in context c.

For [L] Alg. 1 (``correct``) they are :func:`specsim.verify.acceptance_probability` and
:func:`specsim.verify.residual` (:func:`correct_tables`). One round from context s: the draft
proposes x_1 ~ Q(.|s), x_2 ~ Q(.|x_1), ... and, with the optional table ``stop[c, x]``, stops
drafting right after x was drafted in context c with probability stop[c, x] (always after γ
drafts). The drafts are tested in order; the round stops at the first rejection, in context c,
with a token from reject[c], or, all γ' drafted tokens accepted, with a bonus token from
P(.|x_γ'). It emits accepted + 1 tokens, drafts γ' (costing 1 + γ' c) and the next round starts
at the last emitted token, so scheme state = context (N = S).

:func:`law` is the forward DP of :func:`specsim.exact.round_law` with the rule's tables (equal to
it for ``correct`` without ``stop``); :func:`play` samples the same round for n chains.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from specsim.exact import _check_gamma_int, _check_pair, _check_table
from specsim.sampling import inverse_cdf_rows, normalised_cdf
from specsim.schemes.law import FloatArray, IntArray, RoundLaw, RoundSample
from specsim.verify import PLACEHOLDER, acceptance_probability, first_rejection, residual

__all__ = ["check_knobs", "check_states", "check_tables", "correct_tables", "law", "play"]


def correct_tables(P: ArrayLike, Q: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """([L] Alg. 1's accept table min(1, P/Q), its reject table norm(max(P - Q, 0)))."""
    Pa, Qa = _check_pair(P, Q)
    return acceptance_probability(Pa, Qa), residual(Pa, Qa)


def _check_unit(a: ArrayLike, name: str, shape: tuple[int, ...]) -> FloatArray:
    arr = np.asarray(a, dtype=np.float64)
    if arr.shape != shape:
        raise ValueError(f"{name} must have shape {shape} like P, got {arr.shape}")
    if not np.isfinite(arr).all() or (arr < 0).any() or (arr > 1).any():
        raise ValueError(f"{name} must hold probabilities in [0, 1]")
    return arr


def check_tables(P: ArrayLike, Q: ArrayLike, accept: ArrayLike, reject: ArrayLike,
                 stop: ArrayLike | None = None) -> tuple[FloatArray, ...]:
    """(P, Q, accept, reject, stop) as float64 after checks: P, Q, reject row-stochastic
    (S, S); accept, stop in [0, 1] (S, S). A missing ``stop`` is all zeros (fixed γ)."""
    Pa, Qa = _check_pair(P, Q)
    acc = _check_unit(accept, "accept", Pa.shape)
    rej = _check_table(reject, "reject")
    if rej.shape != Pa.shape:
        raise ValueError(f"reject must have shape {Pa.shape} like P, got {rej.shape}")
    st = np.zeros_like(Pa) if stop is None else _check_unit(stop, "stop", Pa.shape)
    return Pa, Qa, acc, rej, st


def check_knobs(scheme: str, knobs: Mapping[str, Any] | None,
                defaults: Mapping[str, Any]) -> dict[str, Any]:
    """``knobs`` completed from ``defaults`` (a default of None means the knob is required);
    an unknown or missing knob is refused with a one-line ValueError."""
    given = dict(knobs or {})
    for key, value in given.items():
        if key not in defaults:
            raise ValueError(f"{scheme} has no knob {key!r} (got {key}={value!r}); "
                             f"its knobs are {tuple(defaults)}")
    for key, default in defaults.items():
        if key not in given and default is None:
            raise ValueError(f"{scheme} needs the knob {key!r}; got knobs {given!r}")
    return {key: given.get(key, default) for key, default in defaults.items()}


@dataclass(frozen=True)
class _Parts:
    """One rule's round law at one γ, per start context, split by how the round ended."""

    tokens: FloatArray  # (S, γ+2)
    after_rejection: FloatArray  # (S, S): P(stopped at a rejection, the next context is t)
    after_bonus: FloatArray  # (S, S): P(every drafted token accepted, the bonus token is t)
    drafted: FloatArray  # (S,)
    single: FloatArray  # (S, S)
    pair: FloatArray  # (S, S, S)


def _parts(P: FloatArray, Q: FloatArray, accept: FloatArray, reject: FloatArray, gamma: int,
           stop: FloatArray) -> _Parts:
    """Forward DP over positions (as :func:`specsim.exact.round_law`), O(γ S^3).

    ``A[s, c]`` = P(from s the first i drafts were drafted and accepted and drafting went on,
    context c). Position i+1 from A: a rejection (mass rho[c] = sum_x Q[c, x](1 - accept[c, x]))
    emits i+1 tokens, the last from reject[c]; an accepted draft after which drafting stops
    (kernel ``end``) emits i+2, the last from P(.|x). ``D`` carries the drafting alone (it does
    not depend on the tests: rejected drafts were proposed too), for E[γ'].
    """
    size = P.shape[0]
    acc = Q * accept  # draft x in context c and accept it
    rho = (Q * (1.0 - accept)).sum(axis=1)
    emit = rho[:, None] * reject
    keep_drafting = Q * (1.0 - stop)
    A, D = np.eye(size), np.eye(size)
    tokens = np.zeros((size, gamma + 2))
    after_rejection, after_bonus = np.zeros((size, size)), np.zeros((size, size))
    drafted = np.zeros(size)
    for i in range(gamma):
        end = acc if i == gamma - 1 else acc * stop
        done = A @ end
        tokens[:, i + 1] += A @ rho
        tokens[:, i + 2] += done.sum(axis=1)
        after_rejection += A @ emit
        after_bonus += done @ P
        drafted += D.sum(axis=1)
        A, D = A @ (acc - end), D @ keep_drafting
    # The first two tokens: x_1 accepted, then the bonus (drafting stopped after x_1), or the
    # second position's accepted draft or rejection token.
    stop1 = np.ones_like(stop) if gamma == 1 else stop
    second = stop1[:, :, None] * P[None] + (1.0 - stop1)[:, :, None] * (acc + emit)[None]
    return _Parts(tokens, after_rejection, after_bonus, drafted, emit, acc[:, :, None] * second)


def law(P: ArrayLike, Q: ArrayLike, accept: ArrayLike, reject: ArrayLike, gamma: int,
        stop: ArrayLike | None = None) -> RoundLaw:
    """Exact law of one round of the token-wise rule (accept, reject) drafting up to γ tokens,
    stopping early by ``stop`` ([L] Alg. 1 for the ``correct`` tables; O(γ S^3))."""
    Pa, Qa, acc, rej, st = check_tables(P, Q, accept, reject, stop)
    parts = _parts(Pa, Qa, acc, rej, _check_gamma_int(gamma), st)
    return RoundLaw(tokens=parts.tokens, next_state=parts.after_rejection + parts.after_bonus,
                    drafted=parts.drafted, single=parts.single, pair=parts.pair,
                    context=np.arange(Pa.shape[0]))


def _play(P: FloatArray, Q: FloatArray, accept: FloatArray, reject: FloatArray,
          ctx: IntArray, gammas: IntArray, stop: FloatArray, rng: np.random.Generator,
          width: int) -> RoundSample:
    """One round per chain from contexts ``ctx`` (n,), chain k drafting at most ``gammas[k]``;
    tokens padded to ``width`` + 1 columns. Positions beyond a chain's γ are masked."""
    n, reach = ctx.shape[0], int(gammas.max(initial=0))
    u = rng.random((3, reach, n))  # draft, stop and accept uniforms per position
    u_final = rng.random(n)
    cdf_q = normalised_cdf(Q)
    xs = np.empty((reach + 1, n), dtype=np.intp)  # xs[0] = context, xs[i+1] = draft i+1
    xs[0] = ctx
    drafting = gammas > 0
    n_drafted = np.zeros(n, dtype=np.intp)
    ok = np.ones((reach, n), dtype=bool)  # positions never drafted count as accepted here
    for i in range(reach):
        c = xs[i]
        x = inverse_cdf_rows(cdf_q[c], u[0, i])
        n_drafted += drafting
        ok[i] = ~drafting | (u[2, i] < accept[c, x])
        xs[i + 1] = np.where(drafting, x, c)
        drafting &= (u[1, i] >= stop[c, x]) & (i + 1 < gammas)
    n_acc = np.minimum(first_rejection(ok, axis=0), n_drafted)
    last = xs[n_acc, np.arange(n)]  # context of the rejection, or the last accepted draft
    rejected = n_acc < n_drafted
    rows = np.where(rejected[:, None], normalised_cdf(reject)[last], normalised_cdf(P)[last])
    final = inverse_cdf_rows(rows, u_final)
    j = np.arange(width + 1)[None, :]
    drafts = np.full((n, width + 1), PLACEHOLDER, dtype=np.intp)
    drafts[:, :reach] = xs[1:].T
    tokens = np.where(j < n_acc[:, None], drafts,
                      np.where(j == n_acc[:, None], final[:, None], PLACEHOLDER))
    return RoundSample(tokens=tokens, n_emitted=n_acc + 1, next_state=final,
                       drafted=n_drafted)


def check_states(state: ArrayLike, n_states: int) -> IntArray:
    """Scheme states (n,) as integers in 0..n_states-1, or a one-line ValueError."""
    s = np.asarray(state)
    if s.ndim != 1 or not np.issubdtype(s.dtype, np.integer):
        raise ValueError(f"state must be a 1-D integer array, got {s.dtype} shape {s.shape}")
    if ((s < 0) | (s >= n_states)).any():
        raise ValueError(f"states must lie in 0..{n_states - 1}, got one = "
                         f"{int(s[(s < 0) | (s >= n_states)][0])}")
    return s.astype(np.intp)


def play(P: ArrayLike, Q: ArrayLike, accept: ArrayLike, reject: ArrayLike, state: ArrayLike,
         gamma: int, rng: np.random.Generator, stop: ArrayLike | None = None) -> RoundSample:
    """One round of the token-wise rule for n chains from contexts ``state`` (n,); draws
    3γ + 1 uniforms per chain (draft, stop, accept per position; the final token)."""
    Pa, Qa, acc, rej, st = check_tables(P, Q, accept, reject, stop)
    g = _check_gamma_int(gamma)
    ctx = check_states(state, Pa.shape[0])
    return _play(Pa, Qa, acc, rej, ctx, np.full(ctx.shape[0], g), st, rng, g)
