"""Arrays: numpy ``.npz`` files written atomically with a ``.sha256`` sidecar, and read back
only after their bytes are verified whole (never unpickled)."""

from __future__ import annotations

import io
import os
import zipfile
from typing import Any

import numpy as np
from numpy.typing import NDArray

from specsim.io.atomic import READ_LIMITS, REBUILD, IntegrityError, atomic_path, read_verified


def write_npz(path: str | os.PathLike[str], arrays: dict[str, Any]) -> None:
    """``arrays`` as an uncompressed ``.npz`` file (its sidecar written by :func:`atomic_path`)."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    data = buffer.getvalue()
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def read_npz(path: str | os.PathLike[str]) -> dict[str, NDArray[Any]]:
    """The arrays of a :func:`write_npz` file, by name; its bytes checked against the sidecar
    (IntegrityError naming the file) before numpy reads them, and the sizes its zip directory
    declares bounded by ``READ_LIMITS["arrays"]`` before anything is inflated. Bytes that are
    no ``.npz`` of plain arrays (garbage under a matching sidecar, an object array) raise
    IntegrityError naming the file too."""
    data = read_verified(path, "arrays")
    limit = READ_LIMITS["arrays"]
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            declared = sum(info.file_size for info in archive.infolist())
        if declared > limit:
            raise IntegrityError(f"{path}: its arrays inflate to {declared:,} bytes, over the "
                                 f"{limit:,}-byte limit for arrays; {REBUILD}")
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            return {name: z[name] for name in z.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as err:
        reason = " ".join(str(err).split())[:120] or type(err).__name__
        raise IntegrityError(f"{path}: not a .npz file of numeric arrays ({reason}); "
                             f"{REBUILD}") from None


def require_arrays(path: str | os.PathLike[str], arrays: dict[str, NDArray[Any]],
                   names: tuple[str, ...], what: str, writer: str) -> None:
    """IntegrityError naming ``path`` unless ``arrays`` holds every one of ``names``, each
    integral or text (``what``: the kind of file expected; ``writer``: the step that writes
    one)."""
    missing = [n for n in names if n not in arrays]
    odd = [n for n in names if n in arrays and arrays[n].dtype.kind not in "iuU"]
    if missing or odd:
        problem = (f"no array {missing[0]!r}" if missing else
                   f"array {odd[0]!r} holds {arrays[odd[0]].dtype}")
        raise IntegrityError(f"{path}: not {what} ({problem}); give the file {writer} writes")
