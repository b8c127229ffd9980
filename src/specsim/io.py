"""Reading and writing results: Parquet shards with an explicit schema, atomic file writes.

Every file is written to a temporary name in its destination directory and renamed into place,
so a reader (or a resumed run) never sees half a file. Shards carry the config digest and
package versions in their Parquet metadata; a shard from another config is refused.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

import specsim

SHARD_SCHEMA = pa.schema(
    [
        pa.field("point_id", pa.string(), nullable=False),
        pa.field("measure", pa.string(), nullable=False),
        pa.field("gamma", pa.int32(), nullable=False),
        pa.field("vocab", pa.int32(), nullable=False),
        pa.field("chains", pa.int64(), nullable=False),
        pa.field("rounds", pa.int64(), nullable=False),
        pa.field("burn_in", pa.int64(), nullable=False),
        pa.field("batches", pa.int32(), nullable=False),
        pa.field("trials", pa.int64(), nullable=False),
        pa.field("seed_entropy", pa.uint64(), nullable=False),
        pa.field("seed_key", pa.list_(pa.uint32()), nullable=False),
        # accepted-drafts histogram per batch of chains, flattened (batches * (gamma + 1))
        pa.field("accepted_hist", pa.list_(pa.int64()), nullable=False),
        # counts of the first two emitted tokens, flattened (vocab * vocab); empty if unused
        pa.field("joint2", pa.list_(pa.int64()), nullable=False),
    ],
    metadata={b"specsim.schema": b"shard/1"},
)


class ShardError(RuntimeError):
    """A shard that is unreadable, of another schema, or from another config."""


def versions() -> dict[str, str]:
    return {
        "specsim": specsim.__version__,
        "numpy": np.__version__,
        "pandas": pd.__version__,
        "pyarrow": pa.__version__,
    }


_PROC_STATUS = Path("/proc/self/status")  # Linux >= 4.7 reports the umask here


def _umask() -> int:
    """The process umask, read from /proc on Linux so no other thread sees it change.

    Elsewhere it is read the only portable way, by setting it and restoring it at once.
    """
    try:
        for line in _PROC_STATUS.read_text(encoding="ascii").splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only on success.

    ``mkstemp`` creates the temporary file 0600; before the rename it gets the mode any new
    file would get, ``0o666 & ~umask``, so outputs stay readable by the group/others the user
    allows (0644 under umask 022, 0664 under 002).
    """
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` atomically as UTF-8 with ``\\n`` line ends, whatever the locale/platform."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8", newline="\n")


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, allow_nan=False) + "\n")


def write_table(df: pd.DataFrame, csv_path: str | os.PathLike[str], float_digits: int = 10) -> None:
    """Tidy CSV for machines plus a Markdown twin for people (same stem, ``.md``)."""
    out = df.copy()
    for col in out.columns:
        if pd.api.types.is_float_dtype(out[col]):
            out[col] = out[col].round(float_digits)
    with atomic_path(csv_path) as tmp:
        out.to_csv(tmp, index=False, lineterminator="\n")
    md = Path(csv_path).with_suffix(".md")
    write_text(md, to_markdown(df))


def to_markdown(df: pd.DataFrame) -> str:
    def fmt(v: Any) -> str:
        if isinstance(v, float | np.floating):
            return "" if np.isnan(v) else f"{v:.4g}"
        return str(v)

    head = "| " + " | ".join(df.columns) + " |"
    sep = "|" + "---|" * len(df.columns)
    rows = ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, sep, *rows]) + "\n"


def write_shard(path: str | os.PathLike[str], records: list[dict[str, Any]],
                config_digest: str) -> None:
    meta = {
        b"specsim.config_digest": config_digest.encode(),
        b"specsim.versions": json.dumps(versions(), sort_keys=True).encode(),
    }
    schema = SHARD_SCHEMA.with_metadata({**SHARD_SCHEMA.metadata, **meta})
    table = pa.Table.from_pylist(records, schema=schema)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def read_shard(path: str | os.PathLike[str], config_digest: str) -> pa.Table:
    """Read one shard, refusing a corrupt file, a foreign schema or another config's shard."""
    try:
        pf = pq.ParquetFile(path)
        table = pf.read()
    except (OSError, pa.ArrowException) as err:
        raise ShardError(f"{path}: not a readable Parquet shard ({err}); delete it and rerun "
                         f"snakemake to regenerate it") from None
    meta = table.schema.metadata or {}
    if meta.get(b"specsim.schema") != b"shard/1":
        raise ShardError(f"{path}: not a specsim shard/1 file (schema metadata "
                         f"{meta.get(b'specsim.schema')!r})")
    if not table.schema.remove_metadata().equals(SHARD_SCHEMA.remove_metadata()):
        raise ShardError(f"{path}: columns do not match the shard schema:\n{table.schema}")
    found = meta.get(b"specsim.config_digest", b"").decode()
    if found != config_digest:
        raise ShardError(f"{path}: written for config digest {found!r}, but the current config "
                         f"is {config_digest!r}; rerun snakemake to regenerate stale shards")
    return table


def read_shards(paths: list[str], config_digest: str,
                check: Callable[[pa.Table, str], None] | None = None) -> pd.DataFrame:
    tables = []
    for path in paths:
        t = read_shard(path, config_digest)
        if check is not None:
            check(t, path)
        tables.append(t)
    return pa.concat_tables(tables).to_pandas()
