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
:func:`solve` stops with a ValueError beyond :data:`MAX_BREAKPOINTS` in one envelope.
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


def _ranges(counts: IntArray) -> tuple[IntArray, IntArray]:
    """(owner, index within its owner) of every item when owner j holds ``counts[j]``."""
    owner = np.repeat(np.arange(counts.size), counts)
    first = np.cumsum(counts) - counts
    return owner, np.arange(owner.size) - first[owner]


def _ptr(counts: IntArray) -> IntArray:
    return np.concatenate([[0], np.cumsum(counts)])


@dataclass(frozen=True)
class _Pieces:
    """One right-continuous piecewise-linear function of π on [0, 1] per document, stacked:
    document j's pieces are rows ``ptr[j]:ptr[j+1]``; on [u_i, u_{i+1}) column c is
    value[i, c] + slope[i, c] (π - u_i). Columns: cost to go, drafts in the round, then the
    law of the round's emitted tokens (γ+2 columns). Cost is continuous; the policy's
    functionals jump at thresholds (right-continuous: π >= t drafts on)."""

    u: FloatArray
    value: FloatArray
    slope: FloatArray
    ptr: IntArray

    @classmethod
    def stop(cls, e1: FloatArray, width: int, column: int) -> _Pieces:
        """Stopping whatever π, one document per entry of ``e1`` = E(s+1): cost π E(s+1),
        π tokens at ``column``."""
        slope = np.zeros((e1.size, width))
        slope[:, 0] = e1
        slope[:, 2 + column] = 1.0
        return cls(np.zeros(e1.size), np.zeros((e1.size, width)), slope,
                   np.arange(e1.size + 1))

    def piece(self, owner: IntArray, z: FloatArray) -> IntArray:
        """The piece of document ``owner[i]`` holding π = ``z[i]`` (z >= 0): its last u <= z,
        as :func:`numpy.searchsorted` (side right) finds it in that document's pieces."""
        counts = np.diff(self.ptr)
        mine = np.repeat(np.arange(counts.size), counts)
        same = mine[1:] == mine[:-1]
        if np.any(same & (self.u[1:] < self.u[:-1])):  # a cut rounded past the next piece
            out = np.empty(z.size, dtype=np.intp)
            for j in np.unique(owner):
                sel = owner == j
                lo = self.ptr[j]
                out[sel] = lo + np.searchsorted(self.u[lo:self.ptr[j + 1]], z[sel],
                                                side="right") - 1
            return out
        keys = np.concatenate([mine, owner])
        vals = np.concatenate([self.u, z])
        kind = np.concatenate([np.zeros(self.u.size, dtype=np.intp),
                               np.ones(z.size, dtype=np.intp)])
        order = np.lexsort((kind, vals, keys))  # a breakpoint before a query at equal π
        seen = np.cumsum(kind[order] == 0)
        out = np.empty(z.size, dtype=np.intp)
        at = order >= self.u.size
        out[order[at] - self.u.size] = seen[at] - 1
        return out

    def at(self, owner: IntArray, z: FloatArray) -> tuple[FloatArray, FloatArray]:
        i = self.piece(owner, z)
        return self.value[i] + self.slope[i] * (z - self.u[i])[:, None], self.slope[i]


@dataclass(frozen=True)
class _Rows:
    """Each position's distinct accept values of live draft tokens (q > 0, accept > 0) in
    ascending order, their draft weights (rows ``ptr[s]:ptr[s+1]``), and ``dead`` the
    position's draft mass accepted with probability 0."""

    vals: FloatArray
    weights: FloatArray
    ptr: IntArray
    dead: FloatArray

    @classmethod
    def of(cls, q: FloatArray, a: FloatArray) -> _Rows:
        live = (q > 0) & (a > 0)
        row, _ = np.nonzero(live)
        av, qv = a[live], q[live]  # row-major: each row's tokens in column order
        order = np.lexsort((av, row))
        new = np.ones(order.size, dtype=bool)
        new[1:] = (row[order][1:] != row[order][:-1]) | (av[order][1:] != av[order][:-1])
        group = np.empty(order.size, dtype=np.intp)
        group[order] = np.cumsum(new) - 1
        # one bin per (position, value), summed in column order as a row's own bincount
        weights = np.bincount(group, weights=qv, minlength=int(new.sum()))
        counts = np.bincount(row[order][new], minlength=q.shape[0])
        dead = np.zeros(q.shape[0])
        lost = (q > 0) & ~live
        many = np.flatnonzero(lost.sum(axis=1) > 2)
        for s in many:  # numpy's own sum order
            dead[s] = float(q[s][~live[s]].sum())
        few = np.flatnonzero(lost.any(axis=1) & (lost.sum(axis=1) <= 2))
        for s in few:
            x = q[s][lost[s]]  # zeros change no sum, and x + y == y + x
            dead[s] = x[0] if x.size == 1 else x[0] + x[1]
        return cls(av[order][new], weights, _ptr(counts), dead)


