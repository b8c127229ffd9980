"""Reliability: byte-identical tables whatever the cores, a killed run resumed, corrupt,
foreign and stale point files refused by name."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import ROOT, SNAKEMAKE, TABLES_ONLY, TINY, snakemake, tables

from specsim.io import checksum_path, write_parquet

pytestmark = pytest.mark.slow


def point_files(workdir: Path, kind: str = "sim") -> list[Path]:
    return sorted((workdir / "results" / kind).rglob("*.parquet"))


def test_cores_do_not_change_a_byte(tiny_run: Path, tmp_path: Path) -> None:
    one_core = tmp_path / "one_core"
    snakemake(one_core, TINY, "--cores", "1", TABLES_ONLY)
    ref = tables(tiny_run)
    assert len(ref) >= 10
    # identity is the claim: both runs execute the same operations in the same order per point
    # (one process per point), on the same machine; cores only change the schedule
    assert tables(one_core) == ref
    for a, b in zip(point_files(one_core), point_files(tiny_run), strict=True):
        assert pq.read_table(a).equals(pq.read_table(b))


def test_killed_run_resumes_to_identical_tables(tiny_run: Path, tmp_path: Path) -> None:
    """A run killed mid-way through its point jobs resumes to identical tables. The run starts
    from a copy of the tiny run with every other point and all of results/ but the point files
    deleted: half the point jobs to run (the other half would only be recomputed)."""
    path = TINY
    work = tmp_path / "work"
    shutil.copytree(tiny_run, work, symlinks=True)
    for p in (work / "results").iterdir():
        if p.is_dir() and p.name not in ("sim", "exact"):
            shutil.rmtree(p)
        elif not p.is_dir():
            p.unlink()
    for sim in point_files(work)[::2]:
        for f in (sim, work / "results" / "exact" / sim.relative_to(work / "results" / "sim")):
            f.unlink()
            checksum_path(f).unlink()
    kept = len(point_files(work))
    cmd = [SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(work), "--configfile", str(path),
           "--cores", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and len(point_files(work)) < kept + 2:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done = len(point_files(work))
    assert kept + 2 <= done < len(point_files(tiny_run))  # killed mid-way (some points written)
    assert not (work / "results" / "tables" / "equivalence.csv").exists()
    # no half-written file under a final name: every point file present is readable
    for f in point_files(work):
        pq.read_table(f)
    snakemake(work, path, "--unlock")
    snakemake(work, path, "--cores", "2", "--rerun-incomplete", TABLES_ONLY)
    assert tables(work) == tables(tiny_run)


def _collect(work: Path) -> tuple[subprocess.CompletedProcess[str], str]:
    """The collect job's own command (a Snakemake run stops before it, naming the damaged file
    with the rebuild command: test_damage.py; collect's reader is the second line of defence,
    and `specsim collect` runs outside Snakemake too)."""
    res = subprocess.run([str(Path(SNAKEMAKE).with_name("specsim")), "collect", "--grid",
                          "results/grid.json", "--results-dir", "results", "--out",
                          "results/points.parquet"], cwd=work, capture_output=True, text=True,
                         check=False)
    return res, res.stderr


def test_corrupt_foreign_and_stale_point_files_are_named(tiny_run: Path,
                                                         tmp_path: Path) -> None:
    work = tmp_path / "copy"
    shutil.copytree(tiny_run, work, symlinks=True)
    victim = point_files(work)[0]
    original = victim.read_bytes()
    name = str(victim.relative_to(work))
    # 1. truncated file: aggregation names the file
    victim.write_bytes(original[: len(original) // 2])
    res, log = _collect(work)
    assert res.returncode != 0
    assert name in log and "not a readable point file" in log
    # 2. another point's file copied over it (same schema, valid checksum): its digest differs
    shutil.copyfile(point_files(work)[1], victim)
    res, log = _collect(work)
    assert res.returncode != 0 and name in log and "stale file" in log
    # 3. a file from another identity (stale): refused naming both digests. Cases 3-5 are
    #    rewritten with specsim's own sealed writer (a file rewritten by anything else has no
    #    valid seal and is refused before it is decoded: 3b)
    table = pq.read_table(tiny_run / name)
    meta = dict(table.schema.metadata)
    meta[b"specsim.point_digest"] = b"0123456789abcdef"
    pq.write_table(table.replace_schema_metadata(meta), victim)
    res, log = _collect(work)
    assert res.returncode != 0 and name in log and "specsim.file_sha256" in log
    write_parquet(victim, table.replace_schema_metadata(meta))
    res, log = _collect(work)
    assert res.returncode != 0 and "0123456789abcdef" in log and name in log
    # 4. the data changed but the metadata kept: the payload checksum catches it
    row = table.to_pylist()
    row[0]["chains"] += 1
    write_parquet(victim, pa.Table.from_pylist(row, schema=table.schema))
    res, log = _collect(work)
    assert res.returncode != 0 and name in log and "checksum" in log
    # 5. a schema mismatch (a column dropped)
    write_parquet(victim, table.drop(["joint2"]))
    res, log = _collect(work)
    assert res.returncode != 0 and name in log and "schema" in log
    # 6. a deleted point file is regenerated when aggregation runs again (Snakemake does not
    #    rebuild a missing intermediate while everything downstream is up to date), and the
    #    tables come back identical
    victim.unlink()
    snakemake(work, TINY, "--cores", "2", TABLES_ONLY, "--forcerun", "collect")
    assert tables(work) == tables(tiny_run)
    assert victim.read_bytes() != b"" and pq.read_table(victim).equals(table)


def test_provenance_recorded(tiny_run: Path) -> None:
    grid = (tiny_run / "results" / "grid.json").read_text()
    assert "config_digest" in grid
    meta = pq.read_schema(point_files(tiny_run)[0]).metadata
    assert b"pyarrow" in meta[b"specsim.versions"]
    t = pq.read_table(point_files(tiny_run)[0])
    assert t.schema.field("seed_key").type == pa.list_(pa.uint32())
