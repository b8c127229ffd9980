"""Reliability: byte-identical tables whatever the cores or shard size, a killed run resumed,
corrupted or foreign shards refused by name."""

from __future__ import annotations

import filecmp
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import ROOT, TINY

SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
pytestmark = pytest.mark.slow


def snakemake(workdir: Path, configfile: Path, *args: str,
              check: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = [SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(workdir), "--configfile",
           str(configfile), *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    if check:
        assert res.returncode == 0, res.stderr[-3000:]
    return res


def tables(workdir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((workdir / "results" / "tables").glob("*.csv"))}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("reference")
    snakemake(work, TINY, "--cores", "2")
    return work


def test_cores_and_shard_size_do_not_change_a_byte(reference: Path, tmp_path: Path) -> None:
    one_core = tmp_path / "one_core"
    snakemake(one_core, TINY, "--cores", "1")
    cfg = yaml.safe_load(TINY.read_text())
    cfg["shard_size"] = 5
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump(cfg))
    resharded = tmp_path / "resharded"
    snakemake(resharded, other, "--cores", "2")
    ref = tables(reference)
    assert len(ref) >= 10
    assert tables(one_core) == ref
    assert tables(resharded) == ref
    assert len(list((resharded / "results" / "shards").glob("*.parquet"))) != len(
        list((reference / "results" / "shards").glob("*.parquet")))


def test_killed_run_resumes_to_identical_tables(reference: Path, tmp_path: Path) -> None:
    cfg = yaml.safe_load(TINY.read_text())
    cfg["shard_size"] = 2  # many shard jobs, so the kill lands mid-simulation
    path = tmp_path / "killme.yaml"
    path.write_text(yaml.safe_dump(cfg))
    work = tmp_path / "work"
    work.mkdir()
    cmd = [SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(work), "--configfile", str(path),
           "--cores", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    shards = work / "results" / "shards"
    deadline = time.time() + 120
    while time.time() < deadline and len(list(shards.glob("s*.parquet"))) < 2:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done = len(list(shards.glob("s*.parquet")))
    assert 2 <= done < len(range(0, 10**6))  # killed mid-way (some shards written)
    assert not (work / "results" / "tables" / "equivalence.csv").exists()
    # no half-written file under a final name: every shard present is a readable Parquet file
    for shard in shards.glob("s*.parquet"):
        pq.read_table(shard)
    snakemake(work, path, "--unlock")
    snakemake(work, path, "--cores", "2", "--rerun-incomplete")
    assert tables(work) == tables(reference)


def test_corrupted_and_foreign_shards_are_named(reference: Path, tmp_path: Path) -> None:
    work = tmp_path / "copy"
    shutil.copytree(reference, work, symlinks=True)
    shard = sorted((work / "results" / "shards").glob("s*.parquet"))[0]
    # 1. truncated file: aggregation names the file
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) // 2])
    res = snakemake(work, TINY, "--cores", "1", "-f", "results/points.parquet", check=False)
    log = (work / "logs" / "collect.log").read_text()
    assert res.returncode != 0
    assert shard.name in log and "not a readable Parquet shard" in log
    # 2. a shard from another config: refused, naming both digests
    table = pq.read_table(reference / "results" / "shards" / shard.name)
    meta = dict(table.schema.metadata)
    meta[b"specsim.config_digest"] = b"0123456789abcdef"
    pq.write_table(table.replace_schema_metadata(meta), shard)
    res = snakemake(work, TINY, "--cores", "1", "-f", "results/points.parquet", check=False)
    log = (work / "logs" / "collect.log").read_text()
    assert res.returncode != 0
    assert "0123456789abcdef" in log and shard.name in log
    # 3. a schema mismatch (a column dropped)
    pq.write_table(pq.read_table(reference / "results" / "shards" / shard.name).drop(
        ["joint2"]).replace_schema_metadata(meta | {b"specsim.config_digest": meta[
            b"specsim.config_digest"]}), shard)
    res = snakemake(work, TINY, "--cores", "1", "-f", "results/points.parquet", check=False)
    assert res.returncode != 0
    # 4. Snakemake regenerates a deleted shard and the tables come back identical
    shard.unlink()
    snakemake(work, TINY, "--cores", "2", "--forcerun", "collect")
    assert tables(work) == tables(reference)
    assert filecmp.cmp(shard, reference / "results" / "shards" / shard.name, shallow=False) or \
        pq.read_table(shard).equals(pq.read_table(reference / "results" / "shards" / shard.name))


def test_provenance_recorded(reference: Path) -> None:
    grid = (reference / "results" / "grid.json").read_text()
    assert "config_digest" in grid
    meta = pq.read_schema(next((reference / "results" / "shards").glob("s*.parquet"))).metadata
    assert b"pyarrow" in meta[b"specsim.versions"]
    t = pq.read_table(next((reference / "results" / "shards").glob("s*.parquet")))
    assert t.schema.field("seed_key").type == pa.list_(pa.uint32())
