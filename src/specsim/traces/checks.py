"""The checks every trace passes before anything uses it (on read and before writing).

Each failure raises :class:`TraceFileError` with one line naming the file, the column and the
first offending row (:mod:`specsim.traces.format` documents the schema).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from specsim.errors import ConfigError
from specsim.sampling import IntArray

if TYPE_CHECKING:
    from specsim.traces.trace import Trace

__all__ = ["SUM_TOL", "TraceFileError", "check_trace"]

#: |Σ p + p_tail - 1| allowed per row (float32 probabilities summed over a top-k support).
SUM_TOL = 1e-5


class TraceFileError(ConfigError):
    """A trace file that cannot be used; the message names the file and the column."""


def _fail(where: str, column: str, what: str, rows: np.ndarray) -> None:
    bad = np.flatnonzero(rows)
    if bad.size:
        raise TraceFileError(f"{where}: column {column!r}: {what} (row {int(bad[0])}"
                             f"{f' and {bad.size - 1} more' if bad.size > 1 else ''})")


def check_trace(t: Trace, where: str, pos: IntArray | None = None,
                  doc: IntArray | None = None) -> None:
    """Every check of a trace's arrays (``pos``/``doc``: the file's columns, when read)."""
    n = t.n_positions
    if n == 0:
        raise TraceFileError(f"{where}: column 'doc': the trace has no positions")
    if doc is not None:
        ids = doc[t.doc_start[:-1]]
        _fail(where, "doc", "documents must be numbered 0, 1, ... with each document's "
              "positions together", ids != np.arange(ids.size))
    if t.n_docs != int(t.meta.get("documents", -1)):
        raise TraceFileError(f"{where}: column 'doc': {t.n_docs} documents with positions but "
                             f"metadata documents = {t.meta.get('documents')!r} (a document "
                             f"with no positions, or a wrong count)")
    if pos is not None:
        expect = np.arange(n) - np.repeat(t.doc_start[:-1], t.doc_lengths)
        _fail(where, "pos", "positions must run 0, 1, ... within each document", pos != expect)
    vocab = t.vocab
    lens = np.diff(t.offsets)
    _fail(where, "support", "an empty support", lens == 0)
    _fail(where, "token", f"a token outside [-1, vocab = {vocab})",
          (t.token < -1) | (t.token >= vocab))
    row = np.repeat(np.arange(n), lens)
    bad_id = (t.support < 0) | (t.support >= vocab)
    _fail(where, "support", f"a token id outside [0, vocab = {vocab})",
          np.bincount(row[bad_id], minlength=n) > 0)
    order = np.lexsort((t.support, row))
    s, r = t.support[order], row[order]
    dup = (s[1:] == s[:-1]) & (r[1:] == r[:-1])
    _fail(where, "support", "a token id listed twice", np.bincount(r[1:][dup], minlength=n) > 0)
    for name in ("p", "q"):
        v = getattr(t, name)
        bad = ~np.isfinite(v) | (v < 0) | (v > 1)
        _fail(where, name, "a probability that is not a finite number in [0, 1]",
              np.bincount(row[bad], minlength=n) > 0)
        tail = getattr(t, f"{name}_tail")
        _fail(where, f"{name}_tail", "a tail mass that is not a finite number in [0, 1]",
              ~np.isfinite(tail) | (tail < 0) | (tail > 1))
        total = np.bincount(row, weights=v, minlength=n) + tail
        _fail(where, name, f"a row that is not a distribution: sum({name}) + {name}_tail "
              f"differs from 1 by more than {SUM_TOL:g}", ~(np.abs(total - 1.0) <= SUM_TOL))
    kept = np.bincount(row, weights=np.minimum(t.p, t.q), minlength=n)
    a = t.alpha
    _fail(where, "alpha", "not a finite number in [0, 1]", ~np.isfinite(a) | (a < 0) | (a > 1))
    _fail(where, "alpha", "below sum(min(p, q)) over the kept support (alpha is the overlap of "
          "the full rows)", a < kept - SUM_TOL)
    _fail(where, "alpha", "above sum(min(p, q)) over the support plus min(p_tail, q_tail)",
          a > kept + np.minimum(t.p_tail, t.q_tail) + SUM_TOL)
