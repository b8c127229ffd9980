"""Tables and frames: tidy CSV with a Markdown twin for people, Parquet frames for machines,
each with its checksum (the same bytes on every CPU)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from specsim.io.atomic import (
    READ_LIMITS,
    REBUILD,
    IntegrityError,
    atomic_path,
    check_cells,
    payload_digest,
    read_verified,
    write_text,
)
from specsim.io.parquet import read_parquet, write_parquet
from specsim.io.render import to_markdown

if TYPE_CHECKING:  # pandas costs ~0.5 s to import: point jobs never load it
    import pandas as pd


def write_table(df: pd.DataFrame, csv_path: str | os.PathLike[str]) -> pd.DataFrame:
    """Tidy CSV for machines plus a Markdown twin for people (same stem, ``.md``), every float
    rounded as :func:`specsim.precision.printable` says (the same bytes on every CPU). Returns
    the rounded frame, for writers of further renderings of the same numbers."""
    from specsim.precision import printable

    out = printable(df)
    data = out.to_csv(index=False, lineterminator="\n").encode()
    with atomic_path(csv_path) as tmp:  # and its .sha256 sidecar
        tmp.write_bytes(data)
    md = Path(csv_path).with_suffix(".md")
    write_text(md, to_markdown(out))
    return out

def table_bytes(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a table, verified whole against its sidecar and its cells' lengths checked,
    before any parser sees them (:func:`read_table`, ``specsim.tablediff``)."""
    data = read_verified(path)
    check_cells(data, path)
    return data


def read_table(path: str | os.PathLike[str]) -> pd.DataFrame:
    """A table written by :func:`write_table`, verified against its checksum first."""
    import io as _io

    import pandas as pd

    data = table_bytes(path)
    try:
        return pd.read_csv(_io.BytesIO(data))
    except Exception as err:
        reason = " ".join(str(err).split())  # one line: pandas' messages end in newlines
        raise IntegrityError(f"{path}: not a readable table ({type(err).__name__}: {reason}); "
                             f"delete it and rerun snakemake") from None


def _table_digest(table: pa.Table) -> str:
    """sha256 of the table's values as canonical JSON, column by column (types that Parquet
    may map differently on reading -- string vs large_string -- give the same digest)."""
    return payload_digest(table.to_pydict())


def write_frame(df: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """A DataFrame as sealed Parquet (:func:`~specsim.io.parquet.write_parquet`) with a digest
    of its data in the metadata."""
    table = pa.Table.from_pandas(df, preserve_index=False, nthreads=1)  # no Arrow pool
    meta = {**(table.schema.metadata or {}),
            b"specsim.payload_sha256": _table_digest(table).encode()}
    write_parquet(path, table.replace_schema_metadata(meta))


def read_frame(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a :func:`write_frame` file: its bytes verified whole (data, schema, metadata)
    before pyarrow decodes them, then its data digest re-computed."""
    table = read_parquet(path, READ_LIMITS["frame"])
    try:
        recorded = (table.schema.metadata or {}).get(b"specsim.payload_sha256", b"").decode()
        if recorded == _table_digest(table):
            return table.to_pandas(use_threads=False)  # no Arrow pool (io.parquet)
    except Exception as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise IntegrityError(f"{path}: not a readable frame ({reason}); {REBUILD}") from None
    raise IntegrityError(f"{path}: content does not match its recorded checksum; {REBUILD}")
