"""Every read verified whole before it is decoded, bounded; outputs under the umask.

Each class of fault, exhaustively where the file is small: every byte of every kind of Parquet
file specsim writes (data pages, schema, pandas and specsim metadata, footer, magic) and of a
checks table is flipped, and each flip is refused by the reader with one line naming the file
(never decoded first, never a traceback). Oversize files and cells are refused before parsing.
A full disk: tests/integrity/test_disk_full.py.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from cli_tools import mini_config, run
from conftest import SCHEMA
from damage_tools import checks_table
from trace_files import dirichlet_trace as make_trace

import specsim.io.atomic
from specsim.config import load_grid
from specsim.io import (
    READ_LIMITS,
    IntegrityError,
    read_frame,
    read_json_verified,
    read_npz,
    read_point_file,
    read_table,
    write_frame,
    write_json_verified,
    write_npz,
    write_point_file,
    write_table,
)
from specsim.io.parquet import SEAL_KEY
from specsim.job import describe
from specsim.measures import measure_of
from specsim.models.files import MAX_CELL_CHARS, MAX_TABLE_BYTES, TableFileError, load_table
from specsim.traces.format import TraceFileError, read_trace, write_trace


def flip_every_byte(path: Path, read: Callable[[Path], Any],
                    errors: tuple[type[Exception], ...] = (IntegrityError,)) -> int:
    """Flip one bit of each byte of ``path`` in turn: every read must be refused, one line
    naming the file. Returns how many flips were tried."""
    original = path.read_bytes()
    try:
        for i in range(len(original)):
            data = bytearray(original)
            data[i] ^= 1 << (i % 8)
            path.write_bytes(bytes(data))
            with pytest.raises(errors) as refused:
                read(path)
            msg = str(refused.value)
            assert str(path) in msg and "\n" not in msg, (i, msg)
    finally:
        path.write_bytes(original)
    read(path)  # the original still reads
    return len(original)


@pytest.fixture
def point_file(tmp_path: Path, tiny_config: dict[str, Any]) -> tuple[Path, Any, str]:
    grid = load_grid(mini_config(tiny_config), SCHEMA)
    point = grid.points[0]
    desc = describe(grid, point)
    measure = measure_of(point.measure)
    path = tmp_path / "sim.parquet"
    write_point_file(path, measure.sim_schema,
                     measure.simulate(point, desc["budget"], desc["seed"]), desc["digest"])
    return path, measure.sim_schema, desc["digest"]


def frame() -> pd.DataFrame:
    return pd.DataFrame({"model": ["a", "b"], "alpha": [0.5, np.nan], "gamma": [1, 4]})


# ---------------------------------------------------------------- Parquet: every byte, whole
def test_every_byte_of_a_point_file_is_verified(point_file: tuple[Path, Any, str]) -> None:
    path, kind, digest = point_file
    assert flip_every_byte(path, lambda p: read_point_file(p, kind, digest)) > 1000


def test_every_byte_of_a_frame_is_verified_pandas_metadata_included(tmp_path: Path) -> None:
    path = tmp_path / "points.parquet"
    write_frame(frame(), path)
    data = path.read_bytes()
    # a flip in the pandas metadata renames a column: the metadata is verified like the data
    # pages, so it is refused like any other byte (not a KeyError downstream)
    at = data.rfind(b'"name": "alpha"') + len(b'"name": "')
    assert at > 0
    path.write_bytes(data[:at] + b"b" + data[at + 1:])
    with pytest.raises(IntegrityError, match=r"points\.parquet: content does not match"):
        read_frame(path)
    path.write_bytes(data)
    flip_every_byte(path, read_frame)


def test_every_byte_of_a_trace_file_is_verified(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    write_trace(path, make_trace())
    flip_every_byte(path, read_trace, (TraceFileError,))


@pytest.mark.parametrize("cut", [0, 4, 100, -200, -9, -8, -4, -1])
def test_truncated_parquet_files_are_refused(tmp_path: Path, cut: int,
                                             point_file: tuple[Path, Any, str]) -> None:
    path, kind, digest = point_file
    data = path.read_bytes()
    path.write_bytes(data[:cut])
    refused = r"sim\.parquet: (not a readable point file|content does not match)"
    with pytest.raises(IntegrityError, match=refused):
        read_point_file(path, kind, digest)


def test_a_parquet_file_without_the_seal_is_refused(tmp_path: Path) -> None:
    """Rewritten by another program (or an older specsim) with plausible content: refused."""
    path = tmp_path / "points.parquet"
    write_frame(frame(), path)
    pq.write_table(pq.read_table(path), path)  # same data, schema and metadata, no seal
    with pytest.raises(IntegrityError, match=SEAL_KEY.decode()):
        read_frame(path)


def test_a_foreign_trace_file_is_still_read_and_checked(tmp_path: Path) -> None:
    """A trace written elsewhere (no specsim digests) is decoded and checked column by
    column; one that names specsim's digest but lacks the seal is refused."""
    write_trace(tmp_path / "t.parquet", make_trace())
    table = pq.read_table(tmp_path / "t.parquet")
    meta = dict(table.schema.metadata)
    pq.write_table(table.replace_schema_metadata(
        {k: v for k, v in meta.items() if k != b"specsim.payload_sha256"}),
        tmp_path / "foreign.parquet")
    assert read_trace(tmp_path / "foreign.parquet").n_positions == table.num_rows
    pq.write_table(table, tmp_path / "resaved.parquet")
    with pytest.raises(TraceFileError, match=r"resaved\.parquet"):
        read_trace(tmp_path / "resaved.parquet")