def _step(child: _Pieces, rows: _Rows, s: IntArray, beta: FloatArray, e1: FloatArray,
          c: float, column: int) -> tuple[FloatArray, _Pieces]:
    """(thresholds, functions) at (s, k) from the children at (s+1, k-1), one document per
    entry of ``s``; ``column`` = d + 1: the tokens a stop or a rejection here emits."""
    n, width = s.size, child.value.shape[1]
    kids = np.diff(child.ptr)
    own_j, loc_j = _ranges(rows.ptr[s + 1] - rows.ptr[s])  # each document's accept values
    j = rows.ptr[s][own_j] + loc_j
    v, w = rows.vals[j], rows.weights[j]
    m = np.bincount(own_j, minlength=n)
    pair, loc = _ranges(kids[own_j])  # (value, child breakpoint) of the same document
    cu = child.u[child.ptr[own_j[pair]] + loc]
    keep = cu < v[pair]
    cand = np.concatenate([np.zeros(n), cu[keep] / v[pair][keep]])
    whose = np.concatenate([np.arange(n), own_j[pair][keep]])
    order = np.lexsort((cand, whose))
    cand, whose = cand[order], whose[order]
    new = np.ones(cand.size, dtype=bool)
    new[1:] = (whose[1:] != whose[:-1]) | (cand[1:] != cand[:-1])
    u, ow = cand[new], whose[new]
    size = np.bincount(ow, minlength=n)
    if size.max() > MAX_BREAKPOINTS:
        raise ValueError(f"the optimal policy's envelope on the trace has {size.max()} "
                         f"breakpoints, more than {MAX_BREAKPOINTS}")
    uptr = _ptr(size)
    go_v = np.zeros((u.size, width))
    go_s = np.zeros((u.size, width))
    go_v[:, 0] = c
    go_v[:, 1] = 1.0
    go_s[:, 0] = ((1.0 - beta) * e1)[ow]
    go_s[:, 2 + column] = (1.0 - beta)[ow]
    go_v += go_s * u[:, None]
    head = child.ptr[:-1]
    zero_v = child.value[head] + child.slope[head] * (0.0 - child.u[head])[:, None]
    go_v += (rows.dead[s][:, None] * zero_v)[ow]
    # each child is linear on the image of a parent segment [u_j, u_j+1): read its piece at
    # the segment's middle (a breakpoint's image u_j v may round to either side of it)
    nxt = np.append(u[1:], 1.0)
    nxt[uptr[1:] - 1] = 1.0
    mid = (u + nxt) / 2.0
    pj, lk = _ranges(size[own_j])  # (value, segment) of the same document, value-major
    seg = uptr[own_j[pj]] + lk
    z = v[pj] * mid[seg]
    cv, cs = child.at(own_j[pj], z)
    cs = cs * v[pj][:, None]  # slope in π
    cv = cv - cs * (mid[seg] - u[seg])[:, None]
    qptr, vptr = _ptr(m * size), _ptr(m)
    for k in range(n):  # the children's mix, one dot per document (BLAS's own sum order)
        a, b = qptr[k], qptr[k + 1]
        lhs = w[vptr[k]:vptr[k + 1]].reshape(1, m[k])
        lo, hi = uptr[k], uptr[k + 1]
        go_v[lo:hi] += np.dot(lhs, cv[a:b].reshape(m[k], -1)).reshape(hi - lo, width)
        go_s[lo:hi] += np.dot(lhs, cs[a:b].reshape(m[k], -1)).reshape(hi - lo, width)
    e1o = e1[ow]
    D = go_v[:, 0] - u * e1o  # continue - stop: concave, c > 0 at 0
    slope_d = go_s[:, 0] - e1o
    last = uptr[1:] - 1
    end_d = D[last] + slope_d[last] * (1.0 - u[last])
    go = ~(end_d > 0)  # else stop whatever π
    pos = np.where(D <= 0, np.arange(u.size), u.size)
    first = np.minimum.reduceat(pos, uptr[:-1])
    i = np.where(first < uptr[1:], first - uptr[:-1], size)  # first breakpoint where going on pays
    prev = np.where(i > 0, uptr[:-1] + i - 1, last)
    g = np.flatnonzero(go)
    p = prev[g]
    cut = np.full(n, np.inf)
    cut[g] = u[p] - D[p] / slope_d[p]
    head_v = go_v[p] + go_s[p] * (cut[g] - u[p])[:, None]
    count = np.where(go, 2 + size - i, 1)
    nptr = _ptr(count)
    out_u = np.zeros(nptr[-1])
    out_v = np.zeros((nptr[-1], width))
    out_s = np.zeros((nptr[-1], width))
    out_s[nptr[:-1], 0] = e1
    out_s[nptr[:-1], 2 + column] = 1.0
    out_u[nptr[g] + 1] = cut[g]
    out_v[nptr[g] + 1] = head_v
    out_s[nptr[g] + 1] = go_s[p]
    tail = go[ow] & (np.arange(u.size) - uptr[ow] >= i[ow])
    dest = nptr[ow[tail]] + 2 + np.arange(u.size)[tail] - uptr[ow[tail]] - i[ow[tail]]
    out_u[dest] = u[tail]
    out_v[dest] = go_v[tail]
    out_s[dest] = go_s[tail]
    return cut, _Pieces(out_u, out_v, out_s, nptr)


