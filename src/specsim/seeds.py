"""Seeds of the real-pair experiments, from the root seed and what an experiment is.

A grid point's seed is :attr:`specsim.grid.Point.seed`; an experiment outside the grid (a real
pair's speculative runs, its lossless test, its traces) takes :func:`seed_for` of its identity,
so no result depends on the order in which experiments run.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np


def seed_for(root: int, *identity: Any) -> np.random.SeedSequence:
    """Seed from the root seed and an experiment's identity (never from order of execution)."""
    h = hashlib.sha256(json.dumps([root, *identity]).encode()).digest()
    return np.random.SeedSequence(root, spawn_key=tuple(int.from_bytes(h[i : i + 4], "little")
                                                        for i in range(0, 16, 4)))
