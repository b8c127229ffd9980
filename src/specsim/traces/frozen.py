"""A trace's frozen pairs as an order-1 Markov chain: the window a round from position t meets.

Under the positional model (:mod:`.positional`) a round that starts at position t of a document
meets the pairs (p_t, q_t), (p_{t+1}, q_{t+1}), ... whatever tokens it emits. Making the
position part of the state -- state ``j*(W+1) + x`` = stand-in token x emitted at window
position j, plus a start state -- turns a window of positions into an ordinary Markov pair
(P, Q) over states, exactly as the i.i.d. stub's frozen pairs
(:func:`specsim.models.iid.iid_frozen_markov`): every scheme's exact law and Monte Carlo
(:mod:`specsim.schemes`), the equivalence measure and the engine run on it unchanged.

The tokens are the trace's dense rows (:meth:`.format.Trace.dense`): the stored support padded
to the widest support W, then one *tail token* carrying each row's tail mass. A window that
would run past its document's end repeats the document's last pair (those positions are never
emitted: the positional model cuts a round at the end, :func:`.positional.truncate`).
"""

from __future__ import annotations

import numpy as np

from specsim.models.iid import chain_of_rows
from specsim.sampling import FloatArray, IntArray
from specsim.traces.format import Trace

__all__ = ["chain_of_rows", "dense_rows", "slot_ranks", "window_chain", "window_positions",
           "window_rows"]


def window_positions(trace: Trace, start: int | IntArray, length: int) -> IntArray:
    """Positions start, start+1, ..., start+length-1, clipped to ``start``'s document's last
    (length,); for an array of starts (n,), one such row per start (n, length)."""
    s = np.asarray(start, dtype=np.intp)
    doc = np.searchsorted(trace.doc_start, s, side="right") - 1
    last = trace.doc_start[doc + 1] - 1
    return np.minimum(s[..., None] + np.arange(length), last[..., None])


def window_rows(trace: Trace, starts: IntArray, length: int) -> tuple[FloatArray, FloatArray]:
    """Dense rows p, q (n, length, W+1) of the windows of ``starts`` (:func:`window_positions`,
    :func:`dense_rows`): what a whole-draft rule's ``window_law`` reads."""
    pos = window_positions(trace, starts, length)
    p, q = dense_rows(trace, pos.ravel())
    return p.reshape(*pos.shape, -1), q.reshape(*pos.shape, -1)


def dense_rows(trace: Trace, positions: IntArray) -> tuple[FloatArray, FloatArray]:
    """:meth:`.format.Trace.dense` rows renormalised to sum to 1 in float64 (a file's float32
    rows sum to 1 only within :data:`.format.SUM_TOL`)."""
    p, q = trace.dense(np.asarray(positions, dtype=np.intp))
    return p / p.sum(axis=1, keepdims=True), q / q.sum(axis=1, keepdims=True)


def window_chain(trace: Trace, start: int, length: int) -> tuple[FloatArray, FloatArray, int]:
    """(P, Q, start state) of the frozen pairs at positions start..start+length-1 (clipped to
    the document): S = length*(W+1) + 1 states. From the start state the next token is at window
    position 0; from (j, x) at position j+1; the last position is absorbing (repeats itself)."""
    p, q = dense_rows(trace, window_positions(trace, start, length))
    return chain_of_rows(p, q)


def slot_ranks(trace: Trace, positions: IntArray, tokens: int) -> IntArray:
    """Per position and dense slot (n, W+1): the slot's rank by target probability (0 = most
    likely; ties to the lower slot), ranks >= ``tokens`` - 1 and the tail token pooled into
    ``tokens`` - 1. The equivalence measure counts the first two emitted tokens on these
    ``tokens`` stand-ins: a projection, so a lossless rule's counts still follow the target's."""
    p, _ = trace.dense(np.asarray(positions, dtype=np.intp))
    body = p[:, :-1]
    order = np.argsort(-body, axis=1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(body.shape[1])[None, :], axis=1)
    ranks = np.minimum(ranks, tokens - 1)
    return np.concatenate([ranks, np.full((p.shape[0], 1), tokens - 1)], axis=1)
