"""The data a verification scheme's round hands back, and the checks of its rows.

:class:`RoundSample` (one round of n chains), :class:`LawSize` (what a scheme's law and play
cost) and the validated position-indexed rows of a ``window_law`` (:func:`checked_windows`,
:func:`indexed_windows`) or any two arrays of rows (:func:`checked_pair`). The interface every
scheme meets -- ``law``, ``play``, ``footprint`` and the optional ``window_law`` -- is
:mod:`specsim.schemes.base`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from specsim.resources import Footprint

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]
BoolArray = NDArray[np.bool_]

__all__ = ["ROW_SUM_TOL", "BoolArray", "LawSize", "RoundSample", "checked_pair", "checked_rows",
           "checked_windows", "indexed_windows"]

ROW_SUM_TOL = 1e-9


def checked_windows(p: object, q: object, gamma: int,
                    at: object = None) -> tuple[FloatArray, FloatArray]:
    """Validated position-indexed rows p, q (n, γ+1, V) of ``window_law`` (given as rows and
    ``at``: those rows gathered, :func:`indexed_windows`): ValueError otherwise, naming what
    is wrong."""
    if at is not None:
        rows_p, rows_q, idx = indexed_windows(p, q, gamma, at)
        return rows_p[idx], rows_q[idx]
    return checked_pair(("p", p), ("q", q), f"(n, gamma+1, V) = (n, {gamma + 1}, V) rows",
                        lambda a: a.ndim == 3 and a.shape[1] == gamma + 1 and a.shape[2] > 0)


def indexed_windows(p: object, q: object, gamma: int,
                    at: object = None) -> tuple[FloatArray, FloatArray, IntArray]:
    """``window_law``'s rows as distinct rows p, q (R, V) and the row each of n starts meets at
    each depth, ``at`` (n, γ+1), validated (ValueError naming what is wrong); without ``at``,
    p, q are (n, γ+1, V) windows and every (start, depth) is its own row."""
    if at is None:
        p, q = checked_windows(p, q, gamma)
        n, _, v = p.shape
        return (p.reshape(-1, v), q.reshape(-1, v),
                np.arange(n * (gamma + 1), dtype=np.intp).reshape(n, gamma + 1))
    rows_p, rows_q = checked_pair(("p", p), ("q", q), "(R, V) rows with at",
                                  lambda a: a.ndim == 2 and a.shape[1] > 0)
    idx = np.asarray(at)
    if idx.ndim != 2 or idx.shape[1] != gamma + 1 or not np.issubdtype(idx.dtype, np.integer) \
            or ((idx < 0) | (idx >= rows_p.shape[0])).any():
        raise ValueError(f"at must be (n, gamma+1) = (n, {gamma + 1}) row indices in "
                         f"[0, {rows_p.shape[0]}), got shape {idx.shape}")
    return rows_p, rows_q, idx.astype(np.intp, copy=False)


def checked_pair(first: tuple[str, object], second: tuple[str, object], want: str,
                 fits: Callable[[FloatArray], bool]) -> tuple[FloatArray, FloatArray]:
    """Two (name, array) of distribution rows (:func:`checked_rows`) of one shape that
    ``fits``, as floats; ValueError naming the array otherwise (it ``must be <want>``)."""
    out = []
    for name, t in (first, second):
        a = np.asarray(t, dtype=np.float64)
        if not fits(a):
            raise ValueError(f"{name} must be {want}, got shape {a.shape}")
        out.append(checked_rows(name, a))
    if out[0].shape != out[1].shape:
        raise ValueError(f"{first[0]} and {second[0]} shapes differ: {out[0].shape} vs "
                         f"{out[1].shape}")
    return out[0], out[1]


def checked_rows(name: str, rows: FloatArray) -> FloatArray:
    """``rows`` whose last axis holds distributions: finite, >= 0, summing to 1 within
    :data:`ROW_SUM_TOL`; ValueError naming ``name`` otherwise."""
    if not np.isfinite(rows).all() or (rows < 0).any() or \
            (np.abs(rows.sum(axis=-1) - 1.0) > ROW_SUM_TOL).any():
        raise ValueError(f"{name} must be finite, >= 0, rows summing to 1 "
                         f"(tolerance {ROW_SUM_TOL})")
    return rows


@dataclass(frozen=True)
class RoundSample:
    """One round for n chains: emitted tokens (n, L) as context states of P, padded with -1
    after the last one; how many were emitted (n,); the next scheme state (n,); how many draft
    tokens were proposed (n,)."""

    tokens: IntArray
    n_emitted: IntArray
    next_state: IntArray
    drafted: IntArray


class LawSize(NamedTuple):
    """What a scheme's ``law`` and ``play`` cost: N scheme states, building the law (None: it
    refuses, the point is Monte Carlo only) and one call of ``play`` on a chunk of chains
    (its cells and operations; the caller counts the calls and the rounds); ``refused``: the
    law's own refusal, when the module words it (the same text ``law`` raises)."""

    states: int
    law: Footprint | None
    play: Footprint
    refused: str = ""
