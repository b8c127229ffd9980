"""The optimal draft-length policy (:mod:`specsim.schemes.optimal`) on a trace's positional model.

Under the positional model (:mod:`.positional`) draft i of a round from position t is drawn
from the frozen q_s at s = t + i - 1 and accepted with the rule's accept_s(x) (token-wise rules,
:func:`.schemes.tokenwise_rows`), independently of the drafts before it; a round that emits n
tokens moves the next round to t + n, and a document of T positions is done at T. Nothing of the
text's future is random: what the drafter may look at is the round's start, the drafts made so
far and the positions' frozen rows -- exactly what a drafter that knows each position's pair
(p_s, q_s), as SpecDec++'s acceptance head tries to predict it, would see; it does *not* see
which drafts will be accepted (they are verified when drafting ends). "Optimal" below is
optimal among every non-anticipating policy on that model (fixed γ, the confidence threshold,
the heuristic schedule, randomised rules), for a cap of γ drafts per round.

**Objective.** A document's tokens are fixed (T), so the long-run tokens per unit cost
Σ_d T_d / Σ_d E[cost_d] (a round drafting g tokens costs 1 + g c target calls, the speedup the
tables report) is maximised by minimising each document's expected cost: no price λ is
needed, and a backward DP over positions solves it. With π = Π_{i<=d} a_i (a_i = accept of
draft i at its position), after d drafts the next draft is at s = t + d and the future of the
round depends on the past only through (s, k = γ - d drafts left, π): a rejection at draft
d + 1 or a stop after d drafts (all accepted) both move the next round to s + 1, an accepted
draft d + 1 that is last to s + 2. With E(s) the least expected cost to finish the document
from a round starting at s (E(s) = 0 for s >= T) and β_s = Σ_x q_s(x) accept_s(x)::

    W_0(s, π) = π E(s+1)
    W_k(s, π) = min( π E(s+1),                                           stop
                     c + π (1 - β_s) E(s+1) + Σ_x q_s(x) W_{k-1}(s+1, π accept_s(x)) )
    E(s) = 1 + W_γ(s, 1)

(W_k(s) = 0 for s >= T: nothing is drafted beyond a document's end.) Each W_k(s, .) is concave
piecewise linear with W(0) = 0, and continue - stop is concave and equals c > 0 at π = 0, so the
optimal rule is a threshold: draft at s with k drafts left iff π >= t_k(s) (the same structure
as on tables, with the position in place of the last draft). The envelopes are computed exactly
on their breakpoints, and the round law from every start by a forward pass over the reachable
(start, π) groups (equal π merged), so the exact rates and the Monte Carlo (which carries π
per chain and stops at the thresholds, :func:`.schemes.simulate`) describe the same policy.

**Sizes.** An envelope has one breakpoint per distinct product of accept values above its
threshold, and the forward pass one group per start and distinct π; both are counted, and
:func:`thresholds` stops with a ValueError beyond :data:`MAX_BREAKPOINTS` in one envelope.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specsim.resources import FLOPS_PER_CORE_SECOND, Footprint
from specsim.sampling import FloatArray, IntArray
from specsim.traces.positional import truncate

__all__ = ["MAX_BREAKPOINTS", "OptimalRounds", "footprint", "solve"]

#: Most breakpoints one envelope W_k(s) may have (ngram_o4, c = 0.05, 8 documents: 1,659 at
#: γ = 4, 15,114 at γ = 6, 107,980 at γ = 8).
MAX_BREAKPOINTS = 2**16
#: Core-seconds per (start, draft) step of the DP, measured on ngram_o4 at γ = 4 (~0.5 ms; 1 ms
#: under load): the envelopes grow with γ and the spread of accept values, so larger caps cost
#: more per step (γ = 6: over 3x).
STEP_SECONDS = 1e-3


def footprint(positions: int, support: int, gamma: int) -> Footprint:
    """The DP's peak: the children read for the largest envelope allowed (``support`` draft
    tokens x :data:`MAX_BREAKPOINTS` x (γ+4) functions, value and slope, ~3 arrays), and its
    work at :data:`STEP_SECONDS` per (start, draft) step."""
    return Footprint(3.0 * support * MAX_BREAKPOINTS * (gamma + 4),
                     positions * gamma * STEP_SECONDS * FLOPS_PER_CORE_SECOND,
                     what=f"optimal policy's envelopes ({positions} starts)")


@dataclass(frozen=True)
class OptimalRounds:
    """The optimal policy on a trace: draft at position s with k drafts left iff
    π >= ``thresholds[k, s]`` (inf at k = 0 and where stopping is optimal whatever π);
    ``emitted`` (N, γ+2) the law of the tokens one round from each start emits (cut at the
    document's end) and ``drafted`` (N,) its expected drafts; ``cost`` (N,) E(s), the least
    expected target calls + c x drafts to finish the document from a round starting at s;
    ``breakpoints`` the largest envelope met."""

    thresholds: FloatArray
    emitted: FloatArray
    drafted: FloatArray
    cost: FloatArray
    breakpoints: int


@dataclass(frozen=True)
class _Piecewise:
    """Right-continuous piecewise-linear functions of π on [0, 1]: on [u_i, u_{i+1}) column j
    is value[i, j] + slope[i, j] (π - u_i). Columns: cost to go, drafts in the round, then the
    law of the round's emitted tokens (γ+2 columns). Cost is continuous; the policy's
    functionals jump at thresholds (right-continuous: π >= t drafts on)."""

    u: FloatArray
    value: FloatArray
    slope: FloatArray

    def at(self, z: FloatArray) -> tuple[FloatArray, FloatArray]:
        i = np.searchsorted(self.u, z, side="right") - 1
        return self.value[i] + self.slope[i] * (z - self.u[i])[:, None], self.slope[i]


def _stop(width: int, e1: float, column: int) -> tuple[FloatArray, FloatArray]:
    """Value at π = 0 and slope of stopping: cost π E(s+1), π tokens at ``column``."""
    slope = np.zeros(width)
    slope[0] = e1
    slope[2 + column] = 1.0
    return np.zeros(width), slope


def _step(child: _Piecewise, q: FloatArray, a: FloatArray, beta: float, e1: float, c: float,
          column: int) -> tuple[float, _Piecewise]:
    """(threshold, functions) at (s, k) from the child's at (s+1, k-1); ``column`` = d + 1:
    the tokens a stop or a rejection here emits."""
    width = child.value.shape[1]
    stop_v, stop_s = _stop(width, e1, column)
    live = (q > 0) & (a > 0)  # drafts accepted with probability 0 add q x (value at 0) below
    vals, inv = np.unique(a[live], return_inverse=True)
    weights = np.bincount(inv, weights=q[live], minlength=vals.size)
    dead = float(q[~live].sum())
    u = np.unique(np.concatenate([[0.0]] + [child.u[child.u < v] / v for v in vals]))
    if u.size > MAX_BREAKPOINTS:
        raise ValueError(f"the optimal policy's envelope on the trace has {u.size} breakpoints, "
                         f"more than {MAX_BREAKPOINTS}")
    go_v = np.zeros((u.size, width))
    go_s = np.zeros((u.size, width))
    go_v[:, 0] = c
    go_v[:, 1] = 1.0
    go_s[:, 0] = (1.0 - beta) * e1
    go_s[:, 2 + column] = 1.0 - beta
    # (value, slope) -> value at u: the rows below hold value at u already
    go_v += go_s * u[:, None]
    zero_v, _ = child.at(np.zeros(1))
    go_v += dead * zero_v[0]
    # each child is linear on the image of a parent segment [u_j, u_j+1): read its piece at
    # the segment's middle (a breakpoint's image u_j v may round to either side of it)
    mid = (u + np.append(u[1:], 1.0)) / 2.0
    z = np.multiply.outer(vals, mid)
    cv, cs = child.at(z.ravel())
    cs = cs.reshape(vals.size, u.size, width) * vals[:, None, None]  # slope in π
    cv = cv.reshape(vals.size, u.size, width) - cs * (mid - u)[None, :, None]
    go_v += np.tensordot(weights, cv, axes=1)
    go_s += np.tensordot(weights, cs, axes=1)
    D = go_v[:, 0] - u * e1  # continue - stop: concave, c > 0 at 0
    slope_d = go_s[:, 0] - e1
    end_d = D[-1] + slope_d[-1] * (1.0 - u[-1])
    if end_d > 0:  # stop whatever π
        return np.inf, _Piecewise(np.zeros(1), stop_v[None], stop_s[None])
    below = np.flatnonzero(D <= 0)
    i = int(below[0]) if below.size else u.size  # first breakpoint where going on pays
    cut = u[i - 1] - D[i - 1] / slope_d[i - 1]
    first = go_v[i - 1] + go_s[i - 1] * (cut - u[i - 1])
    return cut, _Piecewise(np.concatenate([[0.0, cut], u[i:]]),
                           np.vstack([stop_v, first, go_v[i:]]),
                           np.vstack([stop_s, go_s[i - 1], go_s[i:]]))


def solve(q: FloatArray, accept: FloatArray, doc_start: IntArray, gamma: int, c: float
          ) -> OptimalRounds:
    """The optimal policy on dense rows ``q``, ``accept`` (N, V) of a trace with documents at
    ``doc_start``, for a cap of γ drafts and a draft cost c: for each start t (last first) the
    backward DP over its round's states (s = t + d, k = γ - d), d = γ .. 0."""
    n = q.shape[0]
    beta = (q * accept).sum(axis=1)
    end = np.repeat(doc_start[1:], np.diff(doc_start))
    width = gamma + 4
    t = np.full((gamma + 1, n + gamma + 1), np.inf)
    cost = np.zeros(n)
    emitted, drafted = np.zeros((n, gamma + 2)), np.zeros(n)
    most = 1
    for start in range(n - 1, -1, -1):
        last = int(end[start])
        ahead = np.zeros(gamma + 2)  # E(start + i), 0 at and beyond the document's end
        ahead[: max(0, min(gamma + 2, last - start))] = cost[start: min(last, start + gamma + 2)]
        d = gamma
        v, sl = _stop(width, float(ahead[d + 1]), d + 1)
        fn = _Piecewise(np.zeros(1), v[None], sl[None])
        for d in range(gamma - 1, -1, -1):
            s = start + d
            if s >= last:  # no draft beyond the document's end: stop
                v, sl = _stop(width, 0.0, d + 1)
                fn = _Piecewise(np.zeros(1), v[None], sl[None])
                continue
            cut, fn = _step(fn, q[s], accept[s], float(beta[s]), float(ahead[d + 1]), c, d + 1)
            t[gamma - d, s] = cut
            most = max(most, fn.u.size)
        at_one, _ = fn.at(np.ones(1))
        cost[start] = 1.0 + at_one[0, 0]
        drafted[start] = at_one[0, 1]
        emitted[start] = at_one[0, 2:]
    return OptimalRounds(t[:, :n], truncate(np.clip(emitted, 0.0, None), doc_start),
                         drafted, cost, most)
