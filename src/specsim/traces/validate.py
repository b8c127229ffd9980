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

__all__ = ["SUM_TOL", "TraceFileError", "check_trace", "within_unit"]

#: |Σ p + p_tail - 1| allowed per row (float32 probabilities summed over a top-k support), and
#: how far outside [0, 1] a probability, a tail or α may round (then clipped on read).
SUM_TOL = 1e-5


class TraceFileError(ConfigError):
    """A trace file that cannot be used; the message names the file and the column."""


_WITHIN = f" (within {SUM_TOL:g})"


def _outside_unit(v: np.ndarray) -> np.ndarray:
    """Entries that are no probability: not finite, or outside [0, 1] by more than
    :data:`SUM_TOL` (rows summed in float32 or float64 elsewhere land a few ulps outside: a
    draft equal to its target has α = Σ min(p, q) = Σ p, a rounding error above 1)."""
    return ~np.isfinite(v) | (v < -SUM_TOL) | (v > 1 + SUM_TOL)


def within_unit(t: Trace) -> Trace:
    """``t`` with every probability, tail and α clipped to [0, 1] (after :func:`check_trace`
    allowed them :data:`SUM_TOL` outside): what the exact laws take (1 - α >= 0)."""
    from dataclasses import replace

    outside = {name: getattr(t, name) for name in ("p", "q", "p_tail", "q_tail", "alpha")}
    outside = {k: v for k, v in outside.items() if v.size and (v.min() < 0 or v.max() > 1)}
    return replace(t, **{k: np.clip(v, 0.0, 1.0) for k, v in outside.items()}) if outside else t


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
    if n * vocab < 2**62:  # (row, token) pairs as one int each: one sort, one array
        key = np.sort(row * np.int64(vocab) + t.support)
        twice = key[1:][key[1:] == key[:-1]] // vocab
    else:
        order = np.lexsort((t.support, row))
        s, r = t.support[order], row[order]
        twice = r[1:][(s[1:] == s[:-1]) & (r[1:] == r[:-1])]
    _fail(where, "support", "a token id listed twice", np.bincount(twice, minlength=n) > 0)
    for name in ("p", "q"):
        v = getattr(t, name)
        _fail(where, name, f"a probability that is not a finite number in [0, 1]{_WITHIN}",
              np.bincount(row[_outside_unit(v)], minlength=n) > 0)
        tail = getattr(t, f"{name}_tail")
        _fail(where, f"{name}_tail", f"a tail mass that is not a finite number in "
              f"[0, 1]{_WITHIN}", _outside_unit(tail))
        total = np.bincount(row, weights=v, minlength=n) + tail
        _fail(where, name, f"a row that is not a distribution: sum({name}) + {name}_tail "
              f"differs from 1 by more than {SUM_TOL:g}", ~(np.abs(total - 1.0) <= SUM_TOL))
    kept = np.bincount(row, weights=np.minimum(t.p, t.q), minlength=n)
    a = t.alpha
    _fail(where, "alpha", f"not a finite number in [0, 1]{_WITHIN}", _outside_unit(a))
    _fail(where, "alpha", "below sum(min(p, q)) over the kept support (alpha is the overlap of "
          "the full rows)", a < kept - SUM_TOL)
    _fail(where, "alpha", "above sum(min(p, q)) over the support plus min(p_tail, q_tail)",
          a > kept + np.minimum(t.p_tail, t.q_tail) + SUM_TOL)
