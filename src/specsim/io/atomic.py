"""Atomic writes and checksums: every file appears whole or not at all, and a reader can tell.

A file is written to a temporary name in its destination directory and renamed into place
(:func:`atomic_path`), so a reader (or a resumed run) never sees half a file. Every file written
so gets a ``<file>.sha256`` sidecar in ``sha256sum`` format (``sha256sum -c`` reads it), so any
later change to its bytes -- bit rot with the mtime kept included -- is caught
(:func:`check_sidecar`, :func:`read_verified`; ``specsim verify`` checks every file under
results/). JSON files also carry a ``sha256`` member over the canonical JSON of the rest
(:func:`read_json_verified`).
"""

from __future__ import annotations

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
    incomplete, so ``--rerun-incomplete`` redoes it).
    """
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=TEMPORARY_SUFFIX, dir=dest.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        seal = None if is_sidecar(dest) else sidecar_text(dest, _file_sha256(tmp))
        os.replace(tmp, dest)
        if seal is not None:
            write_text(checksum_path(dest), seal)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


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


def _file_sha256(path: str | os.PathLike[str]) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def write_checksum(path: str | os.PathLike[str], data: bytes) -> None:
    write_text(checksum_path(path), sidecar_text(path, hashlib.sha256(data).hexdigest()))


def seal(path: str | os.PathLike[str]) -> None:
    """Write the sidecar of a file another program wrote (``make report``: Snakemake's report)."""
    write_text(checksum_path(path), sidecar_text(path, _file_sha256(path)))


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
        digest = hashlib.sha256(data).hexdigest() if data is not None else _file_sha256(path)
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


def read_verified(path: str | os.PathLike[str]) -> bytes:
    """The bytes of ``path`` after checking them against its ``.sha256`` sidecar."""
    data = Path(path).read_bytes()  # a missing table is a missing input, not corruption
    check_sidecar(path, data)
    return data

def write_json_verified(path: str | os.PathLike[str], obj: dict[str, Any]) -> None:
    """JSON with a ``sha256`` member over the canonical JSON of everything else. Key order is
    kept as given (a config's order of models and studies means something: the first model is
    a default, and a point shared by two model names takes the first name)."""
    body = {k: v for k, v in obj.items() if k != "sha256"}
    write_json(path, {**body, "sha256": payload_digest(body)}, sort_keys=False)


def read_json_verified(path: str | os.PathLike[str]) -> dict[str, Any]:
    fix = "delete it and rerun snakemake to rebuild it"
    try:
        obj = json.loads(Path(path).read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise IntegrityError(f"{path}: no such file; rerun snakemake to build it") from None
    except (OSError, UnicodeDecodeError, ValueError) as err:
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
