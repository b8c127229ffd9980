"""Verification schemes and draft-length policies on a trace: the positional traversal, exact,
with a Monte Carlo of the same rounds beside it.

A round from position t meets the frozen pairs t, t+1, ... (:mod:`.positional`); for a scheme
of :mod:`specsim.schemes` its law from t is the scheme's own law on the window of those pairs
(:func:`.frozen.window_chain`). Two ways to get it, one exact answer:

* **token-wise rules** (``correct``, ``lenient``, ``typical``) under the policies ``fixed``,
  ``confidence`` and ``heuristic``: in a frozen window the row at a position does not depend on
  the tokens emitted before it, so the draft at position s is accepted and drafting goes on with
  a_s = Σ_x q_s(x) accept_s(x) (1 - stop_s(x)), accepted and stopped with
  b_s = Σ_x q_s(x) accept_s(x) stop_s(x), rejected with 1 - a_s - b_s, independently across
  positions (accept: the rule's table; stop: the confidence policy's, :mod:`specsim.schemes`).
  The law of every start is then a product over positions, vectorised over all N starts
  (:func:`tokenwise_laws`); tests check it against the scheme's own law on the window chain.
* **whole-draft rules** (``block``, the multi-draft rules, ``tree``, ``traversal``): the
  rule's own ``window_law`` on the rows of every start's window (:mod:`specsim.schemes.base`,
  :func:`window_laws`): the multi-draft rules and trees lump their (context, survivors)
  chain to survivors alone there (a depth's rows do not depend on the token emitted),
  traversal runs its recursion with cells merged by (start, weight), block enumerates each
  start's draft paths; each equals the rule's law on the start's window chain
  (``tests/unit/families/test_trace_family.py``).

Rows are the trace's dense rows (:func:`.frozen.dense_rows`): the stored support and one *tail
token* holding the tail mass, so ``correct`` accepts with Σ min(p, q) over those W+1 stand-ins,
which is the recorded α when the support is full and up to min(p_tail, q_tail) above it
otherwise (the long-run measure's rules use the recorded α, :func:`.positional.acceptance`).

The long run traverses each document (each starts a fresh generation: draft length γ for the
``heuristic`` schedule) by a backward DP over (position, draft length) and counts expected
rounds per (position, draft length) forward (:func:`traverse_schedule`; with one draft length it
is :func:`.positional.traverse`). Tokens per target call = Σ_d T_d / Σ_d E[calls_d], drafted
tokens per round = Σ visits x drafted / Σ visits. :func:`simulate` plays rounds for chains
started from the stationary law of (position, draft length): token-wise rules draw every draft
token from q_s and test it with the rule's table (the round itself, not its law); whole-draft
rules draw each round's tokens from its start's exact law.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from specsim.engine import run_chains
from specsim.sampling import FloatArray, GuidedRows, IntArray
from specsim.schemes import Scheme
from specsim.traces.format import Trace
from specsim.traces.frozen import dense_rows, window_positions, window_rows
from specsim.traces.optimal import solve
from specsim.traces.positional import truncate

__all__ = ["MAX_WINDOW_SECONDS", "SAMPLE_STARTS", "WINDOW_CHUNK", "ScheduleLaws", "SchemeRates",
           "check_work", "rates", "schedule_laws", "simulate", "tokenwise_laws", "tokenwise_rows",
           "traverse_schedule", "window_laws", "window_laws_of"]


def _remaining(doc_start: IntArray) -> IntArray:
    """T - t per position: tokens left in its document from there."""
    return np.repeat(doc_start[1:], np.diff(doc_start)) - np.arange(int(doc_start[-1]))


Rows = tuple[FloatArray, FloatArray]  # every position's dense rows p, q (N, W+1)


def _rows(trace: Trace, rows: Rows | None) -> Rows:
    """``rows`` where the caller holds them (built once for many questions), else built."""
    return dense_rows(trace, np.arange(trace.n_positions)) if rows is None else rows


def tokenwise_rows(trace: Trace, scheme: Scheme,
                   rows: Rows | None = None) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(q, accept, stop) on every position's dense rows (N, W+1) (``rows``: those rows, if
    the caller holds them): the draft's law, the rule's accept table
    (:meth:`specsim.schemes.Scheme.accepts`) and the policy's stop table where its stop reads
    the drafted token (:meth:`specsim.schemes.Scheme.stop_table`; zeros otherwise)."""
    p, q = _rows(trace, rows)
    accept = scheme.accepts(p, q)
    assert accept is not None  # a token-wise rule
    stop = scheme.stop_table(q)
    return q, accept, np.zeros_like(q) if stop is None else stop


