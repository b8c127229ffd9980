"""After ``kill -9`` of Snakemake alone, its jobs run on: ``python -m specsim.resume`` (``make
run``'s first step) names each (pid, the files it writes), waits for them counting down with
the one command that stops them, and unlocks once they are gone -- or, past its wait, prints
that command and exits 2 (make stops). The end-to-end case (a real DAG, kill -9 of the
Snakemake process only, results equal to an uninterrupted run's) is
tests/workflow/test_damage_runs.py::test_deleted_point_files_are_rebuilt_through_a_kill_9_and_the_readme_resume."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from specsim.resume import STILL_RUNNING, main, outputs_of, runs_in


def _locked(where: Path) -> None:
    locks = where / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.output.lock").write_text("results/x\n")


def _orphan(where: Path, seconds: float) -> subprocess.Popen[bytes]:
    """A point job of a killed run: a process named specsim writing a point file, in ``where``."""
    job = subprocess.Popen(["bash", "-c", f"exec -a specsim {sys.executable} -c "
                            f"'import time; time.sleep({seconds})' point --job '{{}}' --sim "
                            f"results/sim/a.parquet --exact results/exact/a.parquet"], cwd=where)
    for _ in range(100):
        if runs_in(where):
            break
        time.sleep(0.05)
    return job


def test_the_jobs_a_killed_run_left_are_named_and_waited_for(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _locked(tmp_path)
    job = _orphan(tmp_path, 1.5)
    try:
        assert outputs_of(job.pid) == ["results/sim/a.parquet", "results/exact/a.parquet"]
        assert main([str(tmp_path)], poll=0.05) == 0  # waited, then the lock is stale
        assert job.poll() is not None
    finally:
        job.kill()
        job.wait()
    err = capsys.readouterr().err
    first = err.splitlines()[0]
    assert (f"pid {job.pid} writing results/sim/a.parquet, results/exact/a.parquet" in first
            and " s left " in first and f"kill {job.pid}" in first), err
    assert "jobs have finished" in err and "unlocking" in err.splitlines()[-1]


def test_jobs_that_outlive_the_wait_are_named_with_the_command_that_stops_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _locked(tmp_path)
    monkeypatch.setenv("SPECSIM_RESUME_WAIT", "0.3")
    job = _orphan(tmp_path, 30)
    try:
        assert main([str(tmp_path)], poll=0.05) == STILL_RUNNING == 2
        assert job.poll() is None  # never stopped by the resume itself
    finally:
        job.kill()
        job.wait()
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"stop them with: kill {job.pid}" in last and "results/sim/a.parquet" in last
    assert (tmp_path / ".snakemake" / "locks" / "0.output.lock").exists()  # not unlocked
