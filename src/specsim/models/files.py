"""User table files: reading and checking the .npy/.csv tables of a ``custom`` model.

A path must pass :func:`check_path` (relative, plain names, inside the working directory);
:func:`load_table` reads a file (cached by path, size and mtime), :func:`check_table` checks
it as a row-stochastic Markov table, :func:`file_digest` gives the sha256 that enters the
model's identity. Every fault is a one-line :class:`TableFileError` naming the file.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from specsim.sampling import FloatArray

# A table file: a relative path of plain names, no '..', no shell metacharacters.
TABLE_PATH = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*$")
ROW_SUM_TOL = 1e-9  # rows off by more than this are an error, never silently renormalised
# Bounds checked before a table file is read or parsed: the config allows vocab <= 4096, whose
# (V, V) float64 table is 128 MiB as .npy and ~350 MB as CSV at 17 significant digits.
MAX_TABLE_BYTES = 512 << 20
MAX_CELL_CHARS = 64  # '-1.2345678901234567e-308' is 24; spaces around allowed


class TableFileError(ValueError):
    """A user-supplied table that cannot be used as a row-stochastic Markov table."""


def check_path(path: str, root: Path | None = None) -> Path:
    """Refuse paths that could escape the working directory or reach a shell."""
    if not TABLE_PATH.match(path) or ".." in Path(path).parts:
        raise TableFileError(f"{path!r} is not an allowed table path: use a relative path of "
                             f"letters, digits, '_', '-', '.' and '/', without '..'")
    base = (root or Path.cwd()).resolve()
    full = (base / path).resolve()
    if not full.is_relative_to(base):
        raise TableFileError(f"{path!r} resolves outside the working directory {base}")
    if full.suffix not in (".npy", ".csv"):
        raise TableFileError(f"{path!r}: tables are .npy or .csv files")
    if not full.is_file():
        raise TableFileError(f"{path!r}: no such file (relative to {base})")
    return full


def file_digest(path: str | Path) -> str:
    """sha256 of a table file. Every point's identity includes it, so a grid asks for it once
    per point; the content is hashed once per (file, size, mtime) and a stat answers the rest."""
    st = Path(path).stat()
    _check_size(st.st_size, repr(str(path)))  # never hash (or read) an unbounded file
    return _content_digest(str(Path(path).resolve()), st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=256)
def _content_digest(path: str, size: int, mtime_ns: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _refuse_dtype(dtype: np.dtype[Any], where: str) -> None:
    """Only real numbers (floats, integers) are tables; say what else was found and the fix."""
    if dtype.kind in "fiu":
        return
    if dtype.kind == "c":
        what = "complex numbers; save the real part (table.real) if that is the table"
    elif dtype.kind == "b":
        what = "booleans, not probabilities; save table.astype(float) if that is the table"
    else:
        what = f"dtype {dtype}, not numbers; save a float array with numpy.save"
    raise TableFileError(f"{where} holds {what}")


def _refuse_bad_entries(t: FloatArray, where: str) -> None:
    """Refuse NaN/inf and negative entries of a 2-D table, naming the first one's position."""
    for bad, what in ((~np.isfinite(t), "non-finite"), (t < 0, "negative")):
        if bad.any():
            r, c = map(int, np.argwhere(bad)[0])
            raise TableFileError(f"{where} has a {what} entry {t[r, c]} at row {r}, column {c}; "
                                 f"every entry must be a probability in [0, 1]")


def check_table(table: Any, name: str, role: str) -> FloatArray:
    """Validate a user table: real numbers, square, finite, non-negative, rows summing to one.

    Semantics (as production implementations): q(x) = 0 where p(x) > 0 is allowed -- the draft
    never proposes x and the residual norm(max(p - q, 0)) supplies that mass on a rejection.
    A draft row with no mass at all is an error (the draft would have to propose from it), as
    is a target row with no mass. Rows are used exactly as given (bit for bit), so they must sum
    to one within 1e-9 -- a CSV written with 17 significant digits does.
    """
    try:
        arr = np.asarray(table)
    except ValueError as err:  # ragged nested lists
        raise TableFileError(f"{name}: the {role} table is not a rectangular array "
                             f"({err})") from None
    _refuse_dtype(arr.dtype, f"{name}: the {role} table")
    t = np.asarray(arr, dtype=np.float64)
    if t.ndim != 2 or t.shape[0] != t.shape[1] or t.shape[0] < 2:
        raise TableFileError(f"{name}: the {role} table must be a square (V, V) array with "
                             f"V >= 2, got shape {t.shape}")
    _refuse_bad_entries(t, f"{name}: the {role} table")
    sums = t.sum(axis=1)
    empty = np.flatnonzero(sums == 0)
    if empty.size:
        what = "the draft would have to propose from it" if role == "draft" else \
            "the target has no next-token distribution there"
        raise TableFileError(f"{name}: row {int(empty[0])} of the {role} table has no mass "
                             f"({what})")
    off = np.flatnonzero(np.abs(sums - 1.0) > ROW_SUM_TOL)
    if off.size:
        r = int(off[0])
        raise TableFileError(f"{name}: row {r} of the {role} table sums to {sums[r]:.9g}, not 1 "
                             f"(tolerance {ROW_SUM_TOL}); {off.size} row(s) off")
    return t


