"""Sealed Parquet: a file that carries the sha256 of its own bytes, checked before decoding.

Parquet's page CRCs cover the data pages only; the footer (schema, column metadata, the
key-value metadata with the pandas column names and specsim's digests) has no checksum, so a
flipped footer byte can rename a column or change a type unnoticed. :func:`write_parquet`
therefore adds one footer key-value entry, ``specsim.file_sha256`` = ``sha256=<64 hex>``,
the sha256 of the whole file with those 64 hex digits written as zeros (the same length, so
nothing else moves). :func:`read_parquet` reads the bytes once (bounded,
:func:`~specsim.io.atomic.read_bounded`), finds the entry, re-computes the digest over every
other byte -- data pages, schema, metadata, footer length, magic -- and only then lets pyarrow
decode them. A flip anywhere is refused naming the file; so is a file without the entry
(written elsewhere, or by an older specsim).

The entry is file-level metadata (not in the Arrow schema pyarrow stores beside it), so a
reader's ``table.schema.metadata`` does not show it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable

import pyarrow as pa
import pyarrow.parquet as pq

from specsim.io.atomic import REBUILD, IntegrityError, atomic_path, read_bounded

SEAL_KEY = b"specsim.file_sha256"
_PREFIX = b"sha256="
_ZEROS = b"0" * 64


def _seal_at(data: bytes | bytearray) -> int | None:
    """Offset of the 64 hex digits of the seal entry (the last one in the file), or None."""
    key = data.rfind(SEAL_KEY)
    if key < 0:
        return None
    start = key + len(SEAL_KEY)
    prefix = data.find(_PREFIX, start, start + 8 + len(_PREFIX))  # Thrift: <= 3 bytes between
    at = prefix + len(_PREFIX)
    return at if prefix >= 0 and at + 64 <= len(data) else None


def is_sealed(data: bytes) -> bool:
    """Whether ``data`` has a seal entry (it may still not match: :func:`parquet_from`)."""
    return _seal_at(data) is not None


def write_parquet(path: str | os.PathLike[str], table: pa.Table) -> None:
    """``table`` as sealed Parquet (zstd, page checksums), written atomically."""
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, table.schema, compression="zstd",
                          write_page_checksum=True) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata({SEAL_KEY: _PREFIX + _ZEROS})
    data = bytearray(sink.getvalue().to_pybytes())
    at = _seal_at(data)
    assert at is not None and data[at:at + 64] == _ZEROS
    data[at:at + 64] = hashlib.sha256(data).hexdigest().encode()
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def decode(data: bytes) -> pa.Table:
    """Parquet bytes decoded on this thread, page checksums verified. Not ``pq.read_table``:
    its dataset scanner starts Arrow's thread pools even with ``use_threads=False``, and a
    pool alive at exit can abort a finished process ("terminate called without an active
    exception", apache/arrow#34314: a `specsim verify` that had printed its verdict exited
    -6 under load)."""
    return pq.ParquetFile(pa.BufferReader(data), page_checksum_verification=True).read(
        use_threads=False)


def parquet_from(data: bytes, path: str | os.PathLike[str], fix: str = REBUILD,
                 error: type[Exception] = IntegrityError, what: str = "Parquet file",
                 before_decode: Callable[[], None] | None = None) -> pa.Table:
    """Verify the seal of ``data`` (the bytes of ``path``) whole, then decode them.
    ``before_decode``, if given, runs between the two: a check that reads the footer (a limit
    on what decoding will take) sees only bytes the seal vouches for -- pyarrow aborts the
    whole process on some damaged footers instead of raising."""
    at = _seal_at(data)
    if at is None:
        raise error(f"{path}: not a readable {what} (no {SEAL_KEY.decode()} entry: truncated, "
                    f"damaged, or written by an older specsim or another program); {fix}")
    recorded = bytes(data[at:at + 64])
    view = memoryview(data)  # hashed in place: no second copy of a large file
    h = hashlib.sha256(view[:at])
    h.update(_ZEROS)
    h.update(view[at + 64:])
    digest = h.hexdigest().encode()
    if digest != recorded:
        raise error(f"{path}: content does not match its recorded file checksum (corrupt or "
                    f"edited); {fix}")
    if before_decode is not None:
        before_decode()
    try:
        return decode(data)
    except Exception as err:  # a sealed file pyarrow cannot decode: not written by write_parquet
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise error(f"{path}: not a readable {what} ({reason}); {fix}") from None


def read_parquet(path: str | os.PathLike[str], limit: int, fix: str = REBUILD,
                 error: type[Exception] = IntegrityError, what: str = "Parquet file"
                 ) -> pa.Table:
    """A :func:`write_parquet` file: its bytes read once (at most ``limit``), checked against
    its seal, then decoded. Every fault, a missing file included, is ``error`` naming the
    file."""
    try:
        data = read_bounded(path, limit, fix)
    except FileNotFoundError:
        raise error(f"{path}: no such file; {fix}") from None
    except IntegrityError as err:
        if error is IntegrityError or isinstance(err, error):
            raise
        raise error(str(err)) from None
    return parquet_from(data, path, fix, error, what)
