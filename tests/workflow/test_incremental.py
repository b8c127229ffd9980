"""Incremental sweeps: after a complete run, an edit reruns exactly the jobs whose own inputs it
changes, measured as a user would -- with ``snakemake -n`` and on disk."""

from __future__ import annotations

import copy
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from conftest import SCHEMA, TABLES_ONLY, TINY, only_the_check_runs, snakemake, tables

from specsim.config import load_grid
from specsim.models.maths import blend, random_table

pytestmark = pytest.mark.slow


def scheduled(workdir: Path, configfile: Path) -> dict[str, list[str]]:
    """Output files of every job a dry run schedules, by rule."""
    res = snakemake(workdir, configfile, "-n", "--cores", "1")
    jobs: dict[str, list[str]] = {}
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", res.stdout):
        m = re.match(r"(?:local)?rule (\w+):", block)
        out = re.search(r"^\s+output: (.*)$", block, re.M)
        if m and out:
            jobs.setdefault(m.group(1), []).extend(f.strip() for f in out.group(1).split(","))
    return jobs


def under(jobs: dict[str, list[str]], prefix: str) -> set[str]:
    return {f for files in jobs.values() for f in files if f.startswith(prefix)}


def save(cfg: dict[str, Any], path: Path) -> Path:
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def paths(cfg: dict[str, Any]) -> set[str]:
    return {p.path for p in load_grid(copy.deepcopy(cfg), SCHEMA).points}


def snapshot(workdir: Path) -> dict[str, tuple[bytes, int]]:
    return {str(f.relative_to(workdir)): (f.read_bytes(), f.stat().st_mtime_ns)
            for kind in ("sim", "exact") for f in (workdir / "results" / kind).rglob("*.parquet")}


@pytest.fixture
def copy_of_tiny(tiny_run: Path, tmp_path: Path) -> Path:
    work = tmp_path / "work"
    shutil.copytree(tiny_run, work, symlinks=True)
    return work


def test_a_finished_run_schedules_nothing(copy_of_tiny: Path) -> None:
    assert scheduled(copy_of_tiny, TINY) == {}


def test_adding_an_alpha_runs_only_the_new_points(copy_of_tiny: Path, tiny_config: dict[str, Any],
                                                 tmp_path: Path) -> None:
    cfg = copy.deepcopy(tiny_config)
    cfg["studies"]["accept_curve"]["alpha"].append(0.95)
    edited = save(cfg, tmp_path / "edited.yaml")
    new = paths(cfg) - paths(tiny_config)
    assert len(new) == 2  # calibrated x alpha 0.95 x gamma {1, 4}
    jobs = scheduled(copy_of_tiny, edited)
    assert under(jobs, "results/sim/") == {f"results/sim/{p}.parquet" for p in new}
    assert under(jobs, "results/exact/") == {f"results/exact/{p}.parquet" for p in new}
    before = snapshot(copy_of_tiny)
    snakemake(copy_of_tiny, edited, "--cores", "2", TABLES_ONLY)  # every point file, the tables
    after = snapshot(copy_of_tiny)
    assert {k: after[k] for k in before} == before  # same bytes, same mtime
    assert len(after) == len(before) + 2 * len(new)
    clean = tmp_path / "clean"
    snakemake(clean, edited, "--cores", "2", TABLES_ONLY)
    assert tables(copy_of_tiny) == tables(clean)


def test_aggregation_keys_rerun_only_aggregation(copy_of_tiny: Path,
                                                 tiny_config: dict[str, Any],
                                                 tmp_path: Path) -> None:
    for key, edit in [("c", lambda c: c["studies"]["optimal_k"].update(c=[0.1, 0.3])),
                      ("significance", lambda c: c.update(significance=0.01)),
                      ("latency", lambda c: c.update(latency=[[0.02, 0.001]]))]:
        cfg = copy.deepcopy(tiny_config)
        edit(cfg)
        jobs = scheduled(copy_of_tiny, save(cfg, tmp_path / f"{key}.yaml"))
        assert "point" not in jobs, key
        assert not under(jobs, "results/sim/") and not under(jobs, "results/exact/"), key
        assert "collect" in jobs and "tables" in jobs, key


