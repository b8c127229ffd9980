"""A full disk meets the real DAG: a run on a full disk stops in one line, and a disk that fills
during a run ends it in one line, a rerun resuming (tests/integrity/test_disk_full.py: every
step in-process)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from disk_tools import fill, no_temporaries, tmpfs

from specsim.io.reserve import (
    ADVICE,
    RESERVE,
    RESERVE_BYTES,
)


@pytest.fixture
def disk_16m(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs: room for the tiny run's start, not for all of it once filled."""
    with tmpfs(tmp_path, "16m") as disk:
        yield disk


def test_a_run_on_a_full_disk_stops_with_one_line(small_disk: Path) -> None:
    """Snakemake's own locks and logs fail first on a full disk, each with a traceback; the
    workflow stops before them, naming the directory."""
    from conftest import TINY, snakemake

    fill(small_disk)
    done = snakemake(small_disk, TINY, "--cores", "1", check=False)
    err = done.stderr
    assert done.returncode != 0 and "Traceback" not in err and "Logging error" not in err, err
    assert f"specsim: disk full: {small_disk} has 0 bytes free" in err


@pytest.mark.slow
def test_a_disk_that_fills_during_a_run_ends_it_in_one_line_and_a_rerun_resumes(
        disk_16m: Path, tiny_run: Path) -> None:
    """The tiny run needs ~9 MB with its reserve; it starts with 6.5 MiB free and fills the
    disk in some job. Its last line is that job's; no Snakemake metadata error, no traceback,
    no partial file; with room again the rerun redoes only what is missing and its tables equal
    a run that never met a full disk."""
    from conftest import TINY, snakemake, tables

    fill(disk_16m, leave=(6 << 20) + (512 << 10))
    done = snakemake(disk_16m, TINY, "--cores", "2", check=False)
    err = done.stderr
    assert done.returncode == 1, err[-3000:]
    last = err.rstrip("\n").splitlines()[-1]
    assert last.startswith("specsim: disk full writing results/"), err[-3000:]
    assert last.endswith(f"; {ADVICE}"), last
    assert "Error recording metadata" not in err and "Traceback" not in err, err[-3000:]
    assert "Logging error" not in err, err[-3000:]
    assert not no_temporaries(disk_16m)
    kept = {p: p.stat().st_mtime_ns for p in (disk_16m / "results").rglob("*.parquet")}
    assert kept, "the run should fill the disk after its first point files"
    (disk_16m / "filler").unlink()
    snakemake(disk_16m, TINY, "--cores", "2")
    assert {p: p.stat().st_mtime_ns for p in kept} == kept  # finished jobs are not redone
    assert tables(disk_16m) == tables(tiny_run)
    assert (disk_16m / RESERVE).stat().st_blocks * 512 >= RESERVE_BYTES  # held again

