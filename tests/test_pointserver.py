"""``specsim-point`` and its warm worker (issue 11, item 4): a point job without the import cost.

What must hold: the worker changes nothing but the time -- the same output bytes, log lines and
exit status as ``specsim point`` in process, for a good job and a bad one; a job whose client is
killed is killed too (no late output files); the worker leaves nothing behind once idle; it
serves one installed copy of the package only; and without it (``SPECSIM_POINT_SERVER=0``, or
no worker to be had) the client runs the job itself.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import specsim_point
from specsim.config import load_grid
from specsim.job import describe, to_arg

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
LONG = ("long_run", "markov")  # a point whose run time the budget controls


def _jobs(budget: dict | None = None) -> dict[tuple[str, str], str]:
    cfg = yaml.safe_load((ROOT / "tests" / "data" / "tiny.yaml").read_text())
    cfg["budget"] |= budget or {"chains": 64, "rounds": 2, "burn_in": 1, "batches": 4,
                                "equivalence_trials": 500, "scheme_trials": 500,
                                "quadrature_pairs": 1000}
    grid = load_grid(cfg, SCHEMA)
    picks = {}
    for p in grid.points:  # one point of each measure and family
        picks.setdefault((p.measure, p.spec.family), p)
    return {key: to_arg(describe(grid, p)) for key, p in picks.items()}


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    return dict(os.environ, TMPDIR=str(tmp), SPECSIM_POINT_SERVER_IDLE="2", **extra)


def _run(job: str, out: Path, env: dict[str, str], worker: bool) -> subprocess.CompletedProcess:
    cmd = ([sys.executable, "-m", "specsim_point"] if worker
           else [sys.executable, "-m", "specsim.cli", "point"])
    return subprocess.run([*cmd, "--job", job, "--sim", str(out / "sim.parquet"), "--exact",
                           str(out / "exact.parquet")], env=env, capture_output=True, text=True,
                          cwd=out.parent, check=False)


def _sockets(tmp: Path) -> list[Path]:
    return sorted(tmp.glob("specsim-point-*"))


def test_the_worker_writes_what_an_in_process_job_writes(tmp_path: Path) -> None:
    env = _env(tmp_path)
    for i, job in enumerate(_jobs().values()):
        a, b = tmp_path / f"a{i}", tmp_path / f"b{i}"
        a.mkdir()
        b.mkdir()
        ra, rb = _run(job, a, env, worker=False), _run(job, b, env, worker=True)
        assert ra.returncode == rb.returncode == 0, (ra.stderr, rb.stderr)
        for name in ("sim.parquet", "exact.parquet"):
            # identity is the claim: worker and fresh process run the same code, same order
            assert (a / name).read_bytes() == (b / name).read_bytes(), (i, name)
        assert rb.stderr.splitlines()[-1].startswith("done: ")
        assert ra.stderr.splitlines()[0] == rb.stderr.splitlines()[0]  # "point <path> ..."


def test_a_bad_job_fails_the_same_way(tmp_path: Path) -> None:
    env = _env(tmp_path)
    out = tmp_path / "o"
    out.mkdir()
    ra, rb = _run("{}", out, env, worker=False), _run("{}", out, env, worker=True)
    assert ra.returncode == rb.returncode == 2
    assert ra.stderr == rb.stderr and "not a point job description" in rb.stderr
    assert not list(out.iterdir())


def test_without_the_worker_the_job_runs_in_process(tmp_path: Path) -> None:
    out = tmp_path / "o"
    out.mkdir()
    res = _run(_jobs()[LONG], out, _env(tmp_path, SPECSIM_POINT_SERVER="0"), worker=True)
    assert res.returncode == 0 and (out / "sim.parquet").is_file()
    assert not _sockets(tmp_path)  # no worker was started


def test_an_idle_worker_leaves_nothing_behind(tmp_path: Path) -> None:
    out = tmp_path / "o"
    out.mkdir()
    assert _run(_jobs()[LONG], out, _env(tmp_path), worker=True).returncode == 0
    assert _sockets(tmp_path)
    deadline = time.monotonic() + 20
    while _sockets(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _sockets(tmp_path)
    while _runners(tmp_path) and time.monotonic() < deadline:  # they exit when it hangs up
        time.sleep(0.2)
    assert not _runners(tmp_path)


def test_killing_the_client_kills_its_job(tmp_path: Path) -> None:
    env = _env(tmp_path)
    warm = tmp_path / "warm"
    warm.mkdir()
    assert _run(_jobs()[LONG], warm, env, worker=True).returncode == 0  # the worker is up
    slow = _jobs({"chains": 1 << 16, "rounds": 4000, "burn_in": 0, "batches": 4})[LONG]
    out = tmp_path / "o"
    out.mkdir()
    with subprocess.Popen([sys.executable, "-m", "specsim_point", "--job", slow, "--sim",
                           str(out / "sim.parquet"), "--exact", str(out / "exact.parquet")],
                          env=env, cwd=tmp_path, stderr=subprocess.DEVNULL) as client:
        time.sleep(1.5)
        assert client.poll() is None  # still running: the job takes far longer
        client.send_signal(signal.SIGTERM)
        client.wait(timeout=10)
    time.sleep(3)
    assert not list(out.iterdir())  # the job died with its client: no late output files
    # the jobs ran one after the other on one runner, and it was killed with the slow job
    assert not _runners(tmp_path)


def _runners(tmp: Path) -> list[str]:
    """Runner processes of workers whose socket lives under ``tmp``."""
    return subprocess.run(["pgrep", "-f", f"specsim.pointserver --runner [0-9]+ {tmp}"],
                          capture_output=True, text=True, check=False).stdout.split()


def test_a_runner_serves_many_jobs_and_each_is_as_if_alone(tmp_path: Path) -> None:
    """Jobs of every measure and family through one runner, twice in opposite orders: each
    job's files are byte-identical to an in-process run of it (nothing leaks between jobs)."""
    env = _env(tmp_path)
    jobs = list(_jobs().values())
    ref = []
    for i, job in enumerate(jobs):
        out = tmp_path / f"ref{i}"
        out.mkdir()
        assert _run(job, out, env, worker=False).returncode == 0
        ref.append({n: (out / n).read_bytes() for n in ("sim.parquet", "exact.parquet")})
    for order in (range(len(jobs)), reversed(range(len(jobs)))):
        for i in order:
            out = tmp_path / f"w{i}"
            out.mkdir(exist_ok=True)
            res = _run(jobs[i], out, env, worker=True)
            assert res.returncode == 0, res.stderr
            assert res.stderr.splitlines()[-1].startswith("done: ")
            for name, data in ref[i].items():
                assert (out / name).read_bytes() == data, (i, name)
    assert len(_runners(tmp_path)) == 1  # sequential clients share one warm runner


def test_a_changed_package_gets_its_own_worker(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "specsim"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "engine.py").write_text("x = 1\n")
    monkeypatch.setattr(specsim_point, "_package_dir", lambda: str(pkg))
    before = specsim_point.socket_path()
    (pkg / "engine.py").write_text("x = 22\n")  # an edit: size and mtime change
    assert specsim_point.socket_path() != before
    monkeypatch.chdir(tmp_path)  # another working directory
    assert specsim_point.socket_path() != before