def test_budget_chains_reruns_every_long_run_point(copy_of_tiny: Path,
                                                   tiny_config: dict[str, Any],
                                                   tmp_path: Path) -> None:
    cfg = copy.deepcopy(tiny_config)
    cfg["budget"]["chains"] = 256
    jobs = scheduled(copy_of_tiny, save(cfg, tmp_path / "chains.yaml"))
    # schemes points run a long run too (and their lossless check): they read chains as well
    long_run = {p for p in paths(cfg) if p.endswith(("measure~long_run", "measure~scheme"))}
    assert under(jobs, "results/sim/") == {f"results/sim/{p}.parquet" for p in long_run}
    cfg = copy.deepcopy(tiny_config)
    cfg["budget"]["equivalence_trials"] = 30000
    jobs = scheduled(copy_of_tiny, save(cfg, tmp_path / "trials.yaml"))
    equivalence = {p for p in paths(cfg) if p.endswith("measure~equivalence")}
    assert under(jobs, "results/sim/") == {f"results/sim/{p}.parquet" for p in equivalence}
    cfg = copy.deepcopy(tiny_config)
    cfg["budget"]["scheme_trials"] = 30000
    jobs = scheduled(copy_of_tiny, save(cfg, tmp_path / "scheme_trials.yaml"))
    schemes = {p for p in paths(cfg) if p.endswith("measure~scheme")}
    assert schemes and under(jobs, "results/sim/") == {f"results/sim/{p}.parquet"
                                                       for p in schemes}
    cfg = copy.deepcopy(tiny_config)
    cfg["seed"] = 9
    jobs = scheduled(copy_of_tiny, save(cfg, tmp_path / "seed.yaml"))
    assert len(under(jobs, "results/sim/")) == len(paths(cfg))


def test_editing_a_table_file_reruns_only_its_model(tiny_config: dict[str, Any],
                                                    tmp_path: Path) -> None:
    work = tmp_path / "custom"
    (work / "t").mkdir(parents=True)
    target = random_table(1, 2.5)
    np.save(work / "t" / "target.npy", target)
    np.save(work / "t" / "draft.npy", blend(target, random_table(2, 2.5), 0.8))
    np.save(work / "t" / "draft2.npy", blend(target, random_table(2, 2.5), 0.6))
    cfg = copy.deepcopy(tiny_config)
    for name, draft in (("mine", "t/draft.npy"), ("other", "t/draft2.npy")):
        cfg["models"][name] = {"family": "custom", "vocab": 6, "target_file": "t/target.npy",
                               "draft": {"kind": "file", "file": draft}}
    cfg["studies"] = {"accept_curve": {"analysis": "accept_curve", "models": ["mine", "other"],
                                       "gamma": [1, 2, 3]}}
    config = save(cfg, tmp_path / "custom.yaml")
    snakemake(work, config, "--cores", "2", TABLES_ONLY)
    np.save(work / "t" / "draft.npy", blend(target, random_table(2, 2.5), 0.7))
    touched = work / "t" / "draft2.npy"  # a new mtime, the same bytes: no rerun
    touched.write_bytes(touched.read_bytes())
    jobs = scheduled(work, config)
    sims = under(jobs, "results/sim/")
    assert len(sims) == 3 and all("model~mine/" in f for f in sims)


def test_a_config_edit_under_mtime_triggers_is_refused(copy_of_tiny: Path,
                                                       tiny_config: dict[str, Any],
                                                       tmp_path: Path) -> None:
    """`--rerun-triggers mtime` would rerun nothing after a seed change and keep the old
    tables with exit status 0; specsim stops instead, naming the file and the fix."""
    cfg = copy.deepcopy(tiny_config)
    cfg["seed"] = 9
    res = snakemake(copy_of_tiny, save(cfg, tmp_path / "seed.yaml"), "-n", "--rerun-triggers",
                    "mtime", check=False)
    assert res.returncode != 0
    assert "results/grid.json was built from another config" in res.stdout + res.stderr
    res = snakemake(copy_of_tiny, TINY, "-n", "--rerun-triggers", "mtime")
    assert only_the_check_runs(res.stdout + res.stderr)