# ---------------------------------------------------------------- CSV: bytes before parsing


def test_every_byte_of_a_checks_table_is_verified_before_decoding(tmp_path: Path) -> None:
    path = tmp_path / "checks.csv"
    checks_table(path)
    flip_every_byte(path, read_table)


@pytest.mark.parametrize("bad", [b"\xff", b"\x00", b'"', b"\n" * 3])
def test_gate_refuses_a_damaged_checks_table_in_one_line(tmp_path: Path, bad: bytes,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    """A non-UTF-8 byte in checks.csv: the bytes are verified before they are decoded (no
    UnicodeDecodeError)."""
    monkeypatch.chdir(tmp_path)
    path = Path("results/tables/checks.csv")
    checks_table(path)
    data = path.read_bytes()
    for at in (0, 5, len(data) // 2, len(data) - 1):
        path.write_bytes(data[:at] + bad + data[at + 1:])
        code, _, err = run(["gate", "--checks", str(path), "--out", "results/checks.ok"], capsys)
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
        assert f"{path}: content does not match checks.csv.sha256" in err
        assert not Path("results/checks.ok").exists()
    path.write_bytes(data)
    code, _, err = run(["gate", "--checks", str(path), "--out", "results/checks.ok"], capsys)
    assert code == 0 and Path("results/checks.ok").exists()


def test_every_byte_of_other_verified_files(tmp_path: Path) -> None:
    """grid.json-like JSON and .npz arrays (the real-text and LLM corpora, n-gram models)."""
    js = tmp_path / "device.json"
    write_json_verified(js, {"peak": 1.5, "names": ["a", "b"]})
    flip_every_byte(js, read_json_verified)
    npz = tmp_path / "corpus.npz"
    write_npz(npz, {"train": np.arange(5, dtype=np.uint8), "sha256": np.array("ab")})
    flip_every_byte(npz, read_npz)


def test_json_checked_against_its_sidecar_before_parsing(tmp_path: Path, monkeypatch) -> None:
    """A damaged JSON file is refused on its sidecar: the parser never sees its bytes."""
    js = tmp_path / "grid.json"
    write_json_verified(js, {"a": 1})
    js.write_bytes(b"[" * 100_000 + b"]" * 100_000)  # what a parser would recurse into
    parsed: list[bytes] = []
    monkeypatch.setattr(json, "loads", lambda *a, **k: parsed.append(a[0]))
    with pytest.raises(IntegrityError, match=r"grid\.json: content does not match grid\.json"
                                             r"\.sha256"):
        read_json_verified(js)
    assert parsed == []


# ---------------------------------------------------------------- bounded before parsing
@pytest.mark.parametrize("kind", ["table", "frame", "point", "trace", "json", "arrays"])
def test_oversize_files_are_refused_before_they_are_read(tmp_path: Path, kind: str,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    readers: dict[str, tuple[Callable[[Path], Any], Callable[[Path], None]]] = {
        "table": (read_table, lambda p: write_table(frame(), p)),
        "frame": (read_frame, lambda p: write_frame(frame(), p)),
        "point": (lambda p: read_point_file(p, measure_of("long_run").sim_schema, None),
                  lambda p: write_frame(frame(), p)),
        "trace": (read_trace, lambda p: write_trace(p, make_trace())),
        "json": (read_json_verified, lambda p: write_json_verified(p, {"a": 1})),
        "arrays": (read_npz, lambda p: write_npz(p, {"a": np.arange(3)})),
    }
    read, write = readers[kind]
    path = tmp_path / f"f.{kind}"
    write(path)
    monkeypatch.setitem(READ_LIMITS, kind, path.stat().st_size - 1)
    with pytest.raises((IntegrityError, TraceFileError), match=r"over the [\d,]+-byte limit"):
        read(path)
    # a sparse file far over the real limit: refused by its size, nothing read
    monkeypatch.undo()
    with open(path, "r+b") as fh:
        fh.truncate(READ_LIMITS[kind] + 1)
    with pytest.raises((IntegrityError, TraceFileError), match=str(path)):
        read(path)


def test_a_table_cell_over_the_limit_is_refused_before_parsing(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    path = tmp_path / "t.csv"
    write_table(pd.DataFrame({"a": ["x" * 5000, "y"], "b": [1, 2]}), path)
    assert read_table(path)["a"][0] == "x" * 5000
    monkeypatch.setattr(specsim.io.atomic, "MAX_CELL_BYTES", 4096)
    with pytest.raises(IntegrityError, match=r"t\.csv: a cell of 5,000 bytes"):
        read_table(path)


@pytest.mark.parametrize("digits", [8_000, 60_000])
def test_a_long_number_then_a_letter_is_refused_at_once(tmp_path: Path, digits: int,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A first cell of 60,000 digits then a letter: a backtracking pattern is quadratic there
    (8,000 digits take seconds). Refused by its length; and the pattern itself is linear."""
    monkeypatch.chdir(tmp_path)
    Path("t.csv").write_text("1" * digits + "x,0\n0,1\n")
    with pytest.raises(TableFileError, match=rf"'t.csv': line 1, column 1: a cell of "
                                             rf"{digits + 1:,} characters"):
        load_table("t.csv")
    load_table.cache_clear()  # type: ignore[attr-defined]
    monkeypatch.setattr("specsim.models.files.MAX_CELL_CHARS", 10 * digits)  # the pattern alone
    with pytest.raises(TableFileError, match="line 1, column 1: '1111"):
        load_table("t.csv")
    assert MAX_CELL_CHARS < 100


def test_an_oversize_user_table_is_refused_by_its_size(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("big.csv", "big.npy"):
        with open(name, "wb") as fh:
            fh.truncate(MAX_TABLE_BYTES + 1)  # sparse: no disk used, nothing read
        with pytest.raises(TableFileError, match=rf"'{name}' has [\d,]+ bytes, over the"):
            load_table(name)


# ---------------------------------------------------------------- umask
@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_every_writer_follows_the_umask_of_its_run(tmp_path: Path, umask: int) -> None:
    """Written first under another umask, then rewritten: the file and any directory the
    writer creates get the mode of the run that writes them."""
    writers: dict[str, Callable[[Path], None]] = {
        "t.csv": lambda p: write_table(frame(), p),
        "f.parquet": lambda p: write_frame(frame(), p),
        "t.parquet": lambda p: write_trace(p, make_trace()),
        "g.json": lambda p: write_json_verified(p, {"a": 1}),
        "c.npz": lambda p: write_npz(p, {"a": np.arange(3)}),
    }
    other = 0o077 if umask != 0o077 else 0o022
    old = os.umask(other)
    try:
        for name, write in writers.items():
            write(tmp_path / "sub" / name)
        os.umask(umask)
        for name, write in writers.items():
            write(tmp_path / "sub" / name)  # rewritten under this run's umask
            write(tmp_path / "new" / "deeper" / name)
    finally:
        os.umask(old)
    for path in [*(tmp_path / "sub").iterdir(), *(tmp_path / "new" / "deeper").iterdir()]:
        assert path.stat().st_mode & 0o777 == 0o666 & ~umask, path
    for d in (tmp_path / "new", tmp_path / "new" / "deeper"):
        assert d.stat().st_mode & 0o777 == 0o777 & ~umask, d


def test_parquet_is_decoded_without_starting_arrow_threads(tmp_path: Path) -> None:
    """Arrow's thread pools, once started, can abort a finished process at exit (exit -6,
    apache/arrow#34314): reading sealed Parquet and building its frame start none."""
    import sys

    path = tmp_path / "f.parquet"
    write_frame(pd.DataFrame({"a": np.arange(50_000.0), "b": ["x"] * 50_000}), path)
    code = f"""
import os, numpy, pandas, pyarrow
from specsim.io import read_frame
before = len(os.listdir('/proc/self/task'))
df = read_frame({str(path)!r})
print(before, len(os.listdir('/proc/self/task')), len(df))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    before, after, rows = map(int, out.stdout.split())
    assert rows == 50_000 and after == before, out.stdout
