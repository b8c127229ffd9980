"""Point files: one Parquet row per grid point and measure, self-verifying.

A point file (``results/sim/...`` and ``results/exact/...``) is one row under an explicit schema
(:class:`PointSchema`; each measure names its two, :mod:`specsim.measures`); its Parquet
metadata carries

* ``specsim.schema``         its :class:`PointSchema`'s tag, e.g. ``sim/1`` or ``exact/1``,
* ``specsim.point_digest``   the digest of the job that wrote it (:func:`specsim.job.describe`):
                             the point's identity, budget, root seed and numbers version,
* ``specsim.payload_sha256`` sha256 of the row's canonical JSON, re-computed by every reader,
* ``specsim.versions``       the software that wrote it;

and the file is sealed (:mod:`specsim.io.parquet`: the sha256 of its own bytes, checked before
pyarrow decodes anything; its data pages also carry Parquet CRC checksums). A reader refuses,
naming the file and what to do, a file that is truncated, undecodable, of another schema,
whose payload does not hash to its recorded digest, or that was written for another identity
(stale).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from specsim.io.atomic import READ_LIMITS, IntegrityError, payload_digest
from specsim.io.parquet import read_parquet, write_parquet
from specsim.io.provenance import point_versions


@dataclass(frozen=True)
class PointSchema:
    """The columns of one kind of point file and its tag (``specsim.schema``, e.g. ``sim/1``).

    Each measure names the schemas of its two files (:mod:`specsim.measures`); a reader refuses
    a file whose tag or columns are not the ones it expects.
    """

    name: str
    columns: pa.Schema
    version: int = 1

    @property
    def tag(self) -> bytes:
        return f"{self.name}/{self.version}".encode()

class PointFileError(IntegrityError):
    """A point file that is unreadable, corrupt, of another schema, or stale."""

def _canonical_row(record: dict[str, Any], schema: pa.Schema) -> dict[str, Any]:
    """The row as the schema stores it (ints as int, floats as float, lists as lists)."""
    out: dict[str, Any] = {}
    for field in schema:
        v = record.get(field.name)
        if v is None:
            out[field.name] = None
        elif pa.types.is_list(field.type):
            cast = float if pa.types.is_floating(field.type.value_type) else int
            out[field.name] = [cast(x) for x in v]
        elif pa.types.is_floating(field.type):
            out[field.name] = float(v)
        elif pa.types.is_integer(field.type):
            out[field.name] = int(v)
        else:
            out[field.name] = str(v)
    return out


def write_point_file(path: str | os.PathLike[str], kind: PointSchema, record: dict[str, Any],
                     point_digest: str) -> None:
    """One row of ``kind``'s columns with its identity and payload digests, page checksums on."""
    schema = kind.columns
    unknown = set(record) - set(schema.names)
    if unknown:
        raise ValueError(f"{kind.name} record has fields outside its schema: {sorted(unknown)}")
    row = _canonical_row(record, schema)
    meta = {
        b"specsim.schema": kind.tag,
        b"specsim.point_digest": point_digest.encode(),
        b"specsim.payload_sha256": payload_digest(row).encode(),
        b"specsim.versions": json.dumps(point_versions(), sort_keys=True).encode(),
    }
    write_parquet(path, pa.Table.from_pylist([row], schema=schema.with_metadata(meta)))


def read_point_file(path: str | os.PathLike[str], kind: PointSchema,
                    point_digest: str | None) -> dict[str, Any]:
    """Read and verify one point file; return its row. ``point_digest`` None skips the
    staleness check (inspection only, never aggregation)."""
    fix = "delete it and rerun snakemake to regenerate it"
    table = read_parquet(path, READ_LIMITS["point"], fix, PointFileError, "point file")
    try:
        meta = table.schema.metadata or {}
        tag = meta.get(b"specsim.schema")
        if tag != kind.tag:
            raise PointFileError(f"{path}: not a specsim {kind.tag.decode()} point file (schema "
                                 f"tag {tag!r}); {fix}")
        if not table.schema.remove_metadata().equals(kind.columns):
            raise PointFileError(f"{path}: columns do not match the {kind.tag.decode()} schema; "
                                 f"{fix}")
        if table.num_rows != 1:
            raise PointFileError(f"{path}: {table.num_rows} rows, a point file has one; {fix}")
        row = table.to_pylist()[0]
        recorded = meta.get(b"specsim.payload_sha256", b"").decode("ascii")
        found = meta.get(b"specsim.point_digest", b"").decode("ascii")
    except PointFileError:
        raise
    except Exception as err:
        # ArrowInvalid/IOError: truncated or bit-flipped pages (CRC), undecodable footer
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise PointFileError(f"{path}: not a readable point file ({reason}); {fix}") from None
    if payload_digest(row) != recorded:
        raise PointFileError(f"{path}: content does not match its recorded checksum (corrupt "
                             f"file); {fix}")
    if point_digest is not None and found != point_digest:
        raise PointFileError(f"{path}: written for point digest {found!r}, but this config's "
                             f"point has digest {point_digest!r} (stale file); {fix}")
    return row
