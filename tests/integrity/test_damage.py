"""Nothing the DAG wrote can be damaged unnoticed: every file under results/ is sealed
by a sidecar and re-checked by ``specsim verify`` / ``make verify`` / the gate, which name each
damaged file and the command that rebuilds it; a deleted intermediate is rebuilt; a run killed
with ``kill -9`` resumes to identical tables."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, TINY
from damage_tools import flip

from specsim.cli import main
from specsim.integrity import damaged_files
from specsim.io import atomic_path, checksum_path, seal, write_table, write_text
from specsim.resume import main as resume_main
from specsim.resume import runs_in, stale_lock


# --- sidecars and the checker, on small files ---------------------------------------------------
@pytest.fixture
def results(tmp_path: Path) -> Path:
    base = tmp_path / "results"
    write_text(base / "figures" / "a.png", "PNG" * 100)
    with atomic_path(base / "sim" / "p.parquet") as tmp:
        tmp.write_bytes(bytes(range(256)))
    (base / "README.md").write_text("committed, not sealed\n")
    return base


def test_every_atomic_write_is_sealed(results: Path) -> None:
    for name in ("figures/a.png", "sim/p.parquet"):
        assert checksum_path(results / name).is_file()
    assert not checksum_path(checksum_path(results / "sim/p.parquet")).exists()
    assert damaged_files(results) == []


@pytest.mark.parametrize("at", [0.0, 0.3, 0.6, 0.99])
def test_a_flip_anywhere_in_a_file_or_its_sidecar_is_named(results: Path, at: float) -> None:
    for path in (results / "sim/p.parquet", checksum_path(results / "figures/a.png")):
        flip(path, at)
    found = {Path(d.path).name: d for d in damaged_files(results)}
    assert set(found) == {"p.parquet", "a.png"}
    assert found["a.png"].target == "results/figures/a.png"


def test_what_a_run_would_read_is_checked_alone_before_its_jobs(
        results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """verify_inputs: damage a job would read and no job rewrites; a missing file is not
    damage there (the run rebuilds it), a damaged file nobody reads is the final check's."""
    from specsim.integrity import verify_inputs

    write_text(results / "tables" / "t.csv", "a\n1\n")
    for path in (results / "sim/p.parquet", checksum_path(results / "figures/a.png"),
                 results / "tables/t.csv"):
        flip(path)
    reads = {"results/sim/p.parquet", "results/figures/a.png", "results/tables/gone.csv",
             "results/tables/t.csv"}
    only = damaged_files(results, only={"results/sim/p.parquet", "results/figures/a.png"})
    assert [d.target for d in only] == ["results/figures/a.png", "results/sim/p.parquet"]
    assert verify_inputs(str(results), reads, rebuilt={"results/tables/t.csv"}) == 1
    err = capsys.readouterr().err
    assert err.count("DAMAGED ") == 2 and "t.csv" not in err and "gone.csv" not in err
    assert "2 damaged file(s) that this run's jobs would read" in err
    assert verify_inputs(str(results), {"results/tables/gone.csv"}, set()) == 0


