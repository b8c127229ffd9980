"""Damage for the integrity tests, unit and workflow alike: a bit flipped with the mtime kept,
``specsim verify`` run as a user would, and a small sealed checks table."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from specsim.io import write_table

SPECSIM = str(Path(sys.executable).with_name("specsim"))


def flip(path: Path, at: float = 0.5) -> None:
    """One bit of one byte, the mtime kept (bit rot: Snakemake sees nothing)."""
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[int(len(data) * at)] ^= 0x10
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def verify(results: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SPECSIM, "verify", "--results-dir", str(results)],
                          capture_output=True, text=True, check=False)


def checks_table(path: Path) -> None:
    write_table(pd.DataFrame({"check": ["a claim", "another"], "passed": [True, True],
                              "observed": [1.0, 2.0], "expected": ["1", "2"]}), path)
