"""Inverse-CDF sampling from discrete distributions: every sampler specsim uses, in one place.

All samplers turn a uniform ``u`` in [0, 1) into the token ``#{k: cdf_k <= u}`` of a row's
normalised CDF (``numpy.searchsorted(cdf, u, side="right")``). Drawing by inverse CDF from
explicit uniforms (instead of ``Generator.choice``) is what lets the engine, the n-gram and
LLM experiments and :func:`specsim.verify` consume a documented, fixed number of uniforms per
round (Leviathan et al. 2022, arXiv 2211.17192, Algorithm 1 needs 2γ+1 per round), so two
implementations given the same uniforms can be compared draw for draw.

* :func:`normalised_cdf` / :func:`inverse_cdf_rows` / :func:`sample_rows` -- one draw per row of
  an explicit (..., V) array of rows;
* :func:`inverse_cdf_blocked` -- the same draw for long rows (V in the tens of thousands) without
  a full-length cumulative sum: block sums first, then one block's cumulative sum;
* :class:`TableSampler` -- many draws from the rows of one fixed table (guide tables, O(1) per
  draw); the Markov engine's sampler;
* :class:`StackedRowSampler` -- many draws from the rows of one table when V is large (the
  LLM's 49152 tokens), one ``searchsorted`` over all rows' CDFs laid end to end.

This module imports numpy only.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

__all__ = [
    "StackedRowSampler",
    "TableSampler",
    "inverse_cdf_blocked",
    "inverse_cdf_rows",
    "normalised_cdf",
    "sample_rows",
]


def normalised_cdf(probs: FloatArray) -> FloatArray:
    """Cumulative sums along the last axis, divided by the total so the last entry is exactly 1.

    Dividing (rather than overwriting the last entry with 1) keeps zero-probability trailing
    tokens at zero width, so inverse-CDF sampling never returns them.
    """
    c = np.cumsum(probs, axis=-1)
    return c / c[..., -1:]


def inverse_cdf_rows(cdf: FloatArray, u: FloatArray) -> IntArray:
    """Sample one index per row of ``cdf`` (..., V) from uniforms ``u`` (...): #{k: cdf_k <= u}."""
    v = cdf.shape[-1]
    return np.minimum((cdf <= u[..., None]).sum(axis=-1), v - 1)


def sample_rows(probs: FloatArray, u: FloatArray) -> IntArray:
    """One inverse-CDF draw per row of ``probs`` (..., V) (rows need not be normalised)."""
    return inverse_cdf_rows(normalised_cdf(probs), u)


def inverse_cdf_blocked(probs: FloatArray, u: FloatArray, block: int
                        ) -> tuple[IntArray, FloatArray]:
    """One inverse-CDF draw per row of unnormalised ``probs`` (n, V), by blocks of ``block``.

    The token is the one whose cell of [0, T) holds ``u T`` (T the row's total), as for
    :func:`sample_rows`, but found in two steps: the float64 sums of the blocks of ``block``
    tokens locate the block, then that block's cumulative sum the token. A long row costs one
    vectorised pass (``add.reduceat``) instead of a sequential cumulative sum over V. The law
    is the same; the cells' edges differ from :func:`sample_rows`' in the last bits (a draw can
    differ only when ``u`` lies within rounding of an edge). A zero-probability token is never
    returned: the result is clamped to the last token of positive mass. Returns (tokens (n,),
    totals T (n,)); a row with T = 0 (or NaN) gets some token in 0..V-1, for the caller to
    replace.
    """
    n, v = probs.shape
    rows = np.arange(n)
    starts = np.arange(0, v, block)
    sums = np.add.reduceat(probs, starts, axis=-1, dtype=np.float64)  # (n, blocks)
    csum = np.cumsum(sums, axis=-1)
    total = csum[:, -1]
    target = u * total
    k = np.minimum((csum <= target[:, None]).sum(axis=-1), starts.size - 1)
    k = _clamp_to_mass(sums, k)  # u T rounded up to T: the last block with mass
    base = csum[rows, k - 1] * (k > 0)
    raw = starts[k][:, None] + np.arange(block)
    idx = np.minimum(raw, v - 1)
    cells = probs[rows[:, None], idx]
    if starts[-1] + block > v:  # the last block is short: its padding has no mass
        cells = np.where(raw < v, cells, 0)
    local = np.cumsum(cells, axis=-1, dtype=np.float64)
    local += base[:, None]
    j = np.minimum((local <= target[:, None]).sum(axis=-1), block - 1)
    j = _clamp_to_mass(cells, j)
    return idx[rows, j], total


def _clamp_to_mass(mass: FloatArray, k: IntArray) -> IntArray:
    """``k`` (n,), or where ``mass[:, k]`` is not > 0, the last index with mass > 0 (0 if none):
    inverse CDF never returns a cell of zero width, even when rounding points there."""
    bad = ~(mass[np.arange(len(k)), k] > 0)
    if bad.any():
        last = mass.shape[-1] - 1 - np.argmax(mass[:, ::-1] > 0, axis=-1)
        k = np.where(bad, np.where(mass.max(axis=-1, initial=0) > 0, last, 0), k)
    return k