def tokenwise_laws(go: FloatArray, halt: FloatArray, doc_start: IntArray, gamma: int,
                   cont: FloatArray | None = None) -> tuple[FloatArray, FloatArray]:
    """(law of emitted tokens (N, γ+2) cut at the document's end, expected drafts (N,)) of a
    token-wise round from every start: the draft at position s is accepted and drafting goes on
    with ``go[s]``, accepted and drafting stops with ``halt[s]``, rejected otherwise; drafting
    goes on after the draft at s (accepted or not: drafts are made before they are verified)
    with ``cont[s]`` (default 1: γ drafts). Drafts stop at the document's end (a draft beyond
    it is never made)."""
    n = go.size
    rem = _remaining(doc_start)
    t = np.arange(n)
    cont = np.ones(n) if cont is None else cont
    emitted = np.zeros((n, gamma + 2))
    drafted = np.zeros(n)
    reach = np.ones(n)  # P(drafts 1..i-1 accepted and drafting went on)
    made = np.ones(n)  # P(draft i is made)
    for i in range(1, gamma + 1):
        s = np.minimum(t + i - 1, n - 1)
        inside = i <= rem
        a = np.where(inside, go[s], 1.0)
        b = np.where(inside, halt[s], 0.0)
        drafted += made * inside
        made = made * cont[s]
        emitted[:, i] += reach * (1.0 - a - b)  # rejected: i - 1 drafts and the residual
        if i < gamma:
            emitted[:, i + 1] += reach * b  # accepted, then drafting stopped: a bonus token
            reach = reach * a
        else:
            emitted[:, gamma + 1] += reach * (a + b)
    return truncate(np.clip(emitted, 0.0, None), doc_start), drafted


#: Largest estimated time (seconds) a whole-draft rule's window laws may take on one point.
MAX_WINDOW_SECONDS = 90.0


#: Starts per call of a rule's ``window_law`` (their rows: WINDOW_CHUNK (γ+1) (W+1) each).
WINDOW_CHUNK = 4096


#: Starts whose windows a rule whose time depends on the rows (traversal) estimates it from.
SAMPLE_STARTS = 512


def check_work(positions: int, width: int, scheme: Scheme, gamma: int,
               trace: Trace | None = None) -> None:
    """ValueError unless ``scheme``'s per-start laws on a trace of ``positions`` starts and
    ``width`` support entries per row take at most :data:`MAX_WINDOW_SECONDS` by the rule's
    own estimate (:meth:`specsim.schemes.Scheme.window_seconds`, measured on one core, on
    W+1 stand-in tokens; with the ``trace`` at hand, from the windows of
    :data:`SAMPLE_STARTS` evenly spaced starts for a rule that needs them -- without, such a
    rule is checked when its point job has the trace); token-wise rules cost O(N γ): always."""
    if not window_laws_of(scheme):
        return
    if not scheme.has_window_law:
        raise ValueError(f"{scheme.rule_segment} has no exact law on a trace's windows yet; use "
                         f"it on table models or the i.i.d. stub")
    rows = None
    if trace is not None:
        n = trace.n_positions
        sample = np.unique(np.linspace(0, n - 1, min(n, SAMPLE_STARTS)).astype(np.intp))
        rows = window_rows(trace, sample, gamma + 1)
    est = scheme.window_seconds(positions, width + 1, gamma, rows)
    if est is not None and est > MAX_WINDOW_SECONDS:
        raise ValueError(f"{scheme.rule_segment} at gamma={gamma} computes every start's exact "
                         f"law on its window ({positions} starts, {width + 1} "
                         f"stand-in tokens per position): ~{est:.0f} s, more than "
                         f"{MAX_WINDOW_SECONDS:g} s; lower gamma, record fewer positions or use "
                         f"a token-wise rule")


