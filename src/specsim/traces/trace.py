"""A trace in memory (:class:`Trace`): both models' rows at every position, documents end to end.

The file format, its reading and its writing are :mod:`specsim.traces.format`'s (which
re-exports these names); the checks every trace passes, :mod:`specsim.traces.validate`'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specsim.sampling import FloatArray, IntArray

__all__ = ["Trace", "concat_traces", "from_full_rows", "trace_meta"]


@dataclass(frozen=True, eq=False)
class Trace:
    """A checked trace in memory: flat arrays, positions of all documents end to end.

    ``doc_start`` (D+1,) are the positions where each document starts (and the end);
    ``offsets`` (N+1,) where each position's support starts in the flat ``support``/``p``/``q``.
    """

    meta: dict[str, Any]
    doc_start: IntArray
    token: IntArray
    offsets: IntArray
    support: IntArray
    p: FloatArray
    q: FloatArray
    p_tail: FloatArray
    q_tail: FloatArray
    alpha: FloatArray
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def vocab(self) -> int:
        return int(self.meta["vocab"])

    @property
    def n_docs(self) -> int:
        return int(self.doc_start.size - 1)

    @property
    def n_positions(self) -> int:
        return int(self.alpha.size)

    @property
    def doc_lengths(self) -> IntArray:
        return np.diff(self.doc_start)

    @property
    def doc_of(self) -> IntArray:
        """Document of each position (N,)."""
        return np.repeat(np.arange(self.n_docs), self.doc_lengths)

    @property
    def width(self) -> int:
        """The largest support at any position."""
        return int(np.diff(self.offsets).max(initial=0))

    def greedy_acceptance(self) -> FloatArray:
        """q_t(argmax p_t) per position: what an argmax (greedy) rule accepts with. The
        argmax of p is kept (it is in p's top-k); ties go to the smallest token id."""
        if "greedy" not in self._cache:
            n = self.n_positions
            row = np.repeat(np.arange(n), np.diff(self.offsets))
            # order within each row by (p descending, token id ascending): first is the argmax
            order = np.lexsort((self.support, -self.p, row))
            first = order[self.offsets[:-1]]
            self._cache["greedy"] = self.q[first].astype(np.float64)
        return self._cache["greedy"]  # type: ignore[no-any-return]

    def dense(self, positions: IntArray) -> tuple[FloatArray, FloatArray]:
        """Rows (n, W+1) of p and q at ``positions``: the support in its stored order padded
        with zeros to the widest support W, then one *tail token* carrying the tail mass.
        Each row is a distribution over W+1 stand-in tokens (the frozen pairs' vocabulary)."""
        positions = np.asarray(positions, dtype=np.intp)
        w = self.width
        lo, hi = self.offsets[positions], self.offsets[positions + 1]
        n = positions.size
        p = np.zeros((n, w + 1))
        q = np.zeros((n, w + 1))
        lens = hi - lo
        row = np.repeat(np.arange(n), lens)
        col = np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens)
        flat = np.repeat(lo, lens) + col  # the entries lo..hi-1 of every row, in order
        p[row, col] = self.p[flat]
        q[row, col] = self.q[flat]
        p[:, w] = self.p_tail[positions]
        q[:, w] = self.q_tail[positions]
        return p, q

    def documents(self, docs: Sequence[int]) -> Trace:
        """The trace of the documents ``docs`` (renumbered 0..len-1 in the given order)."""
        parts = [self._slice(int(d)) for d in docs]
        return concat_traces(parts, self.meta)

    def _slice(self, d: int) -> Trace:
        a, b = int(self.doc_start[d]), int(self.doc_start[d + 1])
        lo, hi = int(self.offsets[a]), int(self.offsets[b])
        return Trace(dict(self.meta), np.array([0, b - a]), self.token[a:b],
                     self.offsets[a : b + 1] - lo, self.support[lo:hi], self.p[lo:hi],
                     self.q[lo:hi], self.p_tail[a:b], self.q_tail[a:b], self.alpha[a:b])


def trace_meta(*, pair: str, vocab: int, documents: int, **extra: Any) -> dict[str, Any]:
    """The ``specsim.trace`` metadata object (``extra``: target, draft, temperature, ...)."""
    return {"pair": pair, "vocab": int(vocab), "documents": int(documents), **extra}


def from_full_rows(P: FloatArray, Q: FloatArray, top_k: int
                   ) -> tuple[IntArray, IntArray, FloatArray, FloatArray, FloatArray,
                              FloatArray, FloatArray]:
    """Truncate full rows (n, V) to the top-k support of p ∪ q.

    Returns ``offsets`` (n+1,), ``support``, ``p``, ``q`` (flat, ids ascending within a row),
    ``p_tail``, ``q_tail``, ``alpha`` (n,) -- α and the tails from the full rows.
    """
    P = np.asarray(P, dtype=np.float64)
    Q = np.asarray(Q, dtype=np.float64)
    n, v = P.shape
    k = min(int(top_k), v)
    keep = np.zeros((n, v), dtype=bool)
    rows = np.arange(n)[:, None]
    for m in (P, Q):
        top = np.argpartition(-m, k - 1, axis=1)[:, :k] if k < v else np.arange(v)[None, :]
        keep[rows, top] = True
    counts = keep.sum(axis=1)
    r, c = np.nonzero(keep)  # row-major: ids ascending within each row
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    p, q = P[r, c], Q[r, c]
    p_tail = np.clip(1.0 - np.bincount(r, weights=p, minlength=n), 0.0, None)
    q_tail = np.clip(1.0 - np.bincount(r, weights=q, minlength=n), 0.0, None)
    # clipped: rows that sum to 1 + a few ulps would give α a few ulps above 1
    alpha = np.clip(np.minimum(P, Q).sum(axis=1), 0.0, 1.0)
    return offsets, c.astype(np.int64), p, q, p_tail, q_tail, alpha


def concat_traces(parts: Sequence[Trace], meta: Mapping[str, Any] | None = None) -> Trace:
    """Documents of ``parts`` end to end, renumbered; ``meta`` (default: the first part's) with
    ``documents`` updated."""
    if not parts:
        raise ValueError("no traces to concatenate")
    out_meta = dict(meta if meta is not None else parts[0].meta)
    doc_start = [np.zeros(1, dtype=np.int64)]
    offsets = [np.zeros(1, dtype=np.int64)]
    n = m = 0
    for t in parts:
        doc_start.append(t.doc_start[1:] + n)
        offsets.append(t.offsets[1:] + m)
        n += t.n_positions
        m += int(t.offsets[-1])
    out = Trace(out_meta, np.concatenate(doc_start), *(
        np.concatenate([getattr(t, k) for t in parts]) for k in ("token",)),
        np.concatenate(offsets), *(np.concatenate([getattr(t, k) for t in parts])
                                   for k in ("support", "p", "q", "p_tail", "q_tail", "alpha")))
    out.meta["documents"] = out.n_docs
    return out
