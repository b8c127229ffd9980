"""Shared fixtures: repository paths, the tiny config, and one finished tiny DAG run."""

from __future__ import annotations

import copy
import fcntl
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from disk_tools import tmpfs
from hypothesis import settings

# `make test` replays the same property-test examples on every run and machine (derandomized,
# no example database): it fails only for what a commit changed. Exploring new examples is the
# opt-in `make test-explore` (profile "explore"); a counterexample it finds is pinned with
# @example, so the deterministic run keeps it.
settings.register_profile("deterministic", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", max_examples=500, print_blob=True)
settings.load_profile(os.environ.get("SPECSIM_HYPOTHESIS_PROFILE", "deterministic"))

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
TINY = ROOT / "tests" / "data" / "tiny.yaml"
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
# The target of a run whose test reads only the tables and the point files: every point, collect,
# tables and checks, but not the figures (about 7 CPU s on the tiny config), the manifest, the
# gate and the final check, which `all` adds (each a process start).
TABLES_ONLY = "results/tables/checks.csv"


@pytest.fixture
def tiny_config() -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(TINY.read_text()))


def snakemake(workdir: Path, configfile: Path, *args: str, check: bool = True,
              timeout: int = 900) -> subprocess.CompletedProcess[str]:
    """The workflow in ``workdir`` with ``configfile``, as a user would type it."""
    cmd = [SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(workdir), "--configfile",
           str(configfile), *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if check:
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    return res


def only_the_check_runs(output: str) -> bool:
    """Whether a dry run's job stats list `all` alone (every run verifies its results: nothing
    else is out of date)."""
    return bool(re.search(r"^all +1\n\s*total +1$", output, re.M))


def tables(workdir: Path) -> dict[str, bytes]:
    """Every results/tables/*.csv, by name, as bytes."""
    return {p.name: p.read_bytes() for p in sorted((workdir / "results" / "tables").glob("*.csv"))}


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str,
               build: Callable[[Path], object]) -> Path:
    """A directory ``build`` fills once per test run, shared by every pytest-xdist worker (the
    first to ask builds it under a lock in the run's common temporary directory, the others wait
    for it); tests that change it work on a copy."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:  # one process: its own directory
        work = tmp_path_factory.mktemp(name)
        build(work)
        return work
    common = tmp_path_factory.getbasetemp().parent  # the same for every worker of this run
    work, done = common / name, common / f"{name}.done"
    with (common / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            shutil.rmtree(work, ignore_errors=True)  # a worker that failed mid-way
            work.mkdir()
            build(work)
            done.touch()
    return work


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs (root only; skipped elsewhere), for the disk-full tests of both kinds."""
    with tmpfs(tmp_path, "64k") as disk:
        yield disk


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One complete run of the tiny config, built once (built_once)."""
    return built_once(tmp_path_factory, "tiny", lambda work: snakemake(work, TINY, "--cores", "2"))


# Tests whose module compares Monte Carlo with exact values through tests/mc.py (directly or
# through multi_draft_reference.py) carry the `stochastic` marker, found here from the source:
# no list to keep by hand. tests/portability.sh runs them at every numpy dispatch level.
_STOCHASTIC = ("import mc\n", "from mc import ", "from multi_draft_reference import ")
# The tests that start Snakemake live in tests/workflow/ and carry the `workflow` marker, set
# here by folder (`-m "not workflow"` runs no Snakemake); tests/architecture/test_kinds.py holds
# every other folder free of them.
TESTS = ROOT / "tests"
WORKFLOW_TESTS = TESTS / "workflow"


_RUN_FIRST = {"workflow": 0, "integrity": 1}  # the kinds whose tests run longest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    uses_mc: dict[Path, bool] = {}
    for item in items:
        path = Path(str(item.fspath))
        if path not in uses_mc:
            text = path.read_text(encoding="utf-8")
            uses_mc[path] = any(s in text for s in _STOCHASTIC)
        if uses_mc[path]:
            item.add_marker(pytest.mark.stochastic)
        if path.is_relative_to(WORKFLOW_TESTS):
            item.add_marker(pytest.mark.workflow)
    # The long tests first: `make test` hands out contiguous blocks (pytest-xdist's worksteal),
    # and a worker left idle takes half of another's queue from its end; with the Snakemake
    # runs at the front, what is left for the end is short unit tests, not a 30 s run on one
    # worker while the other waits.
    items.sort(key=lambda item: _RUN_FIRST.get(Path(str(item.fspath)).relative_to(
        TESTS).parts[0], len(_RUN_FIRST)))


class _NoSnakemake(subprocess.Popen):  # type: ignore[type-arg]
    """Popen that refuses to start Snakemake: what a test outside tests/workflow/ runs."""

    def __init__(self, args: Any, *rest: Any, **kwargs: Any) -> None:
        argv = [args] if isinstance(args, str | os.PathLike) else list(args)
        first = str(argv[0]).split()[0] if argv else ""
        if Path(first).name == "snakemake" or argv[1:3] == ["-m", "snakemake"]:
            raise AssertionError(f"this test starts Snakemake ({' '.join(map(str, argv))}): "
                                 f"it belongs in tests/workflow/")
        super().__init__(args, *rest, **kwargs)


@pytest.fixture(autouse=True)
def _snakemake_only_in_workflow_tests(request: pytest.FixtureRequest,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside tests/workflow/, starting Snakemake fails the test naming where it belongs."""
    if not Path(str(request.node.fspath)).is_relative_to(WORKFLOW_TESTS):
        monkeypatch.setattr(subprocess, "Popen", _NoSnakemake)