def window_laws(trace: Trace, gamma: int,
                law: Callable[[FloatArray, FloatArray, IntArray], tuple[FloatArray, FloatArray]],
                rows: Rows | None = None) -> tuple[FloatArray, FloatArray]:
    """The same for a whole-draft rule: its ``window_law`` (:mod:`specsim.schemes.base`; ``law``
    maps rows p, q (R, V) and the row each of n starts meets at each depth, ``at`` (n, γ+1), to
    the law (n, γ+2) and the drafted tokens through each depth) on every start's window of
    frozen dense rows, :data:`WINDOW_CHUNK` starts at a time, each position's row once (the
    window stays inside its document: past its end the last pair repeats, and the law is cut
    at the end). Drafts beyond the document's end are not counted (a round drafts only the
    depths left: the rule's drafted tokens through that depth; ``rows``: the trace's dense
    rows, if the caller holds them)."""
    n = trace.n_positions
    rem = _remaining(trace.doc_start)
    p, q = _rows(trace, rows)
    emitted, drafted = np.zeros((n, gamma + 2)), np.zeros(n)
    for lo in range(0, n, WINDOW_CHUNK):
        t = np.arange(lo, min(lo + WINDOW_CHUNK, n))
        at = window_positions(trace, t, gamma + 1)  # positions lo .. at most hi - 1 + γ
        top = int(at.max()) + 1
        emitted[t], by_depth = law(p[lo:top], q[lo:top], at - lo)
        drafted[t] = by_depth[np.minimum(gamma, rem[t])]
    return truncate(emitted, trace.doc_start), drafted


@dataclass(frozen=True)
class ScheduleLaws:
    """Per-start round laws of a scheme on a trace, one set per draft length the policy can be
    at: ``gammas[k]`` is state k's draft length, ``emitted[k]`` (N, gammas[k]+2) and
    ``drafted[k]`` (N,) its laws; ``first`` the state a document starts in; ``after(k, full)``
    the next state after a round that did (not) accept every draft (``step``: the policy's
    next draft length, :meth:`specsim.schemes.Scheme.next_length`; None: one draft length)."""

    gammas: tuple[int, ...]
    emitted: tuple[FloatArray, ...]
    drafted: FloatArray  # (K, N)
    first: int
    step: Callable[[IntArray, IntArray], IntArray] | None
    rows: tuple[FloatArray, FloatArray, FloatArray] | None  # token-wise: (q, accept, stop)
    thresholds: FloatArray | None = None  # optimal: draft at s, k left, iff π >= t[k, s]

    @classmethod
    def one_length(cls, gamma: int, emitted: FloatArray, drafted: FloatArray,
                   rows: tuple[FloatArray, FloatArray, FloatArray] | None = None,
                   thresholds: FloatArray | None = None) -> ScheduleLaws:
        """The laws of a policy with one draft length γ: ``emitted`` (N, γ+2), ``drafted``
        (N,)."""
        return cls((gamma,), (emitted,), drafted[None, :], 0, None, rows, thresholds)

    def after(self, k: IntArray, full: IntArray) -> IntArray:
        if self.step is None:
            return np.zeros_like(np.asarray(k))
        gammas = np.asarray(self.gammas)
        return np.searchsorted(gammas, self.step(gammas[k], full)).astype(np.intp)


def window_laws_of(scheme: Scheme) -> bool:
    """Whether ``scheme``'s per-start laws come from its exact law on each start's window
    (:func:`window_laws`: whole-draft rules) rather than the token-wise recursion."""
    return not scheme.tokenwise


