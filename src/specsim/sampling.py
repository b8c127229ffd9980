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

import hashlib

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

__all__ = [
    "GuidedRows",
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
    if c.dtype.kind != "f":
        return c / c[..., -1:]
    c /= c[..., -1:].copy()  # in place: the same quotients, no second array
    return c


def inverse_cdf_rows(cdf: FloatArray, u: FloatArray) -> IntArray:
    """Sample one index per row of ``cdf`` (..., V) from uniforms ``u`` (...): #{k: cdf_k <= u}."""
    v = cdf.shape[-1]
    return np.minimum((cdf <= u[..., None]).sum(axis=-1), v - 1)


class GuidedRows:
    """Inverse-CDF draws from the rows of one table, each chain from its own row: the count
    #{k: cdf_k <= u} that :func:`inverse_cdf_rows` returns on the gathered rows, without
    gathering them. A guide per row, guide[r, j] = #{k: cdf[r, k] <= j/M} (M = 2^k >= V, so
    u M and cdf M are exact), brackets the count between guide[r, floor(u M)] and the next
    entry; a scan up from the lower end finishes it (most buckets hold at most one CDF value).
    Unlike :class:`TableSampler` it is built without a loop over rows (one pass for a trace's
    ~10^5 positions) and leaves the few crowded buckets to the scan."""

    def __init__(self, probs: FloatArray) -> None:
        self.cdf = normalised_cdf(np.asarray(probs, dtype=np.float64))
        n, self.v = self.cdf.shape
        self.m = m = 1 << max(self.v - 1, 1).bit_length()
        cell = np.ceil(self.cdf * m)  # cdf_k <= j/M iff ceil(cdf_k M) <= j
        cell = np.where(np.isnan(cell), m + 1, cell).astype(np.intp)  # NaN: never <= u
        at = (np.arange(n)[:, None] * (m + 2) + cell).ravel()
        self.guide = np.bincount(at, minlength=n * (m + 2)).reshape(n, m + 2)[:, :m + 1]
        self.guide = self.guide.cumsum(axis=1)
        self.flat = self.cdf.ravel()

    def __call__(self, rows: IntArray, u: FloatArray) -> IntArray:
        j = (u * self.m).astype(np.intp)
        lo, hi = self.guide[rows, j], self.guide[rows, j + 1]
        todo = np.flatnonzero(lo < hi)
        while todo.size:
            up = self.flat[rows[todo] * self.v + lo[todo]] <= u[todo]
            todo = todo[up]
            lo[todo] += 1
            todo = todo[lo[todo] < hi[todo]]
        return np.minimum(lo, self.v - 1)


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

    A guide table (Chen & Asau's indexed search) splits [0, 1) into M = 2^k equal buckets per
    row; ``floor(u*M)`` is exact because M is a power of two. A bucket with no CDF value
    strictly inside is *pure*: every uniform in it draws the token stored in ``direct``, one
    lookup. M grows (within a memory cap) until at most ``IMPURE`` of the buckets are impure;
    those hold a negative id in ``direct``. An impure bucket with one distinct CDF value inside
    stores that value and the tokens on either side (one comparison); one with more stores the
    range of indices a uniform in it can land on, finished by vectorised bisection. Either way
    a draw is exactly ``#{k: cdf_k <= u}`` -- the token ``searchsorted(cdf, u, 'right')``
    returns. Zero-probability tokens have zero-width cells and are never returned.

    Tokens are returned times ``scale``: the Markov engine passes its M, so a token is the
    offset of its row in every table (:class:`specsim.engine.MarkovKernel`).
    """

    MAX_ENTRIES = 1 << 22  # guide-table cap (rows * M)
    IMPURE = 1 / 512  # M grows while more of the buckets than this are impure

    @classmethod
    def cells(cls, rows: int, v: int) -> float:
        """Peak cells while one is built for ``rows`` rows of ``v`` tokens: ~5 arrays of its
        rows * M guide entries (M >= 4 v, grown up to the cap), the CDF (measured)."""
        return 5.0 * max(cls.MAX_ENTRIES, 4.0 * rows * v) + 2.0 * rows * v

    @classmethod
    def work(cls, rows: int, v: int) -> float:
        """Operations of building one: a bisection per guide entry, ~10 per element touched
        (the rate :data:`specsim.resources.FLOPS_PER_CORE_SECOND` counts); M stops growing
        once at most IMPURE of the buckets hold one of the <= v CDF values: M <= 2 v / IMPURE."""
        entries = max(4.0 * rows * v, min(cls.MAX_ENTRIES, 2.0 / cls.IMPURE * rows * v))
        return 10.0 * entries * (np.log2(max(v, 2)) + 8)

    def __init__(self, table: FloatArray, m_min: int = 4, scale: int = 1) -> None:
        rows, v = table.shape
        cdf = normalised_cdf(np.asarray(table, dtype=np.float64))
        self.v, self.scale = v, scale
        self.cdf = cdf.ravel()
        inner = [_inner_values(row) for row in cdf]
        self.m = m = self.guide_size(inner, v, m_min)
        edges = np.arange(m) / m
        direct = np.empty((rows, m), dtype=np.int64)
        thr, below, above, lo, hi = [], [], [], [], []
        n_imp = n_multi = 0
        for r, vals in enumerate(inner):  # construction only; sampling has no Python loop
            first = np.searchsorted(cdf[r], edges, side="right")  # the token at the left edge
            direct[r] = first * scale
            counts = np.bincount(_buckets_inside(vals, m), minlength=m)
            imp = np.flatnonzero(counts)
            multi = imp[counts[imp] > 1]
            t = np.where(counts[imp] == 1, cdf[r, first[imp]], np.inf)  # the one value inside
            after = np.minimum(np.searchsorted(cdf[r], t, side="right"), v - 1) * scale
            ids = -1 - (n_multi + np.arange(multi.size))  # multi buckets: bisection
            thr.append(t)
            below.append(first[imp] * scale)
            above.append(after)
            below[-1][counts[imp] > 1] = ids
            above[-1][counts[imp] > 1] = ids
            lo.append(first[multi] + r * v)
            hi.append(np.minimum(np.searchsorted(cdf[r], (multi + 1) / m, side="left"), v - 1)
                      + r * v)
            direct[r, imp] = -1 - (n_imp + np.arange(imp.size))
            n_imp += imp.size
            n_multi += multi.size
        # int32 halves the memory of large tables; small ones stay intp (no cast per draw)
        small = direct.size <= 1 << 20 or direct.max(initial=0) >= 2**31
        self.direct = direct.astype(np.intp if small else np.int32).ravel()
        self.thr, self.below, self.above = (np.concatenate(x) for x in (thr, below, above))
        self.lo, self.hi = np.concatenate(lo), np.concatenate(hi)
        span = int((self.hi - self.lo).max(initial=0))
        # 0: every bucket pure; 1: at most one comparison; more: bisection steps
        self.steps = 0 if n_imp == 0 else 1 if n_multi == 0 else max(
            1, int(np.ceil(np.log2(span + 1))))
        self.impure = n_imp > 0

    @classmethod
    def of(cls, table: FloatArray) -> TableSampler:
        """A sampler of ``table``, built once for equal tables while it is among the last
        :data:`KEPT` asked for: a point job's rounds draw from the same tables call after
        call, and building one costs more than the draws of a call (its draws are the same
        either way)."""
        a = np.ascontiguousarray(table, dtype=np.float64)
        key = (a.shape, hashlib.blake2b(a.tobytes(), digest_size=16).digest())
        got = _KEPT.pop(key, None)
        if got is None:
            got = cls(a)
            while len(_KEPT) >= KEPT:
                _KEPT.pop(next(iter(_KEPT)))
        _KEPT[key] = got  # the most recent last
        return got

    @classmethod
    def guide_size(cls, inner: list[FloatArray] | FloatArray, v: int, m_min: int = 4) -> int:
        """M for rows whose distinct inner CDF values are ``inner`` (or for a table's rows)."""
        if isinstance(inner, np.ndarray):
            inner = [_inner_values(row) for row in normalised_cdf(inner)]
        rows = len(inner)
        m = 1 << max(2, int(np.ceil(np.log2(max(4 * v, m_min)))))
        while rows * m * 2 <= cls.MAX_ENTRIES and sum(
                _count_distinct(_buckets_inside(x, m)) for x in inner) > cls.IMPURE * rows * m:
            m *= 2
        return m

    def __call__(self, rows: IntArray, u: FloatArray) -> IntArray:
        """Tokens (times ``scale``) drawn from ``rows`` with uniforms ``u``."""
        return self.lookup(rows * self.m + (u * self.m).astype(np.intp), u).astype(np.intp)

    def lookup(self, bucket: IntArray, u: FloatArray) -> IntArray:
        """Tokens (times ``scale``) for the buckets ``row * M + floor(u * M)`` of uniforms u."""
        out = self.direct.take(bucket, mode="clip")  # in range: clip only skips the check
        self.resolve(out, bucket, u)
        return out

    def resolve(self, out: IntArray, bucket: IntArray, u: FloatArray) -> IntArray:
        """Finish the draws ``out`` (``direct`` at ``bucket``) that fell in impure buckets, in
        place; returns their positions."""
        if not self.impure:
            return np.empty(0, dtype=np.intp)
        at = np.flatnonzero(out < 0)
        if at.size:
            out[at] = self._impure(-1 - out[at], bucket[at], u[at])
        return at

    def pure_tokens(self) -> IntArray:
        """Per bucket, the token every uniform in it draws, or -1 where the bucket is impure."""
        return np.where(self.direct >= 0, self.direct // self.scale, -1)

    def _impure(self, ids: IntArray, bucket: IntArray, u: FloatArray) -> IntArray:
        """Draws in impure buckets: one comparison, then bisection where it holds more."""
        got = np.where(u >= self.thr[ids], self.above[ids], self.below[ids])
        at = np.flatnonzero(got < 0) if self.lo.size else ()
        if len(at):
            mid_ids = -1 - got[at]
            lo, hi, uu = self.lo[mid_ids], self.hi[mid_ids], u[at]
            while np.any(lo < hi):
                mid = (lo + hi) >> 1
                right = self.cdf[mid] <= uu
                lo = np.where(right, mid + 1, lo)
                hi = np.where(right, hi, mid)
            got[at] = (lo - (bucket[at] // self.m) * self.v) * self.scale
        return got


#: Samplers :meth:`TableSampler.of` keeps: those of one round (a multi-draft round draws
#: from three tables), so a job holds no more of them than a round does.
KEPT = 4
_KEPT: dict[tuple[tuple[int, ...], bytes], TableSampler] = {}


def _buckets_inside(vals: FloatArray, m: int) -> IntArray:
    """The bucket floor(x*M) of each value x strictly inside one (values on an edge change
    nothing inside a bucket)."""
    scaled = vals * m
    return np.floor(scaled[scaled != np.floor(scaled)]).astype(np.intp)


def _count_distinct(sorted_ints: IntArray) -> int:
    return int(np.count_nonzero(np.diff(sorted_ints, prepend=-1)))


def _inner_values(row: FloatArray) -> FloatArray:
    """The distinct CDF values strictly inside (0, 1) of one row."""
    vals = np.sort(row[(row > 0) & (row < 1)])
    return vals[np.diff(vals, prepend=0.0) > 0]  # distinct (np.unique imports numpy.ma)


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