class TableSampler:
    """Exact inverse-CDF sampling from many rows of one table, vectorised over chains.

    A guide table (Chen & Asau's indexed search) splits [0, 1) into M = 2^k equal buckets.
    M grows (within a memory cap) until no bucket holds more than one *distinct* CDF value;
    then each bucket stores that value ``thr`` and the two tokens on either side of it, and a
    draw is one lookup and one comparison. Where the cap is reached first, a bucket stores the
    range of CDF indices a uniform in it can land on and vectorised bisection finishes the
    search. Either way the result is exactly ``#{k: cdf_k <= u}`` -- the token
    ``searchsorted(cdf, u, 'right')`` returns -- because M is a power of two and ``floor(u*M)``
    is exact. Zero-probability tokens have zero-width cells and are never returned.
    """

    MAX_ENTRIES = 1 << 22  # guide-table cap (rows * M)

    @classmethod
    def cells(cls, rows: int, v: int) -> float:
        """Peak cells while one is built for ``rows`` rows of ``v`` tokens: ~5 arrays of its
        rows * M guide entries (M >= 4 v, grown up to the cap), the CDF (measured)."""
        return 5.0 * max(cls.MAX_ENTRIES, 4.0 * rows * v) + 2.0 * rows * v

    @classmethod
    def work(cls, rows: int, v: int) -> float:
        """Operations of building one: a bisection per guide entry, ~10 per element touched
        (the rate :data:`specsim.resources.FLOPS_PER_CORE_SECOND` counts); M typically
        stops growing within two doublings of 4 v (measured: multi_draft's per-round samplers)."""
        entries = max(4.0 * rows * v, min(cls.MAX_ENTRIES, 16.0 * rows * v))
        return 10.0 * entries * (np.log2(max(v, 2)) + 8)

    def __init__(self, table: FloatArray, m_min: int = 4) -> None:
        rows, v = table.shape
        cdf = normalised_cdf(np.asarray(table, dtype=np.float64))
        self.v = v
        self.cdf = cdf.ravel()
        m = 1 << max(2, int(np.ceil(np.log2(max(4 * v, m_min)))))
        while True:
            distinct = self._max_distinct(cdf, m)
            if distinct <= 1 or rows * m * 2 > self.MAX_ENTRIES:
                break
            m *= 2
        self.m = m
        edges = np.arange(m + 1) / m
        lo = np.empty((rows, m), dtype=np.intp)
        hi = np.empty((rows, m), dtype=np.intp)
        for r in range(rows):  # table construction only; sampling has no Python loop
            lo[r] = np.searchsorted(cdf[r], edges[:-1], side="right")
            hi[r] = np.searchsorted(cdf[r], edges[1:], side="left")
        hi = np.minimum(hi, v - 1)
        self.single = distinct <= 1
        if self.single:
            # the one CDF value inside the bucket (if any) and the token just past it
            thr = cdf[np.arange(rows)[:, None], np.minimum(lo, v - 1)]
            after = np.empty_like(lo)
            for r in range(rows):
                after[r] = np.searchsorted(cdf[r], thr[r], side="right")
            self.thr = thr.ravel()
            self.below = lo.astype(np.int32).ravel()
            self.above = np.minimum(after, v - 1).astype(np.int32).ravel()
            self.steps = 1 if distinct == 1 else 0  # 0: every breakpoint on a bucket edge
        else:
            self.lo = lo.astype(np.int32).ravel()
            self.hi = hi.astype(np.int32).ravel()
            span = int((hi - lo).max(initial=0))
            self.steps = int(np.ceil(np.log2(span + 1))) if span > 0 else 0

    @staticmethod
    def _max_distinct(cdf: FloatArray, m: int) -> int:
        """Most distinct CDF values strictly inside one bucket (m/M, (m+1)/M), over all rows."""
        worst = 0
        for row in cdf:
            vals = np.sort(row[(row > 0) & (row < 1)])
            vals = vals[np.diff(vals, prepend=0.0) > 0]  # distinct (np.unique imports numpy.ma)
            inner = vals[vals * m != np.floor(vals * m)]  # values on an edge change nothing inside
            if inner.size:
                worst = max(worst, int(np.bincount(np.floor(inner * m).astype(np.intp)).max()))
        return worst

    def __call__(self, rows: IntArray, u: FloatArray) -> IntArray:
        bucket = rows * self.m + (u * self.m).astype(np.intp)
        if self.single:
            if self.steps == 0:
                return self.below[bucket].astype(np.intp)
            return np.where(u >= self.thr[bucket], self.above[bucket],
                            self.below[bucket]).astype(np.intp)
        lo = self.lo[bucket].astype(np.intp)
        if self.steps == 0:
            return lo
        hi = self.hi[bucket].astype(np.intp)
        for _ in range(self.steps):
            mid = (lo + hi) >> 1
            right = self.cdf[rows * self.v + mid] <= u
            lo = np.where(right, mid + 1, lo)
            hi = np.where(right, hi, mid)
        return lo


class StackedRowSampler:
    """Inverse-CDF draws from many rows (m, V) of one table, for large V.

    Row r's normalised CDF is shifted by r, so all rows form one increasing array and a draw
    for row r is ``searchsorted(flat, r + u, 'right') - r V``: one ``searchsorted`` serves every
    chain, with no (n, V) array per batch of chains. This is ``#{k: cdf_k <= u}`` up to the
    rounding of ``r + cdf_k`` and ``r + u`` (at most half an ulp of r, ~1e-15 for the handful of
    rows the LLM lossless check uses).
    """

    def __init__(self, rows: FloatArray) -> None:
        m, v = rows.shape
        self.v = v
        self.flat = (normalised_cdf(rows) + np.arange(m)[:, None]).ravel()

    def __call__(self, which: IntArray, u: FloatArray) -> IntArray:
        k = np.searchsorted(self.flat, which + u, side="right") - which * self.v
        return np.minimum(k, self.v - 1)
