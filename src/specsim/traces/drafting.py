"""Argmax drafting on a trace: every q_t one-hot on the draft's most likely token.

The trace family applies it when it loads a trace for a point whose drafting mode is
``argmax`` (:func:`specsim.families.trace.load_trace`), so every analysis of a trace -- the
positional law, schemes, the frozen pairs of the lossless check -- runs it unchanged.
"""

from __future__ import annotations

import numpy as np

from specsim.models.maths import ARGMAX_TIE_TOL
from specsim.traces.format import Trace

__all__ = ["argmax_drafted"]


def argmax_drafted(trace: Trace) -> Trace:
    """The trace with argmax drafting (:func:`specsim.models.maths.argmax_draft`): at every
    position q_t becomes the one-hot on the draft's most likely token x_t, so α_t = p_t(x_t)
    exactly (Σ min(p, onehot) = p(x)) and q's tail is empty. x_t is the kept token of largest
    q, ties within :data:`~specsim.models.maths.ARGMAX_TIE_TOL` to the smallest token id;
    it is the full row's argmax whenever the support holds q's top token: a trace whose
    metadata names a ``top_k`` keeps the top-k of q (:func:`.format.from_full_rows`), and
    elsewhere no tail token can be larger when q_tail is at most the largest kept q.
    ValueError where neither holds: the argmax is not known."""
    n = trace.n_positions
    row = np.repeat(np.arange(n), np.diff(trace.offsets))
    top = np.full(n, -np.inf)
    np.maximum.at(top, row, trace.q)
    keeps_top = isinstance(trace.meta.get("top_k"), int) and trace.meta["top_k"] >= 1
    unknown = (trace.q_tail > top + ARGMAX_TIE_TOL) & (not keeps_top)
    if np.any(unknown):
        t = int(np.flatnonzero(unknown)[0])
        raise ValueError(f"argmax drafting: at position {t} the draft's tail mass "
                         f"{trace.q_tail[t]:.6g} exceeds its largest kept probability "
                         f"{top[t]:.6g} and the trace names no top_k, so its argmax may "
                         f"lie outside the kept support")
    tied = trace.q >= top[row] - ARGMAX_TIE_TOL
    # among the tied entries of each row, the smallest token id
    key = np.where(tied, trace.support, np.iinfo(np.int64).max)
    order = np.lexsort((key, row))
    first = order[trace.offsets[:-1]]
    q = np.zeros_like(trace.q)
    q[first] = 1.0
    return Trace(dict(trace.meta, drafting="argmax"), trace.doc_start, trace.token,
                 trace.offsets, trace.support, trace.p, q, trace.p_tail,
                 np.zeros_like(trace.q_tail), trace.p[first].astype(np.float64))