def test_a_file_no_job_writes_is_named_to_be_deleted_not_rebuilt(
        results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Snakemake refuses to --forcerun a file no rule writes: a stray (not in the manifest)
    gets the rm that deletes it, and the last line still rebuilds the rest."""
    from specsim.integrity import verify, write_manifest

    write_manifest(results / "manifest.txt", ["results/figures/a.png", "results/sim/p.parquet"])
    (results / "stray.txt").write_text("x")
    flip(results / "figures/a.png")
    assert verify(results) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert f"rm -- {results / 'stray.txt'}" in lines[-3]
    assert lines[-1].endswith(" --forcerun results/figures/a.png")
    (results / "figures/a.png").unlink()
    checksum_path(results / "figures/a.png").unlink()
    for path in (results / "manifest.txt", checksum_path(results / "manifest.txt")):
        path.unlink()  # the manifest unknown: every file is rebuilt
    assert verify(results) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(" --forcerun "
                                                                     "results/stray.txt")


def test_the_rebuild_command_is_the_runs_own(
        results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specsim.integrity import DEFAULT_SNAKEMAKE, RERUN_ENV, report, snakemake_command

    assert snakemake_command(ROOT / "Snakefile", ROOT, [], 8) == DEFAULT_SNAKEMAKE  # make run
    command = snakemake_command(ROOT / "Snakefile", tmp_path / "my run", [TINY], 2)
    snakemake_exe = str(Path(sys.executable).with_name("snakemake"))
    assert command == (f"{snakemake_exe} -s {ROOT / 'Snakefile'} -d '{tmp_path / 'my run'}' "
                       f"--configfile {TINY} --cores 2")
    flip(results / "sim/p.parquet")
    damage = damaged_files(results)
    assert report(damage).splitlines()[-1].startswith(f"{DEFAULT_SNAKEMAKE} --forcerun ")
    monkeypatch.setenv(RERUN_ENV, command)  # set by the workflow's main process for its jobs
    text = report(damage)
    assert text.splitlines()[-1] == f"{command} --forcerun results/sim/p.parquet"
    assert "from the directory holding results/" not in text


def test_missing_files_sidecars_and_strays_are_named(results: Path) -> None:
    (results / "figures/a.png").unlink()
    checksum_path(results / "sim/p.parquet").unlink()
    (results / "sim/stray.parquet").write_bytes(b"x")
    (results / "sim/.p.parquet.abc123.tmp").write_bytes(b"half")  # a killed write: skipped
    problems = {Path(d.path).name: d.problem for d in damaged_files(results)}
    assert problems.keys() == {"a.png", "p.parquet", "stray.parquet"}
    assert "missing" in problems["a.png"] and "sha256 is missing" in problems["p.parquet"]


def test_what_is_not_a_regular_file_is_named_never_opened(results: Path) -> None:
    os.mkfifo(results / "sim" / "fifo.parquet")  # opening it would block: a hang
    target = results / "figures" / "a.png"
    target.unlink()
    target.mkdir()  # a directory where a sealed file was
    (results / "figures" / "gone.png").symlink_to(results / "nowhere")
    side = checksum_path(results / "sim" / "p.parquet")
    side.unlink()
    os.mkfifo(side)
    problems = {Path(d.path).name: d.problem for d in damaged_files(results)}
    assert problems == {"fifo.parquet": "not a regular file", "gone.png": "not a regular file",
                        "a.png": "missing (its .sha256 sidecar is still there)",
                        "p.parquet": "p.parquet.sha256 is not a regular file"}


def test_symlinked_directories_are_walked_once(results: Path, tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    write_text(scratch / "x.parquet", "data")
    (results / "exact").symlink_to(scratch)  # results/exact on other storage: still checked
    (results / "sim" / "loop").symlink_to(results)  # a loop must end
    assert damaged_files(results) == []
    flip(scratch / "x.parquet")
    assert [Path(d.path).name for d in damaged_files(results)] == ["x.parquet"]


def test_the_report_is_checked_once_sealed(results: Path) -> None:
    report = results / "report.html"
    report.write_text("<html></html>")  # Snakemake's --report writes it, outside the DAG
    assert damaged_files(results) == []
    seal(report)  # make report
    flip(report)
    assert [Path(d.path).name for d in damaged_files(results)] == ["report.html"]


def test_the_gate_refuses_damaged_results(results: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    import pandas as pd

    checks = results / "tables" / "checks.csv"
    write_table(pd.DataFrame({"check": ["c"], "source": ["s"], "passed": [True],
                              "observed": ["1"], "expected": ["1"]}), checks)
    ok = results / "checks.ok"
    assert main(["gate", "--checks", str(checks), "--out", str(ok)]) == 0 and ok.is_file()
    flip(results / "figures/a.png")
    assert main(["gate", "--checks", str(checks), "--out", str(ok)]) == 1
    err = capsys.readouterr().err
    assert "DAMAGED" in err and "figures/a.png" in err and "--forcerun results/figures/a.png" in err
    assert not ok.exists()


# --- stale locks --------------------------------------------------------------------------------
def wait_until_running(where: Path) -> None:
    """Until a process started there shows up as working in ``where`` (at most ~5 s)."""
    for _ in range(100):
        if runs_in(where):
            return
        time.sleep(0.05)


# serial (make test runs it alone, after the parallel pass): it gives a run it started ~5 s to
# show up as working, which a neighbour worker loading the cores could stretch.
@pytest.mark.serial
def test_a_lock_is_stale_only_when_no_run_is_alive_there(tmp_path: Path) -> None:
    assert stale_lock(tmp_path)[0] is False  # no lock at all
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.output.lock").write_text("results/x\n")
    # a process named snakemake, working in the directory: a live run
    live = subprocess.Popen(["bash", "-c", "exec -a snakemake sleep 60"], cwd=tmp_path)
    try:
        wait_until_running(tmp_path)
        stale, why = stale_lock(tmp_path)
        assert not stale and f"pid {live.pid}" in why
        assert resume_main([str(tmp_path)]) == 1  # a live Snakemake is never waited for
    finally:
        live.kill()
        live.wait()
    assert stale_lock(tmp_path)[0] is True
    res = subprocess.run([sys.executable, "-m", "specsim.resume", str(tmp_path)],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0 and "killed run" in res.stderr
    # a job the killed run left (no Snakemake there) is waited for, then the lock is stale
    orphan = subprocess.Popen(["bash", "-c", "exec -a specsim sleep 1.5"], cwd=tmp_path)
    try:
        wait_until_running(tmp_path)
        assert resume_main([str(tmp_path)], poll=0.1) == 0
        assert orphan.poll() is not None  # it had finished
    finally:
        orphan.kill()
        orphan.wait()


# --- the tiny DAG ---------------------------------------------------------------------------------


def test_a_file_the_manifest_lists_is_missing_when_gone(results: Path) -> None:
    from specsim.integrity import write_manifest

    write_manifest(results / "manifest.txt", ["results/figures/a.png", "results/tables/t.csv"])
    assert [(d.target, d.problem) for d in damaged_files(results)] == [
        ("results/tables/t.csv", f"missing (listed in {results / 'manifest.txt'})")]


def test_make_run_unlocks_only_a_stale_lock_then_verifies() -> None:
    """Snakemake's own last job verifies (`rule all`), so make run does not repeat it."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    lines = subprocess.run(["make", "--no-print-directory", "-n", "run", "STAMP="], cwd=ROOT,
                           env=env, capture_output=True, text=True, check=True).stdout.splitlines()
    order = [next(i for i, ln in enumerate(lines) if word in ln)
             for word in ("-m specsim.resume .; then", "--unlock", "snakemake --cores")]
    assert order == sorted(order)
    assert not any("specsim verify" in ln for ln in lines)
    assert "specsim verify --results-dir results" in (ROOT / "Snakefile").read_text()
    assert re.search(r"if .*-m specsim\.resume \.; then .*snakemake --unlock; "
                     r"elif \[ \$\? -eq 2 \]; then exit 1; fi", lines[order[0]])
