"""Atomic writes and checksums: every file appears whole or not at all, and a reader can tell.

A file is written to a temporary name in its destination directory and renamed into place
(:func:`atomic_path`), so a reader (or a resumed run) never sees half a file. Tables carry a
``.sha256`` sidecar in ``sha256sum`` format (:func:`read_verified`); JSON files a ``sha256``
member over the canonical JSON of the rest (:func:`read_json_verified`).
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


def write_json(path: str | os.PathLike[str], obj: Any, sort_keys: bool = True) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=sort_keys, allow_nan=False) + "\n")

def checksum_path(path: str | os.PathLike[str]) -> Path:
    """``<file>.sha256`` beside ``path``, in ``sha256sum`` format (``sha256sum -c`` reads it)."""
    return Path(f"{path}.sha256")


def write_checksum(path: str | os.PathLike[str], data: bytes) -> None:
    write_text(checksum_path(path), f"{hashlib.sha256(data).hexdigest()}  {Path(path).name}\n")


def read_verified(path: str | os.PathLike[str]) -> bytes:
    """The bytes of ``path`` after checking them against its ``.sha256`` sidecar."""
    fix = "delete it and rerun snakemake to rebuild it"
    data = Path(path).read_bytes()  # a missing table is a missing input, not corruption
    try:
        recorded = checksum_path(path).read_text(encoding="ascii").split()[0]
    except FileNotFoundError as err:
        raise IntegrityError(f"{path}: {Path(err.filename).name} is missing; {fix}") from None
    except (OSError, UnicodeDecodeError, IndexError) as err:
        raise IntegrityError(f"{path}: cannot read it or its checksum ({type(err).__name__}); "
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
