"""The benchmarks cannot rot: every config a benchmark builds passes the checks a
run applies, and every script has the ``--quick`` mode ``make bench-smoke`` (in CI) runs it
with. The smoke run itself runs each script end to end; these catch the config and API changes
that break one within the fast suite."""

from __future__ import annotations

import copy
import importlib.util
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from conftest import ROOT, SCHEMA

from specsim.config import load_grid

BENCHMARKS = ROOT / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py")
                 if 'if __name__ == "__main__":' in p.read_text())


def module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def grid_points(config: dict[str, Any]) -> int:
    return len(load_grid(copy.deepcopy(config), SCHEMA).points)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_benchmark_script_has_a_quick_mode(script: Path) -> None:
    assert re.search(r"""["']--quick["']""", script.read_text()), (
        f"{script.name}: make bench-smoke runs it with --quick (tiny sizes, no timing claims)")


def test_bench_dag_scale_config_is_accepted() -> None:
    """The dry run's grid: models x alpha x gamma x temperature points (10^5 by default)."""
    scale = module("bench_dag").scale_config
    assert grid_points(scale(2, 3, 4, 5)) == 2 * 3 * 4 * 5
    assert scale()["max_points"] == 10**5


def test_bench_dag_reads_job_times_from_a_snakemake_log(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text("[Sat Dec  5 11:52:09 2026]\nlocalrule grid:\n    jobid: 1\n"
                   "[Sat Dec  5 11:52:10 2026]\nrule point:\n    jobid: 2\n"
                   "    wildcards: point=a/b\n[Sat Dec  5 11:52:26 2026]\n"
                   "Finished jobid: 1 (Rule: grid)\n"
                   "[Sat Dec  5 11:53:00 2026]\nFinished jobid: 2 (Rule: point)\n")
    assert module("bench_dag").job_times(log) == {"grid": 17.0, "point point=a/b": 50.0}


@pytest.mark.parametrize("quick", [False, True])
def test_point_memory_cases_are_accepted(quick: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    mod = module("point_memory")
    cases = {k: copy.deepcopy(v) for k, v in mod.CASES.items()}
    monkeypatch.setattr(mod, "CASES", cases)
    if quick:  # what main(["--quick"]) does to the cases, without running them
        monkeypatch.setattr(mod, "run", lambda config: [])
        mod.main(["--quick"])
    for name, config in cases.items():
        assert grid_points(config) > 0, name


def test_scale_config_is_accepted() -> None:
    config = yaml.safe_load((BENCHMARKS / "scale_config.yaml").read_text())
    assert grid_points(config) == 10_000
