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

:func:`law` is the one forward DP of every token-wise rule, :func:`specsim.exact.round_dp`, with
the rule's tables as its kernels (the classic rules' :func:`specsim.exact.round_law` is the same
DP with theirs); :func:`play` samples the same round for n chains. The stop table is always
passed (zeros at a fixed γ), so E[γ'] comes from the drafting law, not from γ.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from specsim.exact import RoundLaw, RoundParts, check_gamma, check_pair, check_table, round_dp
from specsim.exact.footprints import round_dp_footprint
from specsim.exact.kernels import Kernels
from specsim.resources import Footprint
from specsim.sampling import TableSampler
from specsim.schemes.base import Knobs
from specsim.schemes.law import FloatArray, IntArray, LawSize, RoundSample
from specsim.verify import PLACEHOLDER, acceptance_probability, first_rejection, residual

__all__ = ["check_knobs", "check_states", "check_tables", "correct_tables", "emitted_tokens",
           "footprint", "law", "law_footprint", "parts", "play", "play_footprint", "play_rows",
           "samplers"]


def correct_tables(P: ArrayLike, Q: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """([L] Alg. 1's accept table min(1, P/Q), its reject table norm(max(P - Q, 0)))."""
    Pa, Qa = check_pair(P, Q)
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
    Pa, Qa = check_pair(P, Q)
    acc = _check_unit(accept, "accept", Pa.shape)
    rej = check_table(reject, "reject")
    if rej.shape != Pa.shape:
        raise ValueError(f"reject must have shape {Pa.shape} like P, got {rej.shape}")
    st = np.zeros_like(Pa) if stop is None else _check_unit(stop, "stop", Pa.shape)
    return Pa, Qa, acc, rej, st


def check_knobs(scheme: str, knobs: Knobs | None,
                defaults: Knobs) -> dict[str, Any]:
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


def parts(P: FloatArray, Q: FloatArray, accept: FloatArray, reject: FloatArray, gamma: int,
          stop: FloatArray) -> RoundParts:
    """The round law of checked tables (:func:`check_tables`), split by how the round ended:
    :func:`specsim.exact.round_dp` with the rule's kernels, Q x accept and Q x (1 - accept)."""
    rejected = Q * (1.0 - accept)  # draft x in context c and reject it
    kernel = Kernels(acc=Q * accept, rej=rejected, rho=rejected.sum(axis=1), final=reject)
    return round_dp(P, kernel, gamma, Q=Q, stop=stop, first_two=True)


def law(P: ArrayLike, Q: ArrayLike, accept: ArrayLike, reject: ArrayLike, gamma: int,
        stop: ArrayLike | None = None) -> RoundLaw:
    """Exact law of one round of the token-wise rule (accept, reject) drafting up to γ tokens,
    stopping early by ``stop`` ([L] Alg. 1 for the ``correct`` tables; O(γ S^3))."""
    Pa, Qa, acc, rej, st = check_tables(P, Q, accept, reject, stop)
    return parts(Pa, Qa, acc, rej, check_gamma(gamma), st).law()


def samplers(P: FloatArray, Q: FloatArray, reject: FloatArray) -> tuple[TableSampler, TableSampler]:
    """The round's two samplers (:meth:`TableSampler.of`, built once for the tables of a point's
    rounds): the draft's Q, and the final token's rows [P; reject] -- row c draws the bonus
    from P(.|c), row S + c the token after a rejection in context c."""
    return TableSampler.of(Q), TableSampler.of(np.vstack([P, reject]))


def emitted_tokens(xs: IntArray, n_acc: IntArray, final: IntArray, width: int) -> IntArray:
    """Emitted tokens (n, ``width`` + 1): the accepted drafts ``xs[1 : n_acc + 1]`` of each
    chain's column of ``xs`` (contexts then drafts, (reach + 1, n)), then ``final``, then
    :data:`PLACEHOLDER`."""
    reach, n = xs.shape[0] - 1, xs.shape[1]
    tokens = np.full((n, width + 1), PLACEHOLDER, dtype=np.intp)
    kept = np.arange(reach)[:, None] < n_acc
    tokens[:, :reach] = np.where(kept, xs[1:], PLACEHOLDER).T
    tokens[np.arange(n), n_acc] = final
    return tokens


def play_rows(P: FloatArray, Q: FloatArray, accept: FloatArray, reject: FloatArray,
          ctx: IntArray, gammas: IntArray, stop: FloatArray, rng: np.random.Generator,
          width: int) -> RoundSample:
    """One round per chain from contexts ``ctx`` (n,), chain k drafting at most ``gammas[k]``;
    tokens padded to ``width`` + 1 columns. Positions beyond a chain's γ are masked. Every
    token is the inverse-CDF draw ``searchsorted(cdf, u, 'right')`` of its row
    (:func:`samplers`)."""
    n, reach = ctx.shape[0], int(gammas.max(initial=0))
    u = rng.random((3, reach, n))  # draft, stop and accept uniforms per position
    u_final = rng.random((n,))
    draw_q, draw_final = samplers(P, Q, reject)
    size = P.shape[0]
    accept_cell, stop_cell = accept.ravel(), stop.ravel() if stop.any() else None
    xs = np.empty((reach + 1, n), dtype=np.intp)  # xs[0] = context, xs[i+1] = draft i+1
    xs[0] = ctx
    drafting = gammas > 0
    n_drafted = np.zeros(n, dtype=np.intp)
    ok = np.ones((reach, n), dtype=bool)  # positions never drafted count as accepted here
    for i in range(reach):
        c = xs[i]
        x = draw_q(c, u[0, i])
        cell = c * size + x
        n_drafted += drafting
        np.less(u[2, i], accept_cell.take(cell), out=ok[i])
        ok[i] |= ~drafting
        np.copyto(xs[i + 1], np.where(drafting, x, c))
        if stop_cell is not None:
            drafting &= u[1, i] >= stop_cell.take(cell)
        drafting &= i + 1 < gammas
    n_acc = np.minimum(first_rejection(ok, axis=0), n_drafted)
    last = xs[n_acc, np.arange(n)]  # context of the rejection, or the last accepted draft
    final = draw_final(last + size * (n_acc < n_drafted), u_final)
    return RoundSample(tokens=emitted_tokens(xs, n_acc, final, width), n_emitted=n_acc + 1,
                       next_state=final, drafted=n_drafted)


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
    g = check_gamma(gamma)
    ctx = check_states(state, Pa.shape[0])
    return play_rows(Pa, Qa, acc, rej, ctx, np.full(ctx.shape[0], g), st, rng, g)


def law_footprint(size: int, gamma: int) -> Footprint:
    """:func:`law`: the checked tables (5 (S, S)) and :func:`parts`' DP, with a stop table and
    the first-two-token pieces."""
    dp = round_dp_footprint(size, gamma, stop=True, first_two=True)
    return dp.plus(Footprint(5.0 * size * size))


def play_footprint(size: int, chains: int, reach: int, width: int) -> Footprint:
    """:func:`play_rows` for ``chains`` chains drafting up to ``reach`` tokens, padded to
    ``width``: the uniforms and drafts (~5 per position and chain), the padded token arrays
    (~6 (n, width + 1)), the samplers (:func:`samplers`; the final rows' 2S are the larger).
    Work: each drafted position looks up a token and its accept (and stop) cell per chain
    (~15 operations); building the samplers is once per point, not per call, and not counted."""
    n = float(chains)
    touched = 15 * n * reach + 6 * n * (width + 1)
    return Footprint(5 * reach * n + 6 * n * (width + 1) + TableSampler.cells(2 * size, size),
                     10 * touched, what=f"simulation ({chains} chains at once)")


def footprint(size: int, support: int, gamma: int, knobs: Knobs | None,
              chains: int) -> LawSize:
    """:func:`law` and :func:`play` at a fixed γ (:class:`specsim.schemes.law.LawSize`)."""
    return LawSize(size, law_footprint(size, gamma), play_footprint(size, chains, gamma, gamma))
