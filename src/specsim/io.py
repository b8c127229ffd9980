"""Reading and writing results: Parquet shards with an explicit schema, atomic file writes.

Every file is written to a temporary name in its destination directory and renamed into place,
so a reader (or a resumed run) never sees half a file. Shards carry the config digest and
package versions in their Parquet metadata; a shard from another config is refused.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import platform
import re
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


NOT_INSTALLED = "not installed"
# PEP 508: a requirement starts with its project name; extras, versions, markers follow.
_REQUIREMENT_NAME = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")


def _canonical(name: str) -> str:
    """PEP 503 normalised project name: lower case, runs of -_. as one '-'."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str | None:
    """Project name of one requirement string (``'snakemake>=9; extra == "workflow"'`` ->
    ``'snakemake'``); None for a blank line or a comment."""
    m = _REQUIREMENT_NAME.match(requirement)
    return _canonical(m.group(1)) if m else None


@functools.cache
def _versions(dist: str) -> tuple[tuple[str, str], ...]:
    try:
        requires = importlib.metadata.requires(dist) or []
    except importlib.metadata.PackageNotFoundError:
        requires = []  # running from a source tree that was never installed
    names = {n for r in requires if (n := requirement_name(r)) is not None} - {dist}
    found = {"python": platform.python_version(), dist: specsim.__version__}
    for name in names:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = NOT_INSTALLED
    return tuple(sorted(found.items()))


def versions(dist: str = "specsim") -> dict[str, str]:
    """Version of python, of specsim (the code imported) and of every package specsim's
    distribution requires, extras included (snakemake, pytest, torch, ...), sorted by name.

    Names come from ``importlib.metadata.requires``, so a dependency added to pyproject.toml
    is recorded without editing this list; one that is not installed is recorded as
    ``"not installed"``, never an error.
    """
    return dict(_versions(dist))


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only on success."""
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


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
