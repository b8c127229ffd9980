"""Lint as part of `make test`: ruff (with its NumPy and pandas rules) and snakefmt."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import ROOT

BIN = Path(sys.executable).parent


def test_ruff_clean() -> None:
    res = subprocess.run([str(BIN / "ruff"), "check", "src", "tests", "benchmarks"], cwd=ROOT,
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


def test_snakefmt_clean() -> None:
    res = subprocess.run([str(BIN / "snakefmt"), "--check", "Snakefile", "workflow"], cwd=ROOT,
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
