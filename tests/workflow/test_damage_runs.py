"""Damage meets the real DAG: bit rot anywhere in a finished tiny run is named, fails the gate
and the named command repairs it; a plain Snakemake run names what it cannot see; damage a
job would read stops the run before any job; deleted point files are rebuilt through a kill -9
and the README's resume (tests/integrity/test_damage.py: the checker on small files)."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, SNAKEMAKE, TABLES_ONLY, TINY, only_the_check_runs, snakemake, tables
from damage_tools import flip, verify

from specsim.io import checksum_path
from specsim.resume import main as resume_main
from specsim.resume import runs_in, stale_lock


@pytest.fixture
def copy_of_tiny(tiny_run: Path, tmp_path: Path) -> Path:
    work = tmp_path / "work"
    shutil.copytree(tiny_run, work, symlinks=True)  # mtimes kept
    return work


def one(work: Path, pattern: str, index: int = 0) -> Path:
    return sorted(work.glob(pattern))[index]


@pytest.mark.slow
def test_bit_rot_anywhere_is_named_fails_the_gate_and_the_named_command_repairs_it(
        copy_of_tiny: Path, tiny_run: Path) -> None:
    work = copy_of_tiny
    damaged = [one(work, "results/tables/accept_curve.csv"),
               one(work, "results/tables/equivalence.csv.sha256"),
               one(work, "results/sim/**/*.parquet", 3),
               one(work, "results/exact/**/*.parquet", 5),
               one(work, "results/figures/*.png"),
               work / "results/grid.json"]
    for path in damaged:
        flip(path)
    named = {str(p.relative_to(work)).removesuffix(".sha256") for p in damaged}
    res = verify(work / "results")
    assert res.returncode == 1
    for name in named:
        assert f"DAMAGED {work / name}:" in res.stderr
    command = res.stderr.strip().splitlines()[-1]
    assert all(name in command.split("--forcerun ", 1)[1] for name in named)
    assert not (work / "results/checks.ok").exists()  # withdrawn
    make = subprocess.run(["make", "-s", "-f", str(ROOT / "Makefile"), "-C", str(work), "verify",
                           f"VENV={Path(sys.executable).parent.parent}", "STAMP="],
                          capture_output=True, text=True, check=False)
    assert make.returncode != 0 and "DAMAGED" in make.stderr
    # the README's command: only the gate reruns (checks.ok is gone), and it fails naming them
    # in one line each, its input list (the manifest, not every file) not printed whole
    res = snakemake(work, TINY, "--cores", "2", check=False)
    assert res.returncode != 0 and not (work / "results/checks.ok").exists()
    gate_log = (work / "logs/gate.log").read_text()
    assert all(name in gate_log for name in named)
    out = res.stdout + res.stderr
    assert "input: results/tables/checks.csv, results/tables/checks.csv.sha256, " \
           "results/manifest.txt\n" in out
    assert all(out.count(f"DAMAGED {name}:") == 1 for name in named), out[-3000:]
    # the command verify names rebuilds every one of them
    targets = command.split("--forcerun ", 1)[1].split()
    snakemake(work, TINY, "--cores", "2", "--forcerun", *targets)
    assert verify(work / "results").returncode == 0
    assert tables(work) == tables(tiny_run)
    assert (work / "results/checks.ok").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("where", ["results/sim/**/*.parquet", "results/exact/**/*.parquet",
                                   "results/points.parquet", "results/grid.json",
                                   "results/tables/checks.csv", "results/tables/*.md",
                                   "results/tables/*.csv.sha256"])
def test_a_plain_snakemake_run_names_bit_rot_it_cannot_see(copy_of_tiny: Path, where: str
                                                           ) -> None:
    """A byte flipped with the mtime kept: Snakemake sees nothing out of date (the run's job
    stats list `all` alone), and that one job verifies every file and fails naming the damaged
    one and the command rebuilding it; checks.ok is withdrawn."""
    work = copy_of_tiny
    path = one(work, where)
    flip(path)
    res = snakemake(work, TINY, "--cores", "2", check=False)
    out = res.stdout + res.stderr
    assert only_the_check_runs(out), out[-3000:]  # nothing but the check
    name = str(path.relative_to(work)).removesuffix(".sha256")
    assert res.returncode != 0 and out.count(f"DAMAGED {name}:") == 1, out[-3000:]
    assert f"--forcerun {name}" in out and "Traceback" not in out
    assert not (work / "results/checks.ok").exists()


@pytest.mark.slow
def test_damage_a_job_would_read_stops_the_run_before_any_job_naming_all_of_it(
        copy_of_tiny: Path, tiny_run: Path) -> None:
    """Two point files flipped and points.parquet deleted: collect would read the first damaged
    file and stop naming it alone, below its whole input list. The run stops before any job,
    naming both with the command; a table this run rewrites anyway is not named."""
    work = copy_of_tiny
    sims = [one(work, "results/sim/**/*.parquet", i) for i in (0, 5)]
    for path in [*sims, work / "results/tables/roofline.csv"]:
        flip(path)
    (work / "results/points.parquet").unlink()
    res = snakemake(work, TINY, "--cores", "2", check=False)
    out = res.stdout + res.stderr
    names = sorted(str(p.relative_to(work)) for p in sims)
    assert res.returncode == 1, out[-3000:]
    assert all(out.count(f"DAMAGED {name}:") == 1 for name in names), out[-3000:]
    assert "roofline.csv:" not in out and "Error in rule" not in out, out[-3000:]
    assert "2 damaged file(s) that this run's jobs would read" in out
    assert not (work / "results/points.parquet").exists()  # no job ran
    targets = res.stderr.strip().splitlines()[-1].split("--forcerun ", 1)[1].split()
    assert targets == names
    snakemake(work, TINY, "--cores", "2", TABLES_ONLY, "--forcerun", *targets)
    assert tables(work) == tables(tiny_run)


def test_deleted_point_files_are_rebuilt_through_a_kill_9_and_the_readme_resume(
        copy_of_tiny: Path, tiny_run: Path) -> None:
    """One DAG run for two claims: the README's command rebuilds deleted sim and exact files,
    and after `kill -9` of that run its resume (--unlock once nothing of it is left, then the
    same command) completes to identical tables."""
    work = copy_of_tiny
    gone = [one(work, "results/sim/**/*.parquet", 2), one(work, "results/exact/**/*.parquet", 7)]
    for path in gone:
        path.unlink()
        checksum_path(path).unlink()
    res = verify(work / "results")
    assert res.returncode == 1 and all(f"{p}: missing" in res.stderr for p in gone)
    cmd = [SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(work), "--configfile", str(TINY),
           "--cores", "2"]
    run = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    incomplete = work / ".snakemake" / "incomplete"
    for _ in range(1200):  # until a job is under way (its output marked incomplete)
        if incomplete.is_dir() and any(incomplete.iterdir()):
            break
        time.sleep(0.05)
    run.send_signal(signal.SIGKILL)
    run.wait()
    refused = snakemake(work, TINY, "--cores", "2", check=False)
    assert refused.returncode != 0 and "cannot be locked" in refused.stdout + refused.stderr
    # the killed run's jobs outlive it: make run's resume waits for them, then unlocks
    assert resume_main([str(work)], poll=0.05) == 0
    assert not runs_in(work) and stale_lock(work)[0] is True
    snakemake(work, TINY, "--unlock")
    res = snakemake(work, TINY, "--cores", "2")
    assert re.search(r"\d+ of \d+ steps \(100%\) done", res.stdout + res.stderr)
    assert all(p.is_file() for p in gone)
    assert verify(work / "results").returncode == 0
    assert tables(work) == tables(tiny_run)