def schedule_laws(trace: Trace, scheme: Scheme, gamma: int,
                  dense: Rows | None = None) -> ScheduleLaws:
    """The per-start laws of ``scheme`` at draft length γ (every length 1..cap for the
    heuristic schedule; ``dense``: the trace's dense rows, if the caller holds them)."""
    if window_laws_of(scheme):
        check_work(trace.n_positions, trace.width, scheme, gamma, trace)
        emitted, drafted = window_laws(trace, gamma,
                                       lambda p, q, at: scheme.window_law(p, q, gamma, at),
                                       dense)
        return ScheduleLaws.one_length(gamma, emitted, drafted)
    rows = tokenwise_rows(trace, scheme, dense)
    q, accept, stop = rows
    c = scheme.optimal_cost
    if c is not None:  # its stop depends on π, not on the drafted token alone
        sol = solve(q, accept, trace.doc_start, gamma, c)
        return ScheduleLaws.one_length(gamma, sol.emitted, sol.drafted, rows, sol.thresholds)
    go = (q * accept * (1.0 - stop)).sum(axis=1)
    halt = (q * accept * stop).sum(axis=1)
    cont = (q * (1.0 - stop)).sum(axis=1)
    gammas = scheme.draft_lengths(gamma)
    laws = [tokenwise_laws(go, halt, trace.doc_start, g, cont) for g in gammas]
    step = scheme.next_length if len(gammas) > 1 else None
    return ScheduleLaws(gammas, tuple(e for e, _ in laws), np.stack([d for _, d in laws]),
                        gammas.index(gamma), step, rows)


def traverse_schedule(laws: ScheduleLaws, doc_start: IntArray) -> tuple[FloatArray, FloatArray]:
    """(expected target calls to traverse each document (D,), expected rounds starting at each
    (draft-length state, position) (K, N)): backward over tokens left, E(t, k) = 1 +
    Σ_n P(n | t, k) E(t + n, k'), E = 0 at the end; forward from (doc start, first state)."""
    n = int(doc_start[-1])
    rem = _remaining(doc_start)
    k_states = len(laws.gammas)
    by_rem = [np.flatnonzero(rem == r) for r in range(int(rem.max()) + 1)]
    calls = np.zeros((k_states, n + 1))
    moves = [(k, m, int(laws.after(np.array(k), np.array(m == laws.gammas[k] + 1))))
             for k in range(k_states) for m in range(1, laws.gammas[k] + 2)]
    for r in range(1, len(by_rem)):
        idx = by_rem[r]
        total = np.ones((k_states, idx.size))
        for k, m, k2 in moves:
            if m < r:  # the round ends inside the document
                total[k] += laws.emitted[k][idx, m] * calls[k2, idx + m]
        calls[:, idx] = total
    visits = np.zeros((k_states, n))
    visits[laws.first, doc_start[:-1]] = 1.0
    for r in range(len(by_rem) - 1, 0, -1):
        idx = by_rem[r]
        for k, m, k2 in moves:
            if m < r:
                visits[k2, idx + m] += visits[k, idx] * laws.emitted[k][idx, m]
    return calls[laws.first, doc_start[:-1]], visits


@dataclass(frozen=True)
class SchemeRates:
    """The exact long run of a scheme on a trace."""

    tokens_per_call: float
    drafted_per_round: float
    tokens_law: FloatArray  # stationary law of tokens emitted per round
    calls: FloatArray  # (D,)
    visits: FloatArray  # (K, N)


def rates(laws: ScheduleLaws, doc_start: IntArray) -> SchemeRates:
    calls, visits = traverse_schedule(laws, doc_start)
    total = float(calls.sum())
    width = max(e.shape[1] for e in laws.emitted)
    law = np.zeros(width)
    for k, e in enumerate(laws.emitted):
        law[: e.shape[1]] += visits[k] @ e
    return SchemeRates(float(np.diff(doc_start).sum()) / total,
                       float((visits * laws.drafted).sum()) / total, law / total, calls, visits)


