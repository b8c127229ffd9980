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
No file over :data:`specsim.io.READ_LIMITS` ``["trace"]`` bytes is read, and none is decoded
whose footer declares more positions, support entries or decoded bytes than
:mod:`specsim.trace_limits` allows.

Every read checks the whole file before anything uses it (:func:`read_trace`): the columns and
their types, each row a distribution (probabilities in [0, 1], Σ p + p_tail = 1, both within
:data:`SUM_TOL`, then clipped to [0, 1]: a draft equal to its target has α a rounding error
above 1), α within what the kept rows allow (Σ_support min(p, q) <= α <= that plus
min(p_tail, q_tail)), the documents numbered 0..D-1 in order with positions 0..T_d-1. A file
that fails is refused with :class:`TraceFileError` naming the file and the column.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from specsim import trace_limits as limits
from specsim.traces.trace import Trace, concat_traces, from_full_rows, trace_meta
from specsim.traces.validate import SUM_TOL, TraceFileError, check_trace, within_unit

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
    if is_sealed(data) or _DIGEST_KEY in data:  # specsim wrote it: the seal must hold first
        return parquet_from(data, where, fix, TraceFileError, "trace file",
                            lambda: _check_footer(data, where))
    _check_footer(data, where)
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
    return within_unit(trace)


def _check_footer(data: bytes, where: str) -> None:
    """Refuse, from the Parquet footer alone (nothing inflated), a trace over the limits of
    :mod:`specsim.trace_limits`: its rows, kept support entries, decoded bytes."""
    import pyarrow.parquet as pq

    try:
        footer = pq.ParquetFile(pa.BufferReader(data)).metadata
    except Exception as err:  # truncated, not Parquet
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise TraceFileError(f"{where}: not a readable Parquet file ({reason})") from None
    groups = [footer.row_group(i) for i in range(footer.num_row_groups)]
    entries = sum(g.column(j).num_values for g in groups for j in range(g.num_columns)
                  if g.column(j).path_in_schema.split(".")[0] == "support")
    decoded = sum(g.total_byte_size for g in groups)
    for column, value, limit in (("doc", footer.num_rows, limits.MAX_POSITIONS),
                                 ("support", entries, limits.MAX_ENTRIES),
                                 ("*", decoded, limits.MAX_DECODED_BYTES)):
        if value > limit:
            what = {"doc": "positions", "support": "kept support entries",
                    "*": "bytes decoded"}[column]
            raise TraceFileError(f"{where}: column {column!r}: {value} {what}, over the limit "
                                 f"of {limit} (specsim.trace_limits: a trace is read only "
                                 f"{limits.stated()})")


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
    if lengths.size and lengths.max() > limits.MAX_SUPPORT:
        bad = int(np.argmax(lengths > limits.MAX_SUPPORT))
        raise TraceFileError(f"{where}: column 'support': row {bad} keeps {lengths[bad]} "
                             f"tokens, over the limit of {limits.MAX_SUPPORT} "
                             f"(specsim.trace_limits)")
    doc = np.asarray(table.column("doc").to_numpy(), dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, doc[1:] != doc[:-1]])
    return Trace(
        meta, np.append(starts, doc.size).astype(np.int64),
        np.asarray(table.column("token").to_numpy(), dtype=np.int64),
        np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        lists["support"].astype(np.int64, copy=False),
        lists["p"].astype(np.float64, copy=False), lists["q"].astype(np.float64, copy=False),
        *(np.asarray(table.column(k).to_numpy(), dtype=np.float64)
          for k in ("p_tail", "q_tail", "alpha")))
