"""The trace file: a draft/target pair's next-token distributions along real text, as Parquet.

A *trace* of a pair records, at every position t of some text (text the target generated, or a
corpus), the target's and the draft's next-token distributions p_t and q_t in the same context.
Positions are grouped in *documents* (one prompt's continuation, one corpus document). A row of
a full vocabulary is too large to keep (32k-150k entries), so each position keeps the top-k
support of p ∪ q, both probabilities on it, each row's remaining tail mass, and the overlap
α_t = Σ_v min(p_t(v), q_t(v)) computed from the *full* rows before truncation (what token-wise
verification accepts with, exactly).

Schema (one Parquet row per position, rows grouped by document, documents and positions in
order; :data:`COLUMNS`):

==========  =================  ===============================================================
column      type               meaning
==========  =================  ===============================================================
``doc``     int64              document id: 0, 1, ..., D-1, each with at least one position
``pos``     int64              position within its document: 0, 1, ..., T_d - 1
``token``   int64              the token the text has at this position (-1 if not recorded)
``support`` list<int64>        token ids kept at this position (distinct, in [0, vocab))
``p``       list<float>        target probabilities on ``support`` (float32 or float64)
``q``       list<float>        draft probabilities on ``support``
``p_tail``  float              1 - Σ p: the target mass outside ``support`` (>= 0)
``q_tail``  float              1 - Σ q: the draft mass outside ``support`` (>= 0)
``alpha``   float              Σ_v min(p_t(v), q_t(v)) over the full vocabulary
==========  =================  ===============================================================

The file's key-value metadata ``specsim.trace`` is a JSON object with at least ``vocab`` (the
full vocabulary size) and ``documents`` (D); specsim also writes ``pair``, ``target``,
``draft``, ``temperature``, ``top_k``, ``text`` and ``source``. A file specsim writes carries
``specsim.payload_sha256`` (the digest of its data) and is sealed (:mod:`specsim.io.parquet`:
the digest of its whole bytes, checked before anything is decoded); a file written elsewhere
(e.g. from vLLM logprobs) may omit both, and is then trusted only as far as the checks below go.
No file over :data:`specsim.io.READ_LIMITS` ``["trace"]`` bytes is read.

Every read checks the whole file before anything uses it (:func:`read_trace`): the columns and
their types, each row a distribution (probabilities in [0, 1], Σ p + p_tail = 1 within
:data:`SUM_TOL`), α within what the kept rows allow (Σ_support min(p, q) <= α <= that plus
min(p_tail, q_tail)), the documents numbered 0..D-1 in order with positions 0..T_d-1. A file
that fails is refused with :class:`TraceFileError` naming the file and the column.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from specsim.sampling import FloatArray, IntArray
from specsim.traces.checks import SUM_TOL, TraceFileError, check_trace

__all__ = [
    "COLUMNS",
    "META_KEY",
    "SUM_TOL",
    "Trace",
    "TraceFileError",
    "concat_traces",
    "from_full_rows",
    "read_trace",
    "trace_meta",
    "write_trace",
]

META_KEY = b"specsim.trace"
_DIGEST_KEY = b"specsim.payload_sha256"
_LIST_FLOAT = (pa.list_(pa.float64()), pa.list_(pa.float32()),
               pa.large_list(pa.float64()), pa.large_list(pa.float32()))
_LIST_INT = (pa.list_(pa.int64()), pa.list_(pa.int32()), pa.large_list(pa.int64()),
             pa.large_list(pa.int32()))
#: Column -> the Arrow types a reader accepts (the first is what specsim writes).
COLUMNS: Mapping[str, tuple[pa.DataType, ...]] = {
    "doc": (pa.int64(), pa.int32()),
    "pos": (pa.int64(), pa.int32()),
    "token": (pa.int64(), pa.int32()),
    "support": _LIST_INT,
    "p": _LIST_FLOAT,
    "q": _LIST_FLOAT,
    "p_tail": (pa.float64(), pa.float32()),
    "q_tail": (pa.float64(), pa.float32()),
    "alpha": (pa.float64(), pa.float32()),
}
_REQUIRED_META = ("vocab", "documents")


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
        flat = np.concatenate([np.arange(a, b) for a, b in zip(lo, hi, strict=True)]) \
            if n else np.zeros(0, dtype=np.intp)
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


def _table(trace: Trace) -> pa.Table:
    off = pa.array(trace.offsets.astype(np.int32) if trace.offsets[-1] < 2**31
                   else trace.offsets, type=pa.int32() if trace.offsets[-1] < 2**31
                   else pa.int64())
    listed = pa.ListArray if off.type == pa.int32() else pa.LargeListArray
    return pa.table({
        "doc": pa.array(trace.doc_of.astype(np.int64)),
        "pos": pa.array((np.arange(trace.n_positions)
                         - np.repeat(trace.doc_start[:-1], trace.doc_lengths)).astype(np.int64)),
        "token": pa.array(trace.token.astype(np.int64)),
        "support": listed.from_arrays(off, pa.array(trace.support.astype(np.int64))),
        "p": listed.from_arrays(off, pa.array(trace.p.astype(np.float64))),
        "q": listed.from_arrays(off, pa.array(trace.q.astype(np.float64))),
        "p_tail": pa.array(trace.p_tail.astype(np.float64)),
        "q_tail": pa.array(trace.q_tail.astype(np.float64)),
        "alpha": pa.array(trace.alpha.astype(np.float64)),
    })


def _digest(table: pa.Table) -> str:
    import hashlib

    h = hashlib.sha256()
    for name in COLUMNS:
        col = table.column(name).combine_chunks()
        kind = np.int64 if name in ("doc", "pos", "token", "support") else np.float64
        h.update(name.encode())
        if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
            h.update(np.asarray(col.value_lengths().to_numpy(zero_copy_only=False),
                                dtype=np.int64).tobytes())
            col = col.flatten()
        h.update(np.asarray(col.to_numpy(zero_copy_only=False), dtype=kind).tobytes())
    return h.hexdigest()


def write_trace(path: str | os.PathLike[str], trace: Trace) -> None:
    """Write ``trace`` (checked first) as a self-verifying trace file, atomically."""
    from specsim.io import write_parquet

    check_trace(trace, str(path))
    table = _table(trace)
    meta = {META_KEY: json.dumps(trace.meta, sort_keys=True).encode(),
            _DIGEST_KEY: _digest(table).encode()}
    write_parquet(path, table.replace_schema_metadata(meta))


def _read_table(path: str | os.PathLike[str]) -> pa.Table:
    """The trace file's table: bytes read once (bounded) and, for a file specsim wrote (it
    names the digest key), checked against its seal before pyarrow decodes them."""
    from specsim.io import READ_LIMITS, IntegrityError, read_bounded
    from specsim.io.parquet import SEAL_KEY, decode, is_sealed, parquet_from

    where, fix = str(path), "record it again"
    try:
        data = read_bounded(path, READ_LIMITS["trace"], fix)
    except IntegrityError as err:
        raise TraceFileError(str(err)) from None
    if is_sealed(data) or _DIGEST_KEY in data:  # specsim wrote it: the seal must hold
        return parquet_from(data, where, fix, TraceFileError, "trace file")
    try:  # a foreign file: decoded, then checked column by column below
        return decode(data)  # on this thread, page checksums verified
    except Exception as err:  # truncated, not Parquet, a corrupt page
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise TraceFileError(f"{where}: not a readable Parquet file ({reason}); a file "
                             f"specsim wrote has a {SEAL_KEY.decode()} entry") from None


def read_trace(path: str | os.PathLike[str]) -> Trace:
    """Read and check a trace file whole; :class:`TraceFileError` naming the file and column."""
    where = str(path)
    if not os.path.isfile(path):
        raise TraceFileError(f"{where}: no such trace file")
    table = _read_table(path)
    raw = (table.schema.metadata or {})
    try:
        meta = json.loads(raw.get(META_KEY, b"").decode())
        assert isinstance(meta, dict)
    except Exception:
        raise TraceFileError(f"{where}: metadata {META_KEY.decode()!r} is missing or not a JSON "
                             f"object (it needs at least {list(_REQUIRED_META)})") from None
    for key in _REQUIRED_META:
        if not isinstance(meta.get(key), int) or isinstance(meta.get(key), bool) \
                or meta[key] < 1:
            raise TraceFileError(f"{where}: metadata {META_KEY.decode()}.{key} must be a "
                                 f"positive integer (got {meta.get(key)!r})")
    for name, types in COLUMNS.items():
        if name not in table.column_names:
            raise TraceFileError(f"{where}: column {name!r} is missing (a trace has columns "
                                 f"{list(COLUMNS)})")
        if table.schema.field(name).type not in types:
            raise TraceFileError(f"{where}: column {name!r} has type "
                                 f"{table.schema.field(name).type}, expected {types[0]}")
        if table.column(name).null_count:
            raise TraceFileError(f"{where}: column {name!r} has missing values")
    if table.num_rows == 0:
        raise TraceFileError(f"{where}: column 'doc': the trace has no positions")
    recorded = raw.get(_DIGEST_KEY)
    if recorded is not None and recorded.decode() != _digest(table):
        raise TraceFileError(f"{where}: content does not match its recorded checksum "
                             f"(specsim.payload_sha256); record it again")
    trace = _from_table(table, meta, where)
    check_trace(trace, where, pos=np.asarray(table.column("pos").to_numpy(), dtype=np.int64),
                  doc=np.asarray(table.column("doc").to_numpy(), dtype=np.int64))
    return trace


def _from_table(table: pa.Table, meta: dict[str, Any], where: str) -> Trace:
    lists = {}
    lengths = None
    for name in ("support", "p", "q"):
        col = table.column(name).combine_chunks()
        lens = np.asarray(col.value_lengths().to_numpy(zero_copy_only=False), dtype=np.int64)
        if lengths is None:
            lengths = lens
        elif not np.array_equal(lens, lengths):
            bad = int(np.flatnonzero(lens != lengths)[0])
            raise TraceFileError(f"{where}: column {name!r}: row {bad} has {lens[bad]} entries "
                                 f"but 'support' has {lengths[bad]}")
        lists[name] = np.asarray(col.flatten().to_numpy(zero_copy_only=False))
    assert lengths is not None
    doc = np.asarray(table.column("doc").to_numpy(), dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, doc[1:] != doc[:-1]])
    return Trace(
        meta, np.append(starts, doc.size).astype(np.int64),
        np.asarray(table.column("token").to_numpy(), dtype=np.int64),
        np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        lists["support"].astype(np.int64), lists["p"].astype(np.float64),
        lists["q"].astype(np.float64),
        *(np.asarray(table.column(k).to_numpy(), dtype=np.float64)
          for k in ("p_tail", "q_tail", "alpha")))
