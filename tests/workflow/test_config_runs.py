"""Bad configs through Snakemake itself: a run that stops before any job (nothing written), a
bad config.yaml named before Snakemake loads it, a --configfile Snakemake loads refused by the
Snakefile, a target that is no grid point, and the dry run of a config that asks too much
(the unit side: tests/unit/config/)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from config_cases import BAD, BASE, HOSTILE, big_table
from conftest import ROOT, SCHEMA, SNAKEMAKE, TINY, snakemake

from specsim.config import load_grid


def _snakemake(workdir: Path, configfile: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("snakemake")
    return subprocess.run(
        [str(exe), "-s", str(ROOT / "Snakefile"), "-d", str(workdir), "--configfile",
         str(configfile), "-n", "--cores", "1"],
        capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("name", ["shell_model_name", "gamma_zero", "list_yaml"])
def test_snakemake_stops_before_any_job(tmp_path: Path, name: str) -> None:
    """Through the real CLI: non-zero exit, the message, and nothing written anywhere."""
    config = dict((b[0], b) for b in BAD)[name]
    cfg_file = tmp_path / "bad.yaml"
    cfg_file.write_text(yaml.safe_dump(config[1]))
    work = tmp_path / "work"
    work.mkdir()
    marker = tmp_path / "x"
    before = set(os.listdir(tmp_path))
    result = _snakemake(work, cfg_file)
    assert result.returncode != 0
    assert "config error" in result.stderr + result.stdout or name == "list_yaml"
    for fragment in config[2]:
        if name != "list_yaml":
            assert fragment in result.stderr + result.stdout
    assert not (work / "results").exists()
    assert not marker.exists()
    assert set(os.listdir(tmp_path)) == before


def test_a_tab_indented_json_config_runs_through_snakemake(tmp_path: Path) -> None:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(BASE, indent="\t"))
    res = snakemake(tmp_path / "work", path, "-n", "--cores", "1")
    assert "config error" not in res.stderr


def _snakemake_in(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("snakemake")
    return subprocess.run([str(exe), "-s", str(ROOT / "Snakefile"), "-d", str(workdir), *args],
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize("name", ["tag", "two_documents", "empty", "self_alias_map",
                                  "laughs_map"])
def test_a_bad_config_yaml_is_named_before_snakemake_loads_it(tmp_path: Path, name: str) -> None:
    """Without --configfile the Snakefile checks config.yaml first: Snakemake would say only
    "not valid JSON or YAML", or recurse or expand the aliases itself."""
    content, fragment = {h[0]: (h[1], h[2]) for h in HOSTILE}[name]
    (tmp_path / "config.yaml").write_bytes(content)
    res = _snakemake_in(tmp_path, "-n")
    assert res.returncode != 0
    assert "config error: config.yaml: " in res.stderr, res.stderr[-2000:]
    assert fragment in res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("name", ["self_alias_list", "laughs_list", "duplicate_key"])
def test_a_configfile_snakemake_loads_is_refused_by_the_snakefile(tmp_path: Path,
                                                                  name: str) -> None:
    content, fragment = {h[0]: (h[1], h[2]) for h in HOSTILE}[name]
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    res = _snakemake_in(tmp_path / "work", "--configfile", str(path), "-n")
    assert res.returncode != 0
    assert f"config error: {path}: {fragment}" in res.stderr, res.stderr[-2000:]
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("target", [
    "results/sim/model~calibrated/draft~none/alpha~0.7/gamma~4/temperature~1.0/rule~correct/"
    "policy~fixed/measure~long_run.parquet",
    "results/exact/model~nope/draft~none/alpha~none/gamma~1/temperature~1.0/rule~correct/"
    "policy~fixed/measure~long_run.parquet",
], ids=["sim_not_in_grid", "exact_unknown_model"])
def test_a_target_that_is_no_grid_point_is_one_line(tmp_path: Path, target: str) -> None:
    res = _snakemake_in(tmp_path, "--configfile", str(TINY), "-n", target)
    assert res.returncode != 0
    point = target.split("/", 2)[2].removesuffix(".parquet")
    assert f"target error: {point}: not a point of this config's grid" in res.stderr
    assert "InputFunctionException" not in res.stderr
    assert "Traceback" not in res.stderr


def test_configfile_replaces_config_yaml_and_the_run_says_so() -> None:
    """From the repo root, `--configfile tests/data/tiny.yaml` runs the tiny studies alone."""
    res = subprocess.run([SNAKEMAKE, "-n", "--configfile", "tests/data/tiny.yaml", "--quiet",
                          "rules"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         check=True)
    assert "(from tiny.yaml)" in res.stderr and "(from config.yaml)" not in res.stderr
    assert "accept_curve_stub" not in res.stderr  # a study only config.yaml defines
    grid = load_grid(yaml.safe_load((ROOT / "tests" / "data" / "tiny.yaml").read_text()), SCHEMA)
    assert f"{len(grid.points)} grid points" in res.stderr


@pytest.mark.slow
def test_the_dry_run_refuses_it_in_one_line(tmp_path: Any) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(big_table("heuristic", {"cap": [256]})))
    res = subprocess.run([SNAKEMAKE, "-n", "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path),
                          "--configfile", str(path)], capture_output=True, text=True,
                         check=False)
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("config error:")]
    assert len(lines) == 1 and "cap=256" in lines[0] and "Traceback" not in res.stderr

