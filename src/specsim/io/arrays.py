"""Arrays: numpy ``.npz`` files written atomically with a ``.sha256`` sidecar, and read back
only after their bytes are verified whole (never unpickled)."""

from __future__ import annotations

import io
import os
from typing import Any

import numpy as np
from numpy.typing import NDArray

from specsim.io.atomic import atomic_path, read_verified


def write_npz(path: str | os.PathLike[str], arrays: dict[str, Any]) -> None:
    """``arrays`` as an uncompressed ``.npz`` file (its sidecar written by :func:`atomic_path`)."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    data = buffer.getvalue()
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def read_npz(path: str | os.PathLike[str]) -> dict[str, NDArray[Any]]:
    """The arrays of a :func:`write_npz` file, by name; its bytes checked against the sidecar
    (IntegrityError naming the file) before numpy reads them."""
    data = read_verified(path, "arrays")
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return {name: z[name] for name in z.files}