def solve(q: FloatArray, accept: FloatArray, doc_start: IntArray, gamma: int, c: float
          ) -> OptimalRounds:
    """The optimal policy on dense rows ``q``, ``accept`` (N, V) of a trace with documents at
    ``doc_start``, for a cap of γ drafts and a draft cost c: for each start t (last first) the
    backward DP over its round's states (s = t + d, k = γ - d), d = γ .. 0. Documents are
    independent: the starts r positions before their document's end are solved together."""
    n = q.shape[0]
    beta = (q * accept).sum(axis=1)
    rows = _Rows.of(q, accept)
    lengths = np.diff(doc_start)
    width = gamma + 4
    t = np.full((gamma + 1, n + gamma + 1), np.inf)
    cost = np.zeros(n)
    emitted, drafted = np.zeros((n, gamma + 2)), np.zeros(n)
    most = 1
    for r in range(1, int(lengths.max(initial=0)) + 1):
        start = doc_start[1:][lengths >= r] - r

        def ahead(i: int, start: IntArray = start, r: int = r) -> FloatArray:
            """E(start + i), 0 at and beyond the document's end."""
            return cost[start + i] if i < r else np.zeros(start.size)

        fn = _Pieces.stop(ahead(gamma + 1), width, gamma + 1)
        for d in range(gamma - 1, -1, -1):
            if d >= r:  # no draft beyond the document's end: stop
                fn = _Pieces.stop(np.zeros(start.size), width, d + 1)
                continue
            s = start + d
            cut, fn = _step(fn, rows, s, beta[s], ahead(d + 1), c, d + 1)
            t[gamma - d, s] = cut
            most = max(most, int(np.diff(fn.ptr).max()))
        at_one, _ = fn.at(np.arange(start.size), np.ones(start.size))
        cost[start] = 1.0 + at_one[:, 0]
        drafted[start] = at_one[:, 1]
        emitted[start] = at_one[:, 2:]
    return OptimalRounds(t[:, :n], truncate(np.clip(emitted, 0.0, None), doc_start),
                         drafted, cost, most)