def _read_npy(full: Path, where: str) -> NDArray[Any]:
    """A .npy file's array, read by its header alone: never unpickled, never over-allocated.

    The header's shape and dtype must account for the file's size exactly, so an empty,
    truncated or padded file is refused before any data is read.
    """
    with full.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        _check_size(size, where)
        if size == 0:
            raise TableFileError(f"{where} is empty (0 bytes); save the table again with "
                                 f"numpy.save")
        try:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise ValueError(f"unsupported .npy format version {version}")
        except ValueError as err:
            raise TableFileError(f"{where} is not a readable .npy file ({err}); save the table "
                                 f"with numpy.save") from None
        _refuse_dtype(dtype, where)
        nbytes = math.prod(shape) * dtype.itemsize
        if size != f.tell() + nbytes:
            raise TableFileError(f"{where} has {size} bytes but its header describes "
                                 f"{f.tell() + nbytes} (shape {shape}, {dtype}); the file is "
                                 f"truncated or corrupt -- save the table again with numpy.save")
        data = np.frombuffer(f.read(nbytes), dtype=dtype)
    return data.reshape(shape, order="F" if fortran else "C")


def _check_size(size: int, where: str) -> None:
    if size > MAX_TABLE_BYTES:
        raise TableFileError(f"{where} has {size:,} bytes, over the {MAX_TABLE_BYTES:,}-byte "
                             f"limit of a table file (a 4096 x 4096 table is far smaller)")


# One CSV cell: a decimal number (or nan/inf, refused later with its position), spaces around.
# Each character has one way to match (no '\d+\.?\d*', whose two digit runs backtrack
# quadratically on a long run of digits followed by a letter): matching is linear in the line,
# and cells are also refused over MAX_CELL_CHARS before any pattern runs.
_CSV_CELL = r"\s*[+-]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|nan|inf|infinity)\s*"
_CSV_ROW = re.compile(rf"{_CSV_CELL}(?:,{_CSV_CELL})*", re.IGNORECASE)
_CSV_CELL_RE = re.compile(_CSV_CELL, re.IGNORECASE)


def _read_csv(full: Path, where: str) -> FloatArray:
    """Comma-separated decimal numbers, one row per line; '#' comments and blank lines skipped.

    Strict where numpy is lenient: every cell must be a plain decimal number (no '1_000', no
    empty cells), every row must have the same number of cells, the text must be UTF-8.
    """
    try:
        with full.open("rb") as f:
            _check_size(os.fstat(f.fileno()).st_size, where)
            text = f.read(MAX_TABLE_BYTES + 1).decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise TableFileError(f"{where} is not UTF-8 text (byte {err.start} cannot be decoded); "
                             f"save it as UTF-8 comma-separated numbers") from None
    rows: list[list[str]] = []
    first = 0
    for lineno, line in enumerate(text.split("\n"), start=1):
        body = line.split("#", 1)[0]
        if not body.strip():
            continue
        cells = body.split(",")
        if max(map(len, cells)) > MAX_CELL_CHARS:
            longest = max(range(len(cells)), key=lambda i: len(cells[i]))
            raise TableFileError(f"{where}: line {lineno}, column {longest + 1}: a cell of "
                                 f"{len(cells[longest]):,} characters (at most "
                                 f"{MAX_CELL_CHARS}); write only comma-separated decimal "
                                 f"numbers")
        if not _CSV_ROW.fullmatch(body):
            col, cell = next((i, c) for i, c in enumerate(cells, start=1)
                             if not _CSV_CELL_RE.fullmatch(c))
            raise TableFileError(f"{where}: line {lineno}, column {col}: {cell.strip()[:24]!r} "
                                 f"is not a number; write only comma-separated decimal numbers")
        if not rows:
            first = lineno
        elif len(cells) != len(rows[0]):
            raise TableFileError(f"{where}: line {lineno} has {len(cells)} values but line "
                                 f"{first} has {len(rows[0])}; every row needs one value per "
                                 f"token")
        rows.append(cells)
    if not rows:
        raise TableFileError(f"{where} holds no numbers; write one comma-separated row of "
                             f"next-token probabilities per token")
    return np.array(rows, dtype=np.float64)


def load_table(path: str) -> FloatArray:
    """Read a 2-D table of finite, non-negative reals from a .npy or comma-separated .csv file.

    The path must pass :func:`check_path`. Every fault of the file itself (unreadable, empty,
    truncated, not numbers, complex, boolean, not 2-D, NaN/inf, negative) is a one-line
    :class:`TableFileError` naming the file; :func:`check_table` then checks it as a table.
    Cached by resolved path, size and mtime: a long-lived process (a point-job runner) never
    serves an edited file's old contents.
    """
    full = check_path(path)
    st = full.stat()
    return _load_table(path, full, st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=64)
def _load_table(path: str, full: Path, size: int, mtime_ns: int) -> FloatArray:
    where = repr(path)
    try:
        data = _read_npy(full, where) if full.suffix == ".npy" else _read_csv(full, where)
    except OSError as err:
        raise TableFileError(f"{where} cannot be read ({err.strerror})") from None
    if data.ndim != 2:
        raise TableFileError(f"{where} holds an array of shape {data.shape}; a table is a 2-D "
                             f"(V, V) array, one row per token")
    table = data.astype(np.float64)
    _refuse_bad_entries(table, where)
    return table


load_table.cache_clear = _load_table.cache_clear  # type: ignore[attr-defined]