def _draft_round(draw: GuidedRows, accept: FloatArray, stop: FloatArray,
                 thresholds: FloatArray | None, t: IntArray, g: IntArray, left: IntArray,
                 u: FloatArray, n: int) -> tuple[IntArray, IntArray]:
    """(drafts accepted before the first rejection, drafts made) per chain of one token-wise
    round from positions ``t``: draft i at s = t + i from q_s with u[0, i], accepted iff
    u[1, i] < accept[s, x], drafting stops after it iff u[2, i] < stop[s, x], at the cap g,
    at the document's end (``left``) and, under the optimal policy, when π < thresholds[g - i,
    s]. The chains still drafting are kept in compact arrays."""
    size = t.size
    accepted = np.zeros(size, dtype=np.intp)
    drafts = np.zeros(size, dtype=np.intp)
    live = np.arange(size)
    leading = np.ones(size, dtype=bool)  # every draft so far accepted
    pi = np.ones(size)  # P(every draft so far accepted), for the optimal policy
    got = np.zeros(size, dtype=np.intp)
    for i in range(u.shape[1]):
        s = np.minimum(t + i, n - 1)
        go = (i < g) & (i < left)
        if thresholds is not None:  # draft at s with g - i left iff π >= t
            go &= pi >= thresholds[np.maximum(g - i, 0), s]
        if not go.all():
            accepted[live[~go]], drafts[live[~go]] = got[~go], i
            live, s, t, g, left, leading, pi, got = (
                a[go] for a in (live, s, t, g, left, leading, pi, got))
            if not live.size:
                return accepted, drafts
        ui = u[:, i] if live.size == size else u[:, i, live]
        x = draw(s, ui[0])
        a = accept[s, x]
        leading &= ui[1] < a
        got += leading
        pi *= a
        on = ~(ui[2] < stop[s, x])
        if not on.all():
            accepted[live[~on]], drafts[live[~on]] = got[~on], i + 1
            live, t, g, left, leading, pi, got = (
                b[on] for b in (live, t, g, left, leading, pi, got))
    accepted[live], drafts[live] = got, u.shape[1]
    return accepted, drafts


def simulate(trace: Trace, laws: ScheduleLaws, visits: FloatArray, seed: np.random.SeedSequence,
             chains: int, rounds: int, batches: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Monte Carlo of the long run: histogram (batches, width) of tokens emitted per round and
    drafts per batch (batches,) (:func:`specsim.engine.run_chains`). Chains start from the
    stationary law of (draft-length state, position) (no burn-in needed); a chain whose
    document ends starts a uniformly random document, at the first state."""
    doc_start = trace.doc_start
    n = int(doc_start[-1])
    rem = _remaining(doc_start)
    station = np.cumsum(visits.ravel())
    station /= station[-1]
    gammas = np.asarray(laws.gammas)
    cdfs = [np.cumsum(e, axis=1) for e in laws.emitted]
    for c in cdfs:
        c[:, -1] = 1.0
    if laws.rows is not None:
        q, accept, stop = laws.rows
        draw_q = GuidedRows(q)

    def play(state: IntArray, rng: np.random.Generator) -> tuple[IntArray, IntArray, IntArray]:
        fresh = state < 0
        if fresh.any():  # a chain's first round: a start from the stationary law
            state = state.copy()
            state[fresh] = np.minimum(np.searchsorted(station, rng.random(int(fresh.sum())),
                                                      side="right"), station.size - 1)
        k, t = state // n, state % n
        g = gammas[k]
        left = rem[t]
        if laws.rows is not None:  # play the round: draft from q_s, test with the rule's table
            reach = int(g.max())
            u = rng.random((3, reach, state.size))
            accepted, drafts = _draft_round(draw_q, accept, stop, laws.thresholds, t, g, left,
                                            u, n)
            count = np.minimum(accepted + 1, left)
        else:  # a round drawn from its start's exact law
            u = rng.random(state.size)
            count = np.zeros(state.size, dtype=np.intp)
            for kk in np.unique(k):
                sel = k == kk
                count[sel] = (u[sel, None] >= cdfs[kk][t[sel]]).sum(axis=1)
            count = np.minimum(count, left)
            drafts = np.rint(laws.drafted[k, t]).astype(np.intp)
            accepted = count - 1
        done = count >= left
        k_next = laws.after(k, accepted == g)
        restart = doc_start[rng.integers(0, doc_start.size - 1, state.size)]
        nxt = np.where(done, laws.first * n + restart, k_next * n + t + count)
        return count, nxt, drafts

    def starts(m: int) -> IntArray:
        return np.full(m, -1, dtype=np.intp)

    return run_chains(play, starts, seed, chains, rounds, 0, batches, width)
