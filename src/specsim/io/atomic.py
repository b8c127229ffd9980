"""Atomic writes and checksums: every file appears whole or not at all, and a reader can tell.

A file is written to a temporary name in its destination directory and renamed into place
(:func:`atomic_path`), so a reader (or a resumed run) never sees half a file. Tables carry a
``.sha256`` sidecar in ``sha256sum`` format (:func:`read_verified`); JSON files a ``sha256``
member over the canonical JSON of the rest (:func:`read_json_verified`); Parquet files the
sha256 of their own bytes (:mod:`specsim.io.parquet`). Every reader takes the bytes once through
:func:`read_bounded` (refused over a size limit before anything is read) and checks them whole
before anything decodes them.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


class IntegrityError(RuntimeError):
    """A result file that is unreadable, corrupt, tampered with or stale; the message names
    the file and what to delete or rerun."""


_FULL = {errno.ENOSPC, errno.EDQUOT}


class DiskFullError(OSError):
    """A write that ran out of disk space or quota; ``str()`` is one line naming the file."""

    def __str__(self) -> str:
        return f"disk full writing {self.filename}"


def disk_full(err: BaseException) -> bool:
    """Whether ``err`` is a write that ran out of disk space or quota (ENOSPC, EDQUOT)."""
    return isinstance(err, OSError) and err.errno in _FULL


def no_room(directory: str | os.PathLike[str], need: int = 4 << 20) -> str | None:
    """Why a run in ``directory`` cannot start (fewer than ``need`` bytes free to this user:
    Snakemake's own locks and logs would fail first, with tracebacks), or None."""
    try:
        st = os.statvfs(directory)
    except OSError:
        return None
    free = st.f_bavail * st.f_frsize
    if free >= need:
        return None
    return (f"disk full: {os.path.abspath(directory)} has {free:,} bytes free (a run needs "
            f"at least {need:,} for its locks, logs and results); free some space and rerun")


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
    allows (0644 under umask 022, 0664 under 002). A write that runs out of space raises
    :class:`DiskFullError` naming ``path``, and leaves neither ``path`` nor the temporary.
    """
    dest = Path(path)
    tmp = ""
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
        os.close(fd)
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, dest)
    except OSError as err:
        if disk_full(err):  # a write error names no file: say which output it was
            raise DiskFullError(err.errno, os.strerror(err.errno), str(dest)) from None
        raise
    finally:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)  # no half-written file is left; it also frees the space it took


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` atomically as UTF-8 with ``\\n`` line ends, whatever the locale/platform."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8", newline="\n")


def write_json(path: str | os.PathLike[str], obj: Any, sort_keys: bool = True) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=sort_keys, allow_nan=False) + "\n")

def checksum_path(path: str | os.PathLike[str]) -> Path:
    """``<file>.sha256`` beside ``path``, in ``sha256sum`` format (``sha256sum -c`` reads it)."""
    return Path(f"{path}.sha256")


def write_checksum(path: str | os.PathLike[str], data: bytes) -> None:
    write_text(checksum_path(path), f"{hashlib.sha256(data).hexdigest()}  {Path(path).name}\n")


MiB = 1 << 20
#: The largest file of each kind a reader accepts: checked on the file's size before a byte is
#: read, so a huge or endless file is refused at once, never parsed. Far above what a run writes
#: (a points.parquet of 100,000 points is ~30 MB; a table of as many rows ~20 MB).
READ_LIMITS = {"table": 256 * MiB, "json": 64 * MiB, "point": 16 * MiB, "frame": 1024 * MiB,
               "trace": 4096 * MiB, "arrays": 4096 * MiB, "sidecar": 4096}
#: The longest cell a CSV table may hold (checked on the bytes, before any parser sees them).
MAX_CELL_BYTES = 64 * 1024
REBUILD = "delete it and rerun snakemake to rebuild it"


def read_bounded(path: str | os.PathLike[str], limit: int, fix: str = REBUILD) -> bytes:
    """The bytes of ``path``, read once; IntegrityError naming it when it has more than
    ``limit`` bytes (told by its size before reading) or cannot be read. A missing file raises
    FileNotFoundError (a missing input is not corruption)."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            data = b"" if size > limit else fh.read(limit + 1)
    except FileNotFoundError:
        raise
    except OSError as err:
        raise IntegrityError(f"{path}: cannot be read ({err.strerror or type(err).__name__}); "
                             f"{fix}") from None
    if size > limit or len(data) > limit:
        raise IntegrityError(f"{path}: {max(size, len(data)):,} bytes, over the {limit:,}-byte "
                             f"limit for this kind of file (not a file this run wrote); {fix}")
    return data


def check_cells(data: bytes, path: str | os.PathLike[str], limit: int | None = None,
                fix: str = REBUILD) -> None:
    """Refuse, before any parser runs, CSV bytes with a cell over ``limit`` bytes
    (:data:`MAX_CELL_BYTES` by default); only a line that long is split into its cells. Linear
    in ``len(data)``."""
    limit = MAX_CELL_BYTES if limit is None else limit
    for line in data.splitlines():
        if len(line) > limit:
            longest = max(len(c) for c in line.split(b","))
            if longest > limit:
                raise IntegrityError(f"{path}: a cell of {longest:,} bytes, over the "
                                     f"{limit:,}-byte limit of a table cell; {fix}")


def read_verified(path: str | os.PathLike[str], kind: str = "table") -> bytes:
    """The bytes of ``path`` (at most ``READ_LIMITS[kind]``) after checking them, whole,
    against its ``.sha256`` sidecar (nothing is decoded before that: a caller parses the
    returned bytes)."""
    fix = REBUILD
    data = read_bounded(path, READ_LIMITS[kind])  # missing: a missing input, not corruption
    try:
        recorded = read_bounded(checksum_path(path), READ_LIMITS["sidecar"]
                                ).decode("ascii").split()[0]
    except FileNotFoundError as err:
        raise IntegrityError(f"{path}: {Path(err.filename).name} is missing; {fix}") from None
    except (IntegrityError, UnicodeDecodeError, IndexError) as err:
        raise IntegrityError(f"{path}: cannot read its checksum file ({type(err).__name__}); "
                             f"{fix}") from None
    if hashlib.sha256(data).hexdigest() != recorded:
        raise IntegrityError(f"{path}: content does not match {checksum_path(path).name} "
                             f"(corrupt or edited); {fix}")
    return data

def write_json_verified(path: str | os.PathLike[str], obj: dict[str, Any]) -> None:
    """JSON with a ``sha256`` member over the canonical JSON of everything else. Key order is
    kept as given (a config's order of models and studies means something: the first model is
    a default, and a point shared by two model names takes the first name)."""
    body = {k: v for k, v in obj.items() if k != "sha256"}
    write_json(path, {**body, "sha256": payload_digest(body)}, sort_keys=False)


def read_json_verified(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The object of a :func:`write_json_verified` file, its checksum member checked."""
    fix = REBUILD
    try:
        obj = json.loads(read_bounded(path, READ_LIMITS["json"]).decode("utf-8"))
    except FileNotFoundError:
        raise IntegrityError(f"{path}: no such file; rerun snakemake to build it") from None
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise IntegrityError(f"{path}: not JSON ({type(err).__name__}); {fix}") from None
    if not isinstance(obj, dict) or "sha256" not in obj:
        raise IntegrityError(f"{path}: no checksum member (not written by specsim); {fix}")
    body = {k: v for k, v in obj.items() if k != "sha256"}
    if payload_digest(body) != obj["sha256"]:
        raise IntegrityError(f"{path}: content does not match its checksum (corrupt or edited); "
                             f"{fix}")
    return body

def payload_digest(record: dict[str, Any]) -> str:
    """sha256 of a row's canonical JSON (NaN spelled ``NaN``, keys sorted)."""
    text = json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()
