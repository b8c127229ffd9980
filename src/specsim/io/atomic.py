"""Atomic writes and checksums: every file appears whole or not at all, and a reader can tell.

A file is written to a temporary name in its destination directory and renamed into place
(:func:`atomic_path`), so a reader (or a resumed run) never sees half a file. Every file written
so gets a ``<file>.sha256`` sidecar in ``sha256sum`` format (``sha256sum -c`` reads it), so any
later change to its bytes -- bit rot with the mtime kept included -- is caught
(:func:`check_sidecar`, :func:`read_verified`; ``specsim verify`` checks every file under
results/). JSON files also carry a ``sha256`` member over the canonical JSON of the rest
(:func:`read_json_verified`); Parquet files the sha256 of their own bytes
(:mod:`specsim.io.parquet`: the seal travels with a copied point or trace file). Every reader
takes the bytes once through :func:`read_bounded` (refused over a size limit before anything is
read) and checks them whole before anything decodes them.
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


def disk_full_line(filename: object) -> str:
    """What a write that ran out of space says: one line naming the file (when it is known)."""
    return f"disk full writing {filename}" if filename else "disk full (no file named)"


class DiskFullError(OSError):
    """A write that ran out of disk space or quota; ``str()`` is one line naming the file."""

    def __str__(self) -> str:
        return disk_full_line(self.filename)


def disk_full(err: BaseException) -> bool:
    """Whether ``err`` is a write that ran out of disk space or quota (ENOSPC, EDQUOT)."""
    return isinstance(err, OSError) and err.errno in _FULL


def free_bytes(directory: str | os.PathLike[str]) -> int | None:
    """The bytes free to this user on ``directory``'s file system (None: it cannot be told)."""
    try:
        st = os.statvfs(directory)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def no_room(directory: str | os.PathLike[str], need: int = 4 << 20) -> str | None:
    """Why a run in ``directory`` cannot start (fewer than ``need`` bytes free to this user:
    Snakemake's own locks and logs would fail first, with tracebacks), or None."""
    free = free_bytes(directory)
    if free is None or free >= need:
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
    allows (0644 under umask 022, 0664 under 002). After the rename the file's sidecar
    (:func:`checksum_path`) is written, from the bytes renamed; a run killed in between leaves
    a file its sidecar does not match, which ``specsim verify`` names (and the killed job is
    incomplete, so ``--rerun-incomplete`` redoes it). A write that runs out of space raises
    :class:`DiskFullError` naming ``path``, and leaves neither ``path`` nor the temporary.
    """
    dest = Path(path)
    tmp = ""
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=TEMPORARY_SUFFIX,
                                   dir=dest.parent)
        os.close(fd)
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        seal = None if is_sidecar(dest) else sidecar_text(dest, file_sha256(tmp))
        os.replace(tmp, dest)
        if seal is not None:
            write_text(checksum_path(dest), seal)
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


SIDECAR_SUFFIX = ".sha256"
TEMPORARY_SUFFIX = ".tmp"  # atomic_path's temporaries: .<name>.<random>.tmp


def checksum_path(path: str | os.PathLike[str]) -> Path:
    """``<file>.sha256`` beside ``path``, in ``sha256sum`` format (``sha256sum -c`` reads it)."""
    return Path(f"{path}{SIDECAR_SUFFIX}")


def is_sidecar(path: str | os.PathLike[str]) -> bool:
    return str(path).endswith(SIDECAR_SUFFIX)


def is_temporary(path: str | os.PathLike[str]) -> bool:
    """A temporary :func:`atomic_path` left behind (a write killed before its rename)."""
    name = Path(path).name
    return name.startswith(".") and name.endswith(TEMPORARY_SUFFIX)


def sidecar_text(path: str | os.PathLike[str], digest: str) -> str:
    """The whole sidecar of ``path`` whose bytes hash to ``digest`` (one ``sha256sum`` line)."""
    return f"{digest}  {Path(path).name}\n"


def file_sha256(path: str | os.PathLike[str]) -> str:
    """sha256 (hex) of a file's bytes, read in chunks."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def write_checksum(path: str | os.PathLike[str], data: bytes) -> None:
    write_text(checksum_path(path), sidecar_text(path, hashlib.sha256(data).hexdigest()))


def seal(path: str | os.PathLike[str]) -> None:
    """Write the sidecar of a file another program wrote (``make report``: Snakemake's report)."""
    write_text(checksum_path(path), sidecar_text(path, file_sha256(path)))


def check_sidecar(path: str | os.PathLike[str], data: bytes | None = None) -> None:
    """Refuse ``path`` unless its sidecar is exactly the one :func:`atomic_path` wrote for its
    bytes (``data``, or the file read from disk). A damaged sidecar is refused like damaged data:
    which of the two changed cannot be told, and rebuilding the file rewrites both."""
    fix = "delete it and rerun snakemake to rebuild it"
    side = checksum_path(path)
    for each in ((side,) if data is not None else (Path(path), side)):
        if each.exists() and not each.is_file():  # a FIFO would block the read: never open it
            raise IntegrityError(f"{path}: {each.name} is not a regular file; {fix}")
    try:
        digest = hashlib.sha256(data).hexdigest() if data is not None else file_sha256(path)
        want = sidecar_text(path, digest).encode()
        with open(side, "rb") as fh:  # never more than a sidecar's length (+1: too long)
            recorded = fh.read(len(want) + 1)
    except FileNotFoundError as err:
        gone = "it" if Path(err.filename) == Path(path) else side.name
        raise IntegrityError(f"{path}: {gone} is missing; {fix}") from None
    except OSError as err:
        raise IntegrityError(f"{path}: cannot read it or its checksum ({type(err).__name__}); "
                             f"{fix}") from None
    if recorded != want:
        raise IntegrityError(f"{path}: content does not match {side.name} (corrupt or edited "
                             f"file or checksum); {fix}")


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
    data = read_bounded(path, READ_LIMITS[kind])  # missing: a missing input, not corruption
    check_sidecar(path, data)
    return data

def write_json_verified(path: str | os.PathLike[str], obj: dict[str, Any]) -> None:
    """JSON with a ``sha256`` member over the canonical JSON of everything else. Key order is
    kept as given (a config's order of models and studies means something: the first model is
    a default, and a point shared by two model names takes the first name)."""
    body = {k: v for k, v in obj.items() if k != "sha256"}
    write_json(path, {**body, "sha256": payload_digest(body)}, sort_keys=False)


def read_json_verified(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The object of a :func:`write_json_verified` file, its checksum member checked. The bytes
    are checked whole against the ``.sha256`` sidecar :func:`atomic_path` wrote beside the file
    before the JSON parser sees them (a file without one -- copied alone -- is checked by its
    member only, after parsing within the size limit)."""
    fix = REBUILD
    try:
        data = read_bounded(path, READ_LIMITS["json"])
        if checksum_path(path).exists():
            check_sidecar(path, data)
        obj = json.loads(data.decode("utf-8"))
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
