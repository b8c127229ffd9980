"""The whole DAG on the tiny config, in a temporary directory, as a user would run it."""

from __future__ import annotations

import shutil
from pathlib import Path

import mc
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import TINY, only_the_check_runs, snakemake

CONTRACT = {
    "equivalence": ["model", "alpha", "gamma", "temperature", "rule", "tv_exact", "tv_mc",
                    "tv_floor", "p_value", "verdict"],
    "accept_curve": ["model", "alpha", "gamma", "temperature", "accept_rate", "tokens_per_round",
                     "tokens_ci_low", "tokens_ci_high", "tokens_exact", "tokens_closed_form",
                     "alpha_fit"],
    "optimal_k": ["model", "alpha", "temperature", "c", "gamma_opt", "speedup_opt",
                  "gamma_opt_exact"],
    "break_even": ["model", "alpha", "gamma", "temperature", "c_star", "c_star_exact"],
    "intensity": ["shape", "tokens_in_pass", "macs", "bytes", "macs_per_byte"],
    "checks": ["check", "passed", "observed", "expected"],
}


def test_tables_follow_the_contract(tiny_run: Path) -> None:
    for name, cols in CONTRACT.items():
        df = pd.read_csv(tiny_run / "results" / "tables" / f"{name}.csv")
        assert len(df) > 0, name
        missing = set(cols) - set(df.columns)
        assert not missing, f"{name}.csv lacks {missing}"
        assert (tiny_run / "results" / "tables" / f"{name}.md").stat().st_size > 0


def test_correct_rule_lossless_and_broken_rules_biased(tiny_run: Path) -> None:
    eq = pd.read_csv(tiny_run / "results" / "tables" / "equivalence.csv")
    correct = eq[eq["rule"] == "correct"]
    assert (correct["verdict"] == "lossless").all()
    assert (correct["tv_exact"] < 1e-12).all()
    broken = eq[(eq["rule"] != "correct") & (eq["power"] > 0.99)]
    assert len(broken) >= 4
    assert (broken["verdict"] == "biased").all()
    # the seed program's printed TVs (60k rounds, good draft) sit within sampling error of
    # the exact values: greedy 0.2735, no_resample 0.0349, keep-drafts 0.0333 at gamma = 4.
    assert ((eq["tv_mc"] - eq["tv_exact"]).abs() <= eq["tv_floor"] * 6 + 1e-3).all()


def test_simulation_agrees_with_exact_and_closed_form(tiny_run: Path) -> None:
    ac = pd.read_csv(tiny_run / "results" / "tables" / "accept_curve.csv")
    assert ((ac["tokens_per_round"] >= 1) & (ac["tokens_per_round"] <= ac["gamma"] + 1)).all()
    assert (ac["max_tokens_observed"] <= ac["gamma"] + 1).all()
    cal = ac[ac["alpha"].notna()]
    assert ((cal["tokens_exact"] - cal["tokens_closed_form"]).abs() < 1e-9).all()
    # the batch SE and the quadrature's (iid family), at mc.FAIL_PROB over the rows: a bias of
    # ~2.4 SE beyond mc.bound (5.5-6 SE here) fails 99% of the time
    se = np.hypot(ac["tokens_se"], ac["tokens_exact_se"])
    for (_, r), s in zip(ac.iterrows(), se, strict=True):
        mc.assert_close(r["tokens_per_round"], s, r["tokens_exact"], dof=int(r["batches"]) - 1,
                        assertions=len(ac), what=f"{r['model']} gamma={r['gamma']}")


def test_checks_pass_and_gate_written(tiny_run: Path) -> None:
    checks = pd.read_csv(tiny_run / "results" / "tables" / "checks.csv")
    assert checks["passed"].all(), checks[~checks["passed"]].to_string()
    assert (tiny_run / "results" / "checks.ok").exists()


def _knob(text: str) -> float | str:
    """A knob value as a path spells it: a number, or a tree shape such as ``2x1``."""
    return text if "x" in text else float(text)


def test_one_file_per_point_named_by_its_parameters(tiny_run: Path) -> None:
    import json

    grid = json.loads((tiny_run / "results" / "grid.json").read_text())
    for kind in ("sim", "exact"):
        files = sorted((tiny_run / "results" / kind).rglob("*.parquet"))
        assert len(files) == len(grid["points"])
        for point in grid["points"]:
            path = tiny_run / "results" / kind / f"{point['path']}.parquet"
            # the path reads as the point's parameters, Paramspace style
            parts = dict(part.split("~", 1) for part in point["path"].split("/"))
            # a rule or policy with knobs spells them: rule~multi_draft+drafts=2
            rule, *rule_knobs = parts["rule"].split("+")
            policy, *policy_knobs = parts["policy"].split("+")
            assert parts["model"] == point["model"] and rule == point["rule"]
            assert policy == point["policy"]
            assert {k: _knob(v) for k, v in (kv.split("=") for kv in rule_knobs)} == \
                json.loads(point["rule_knobs"])
            assert {k: _knob(v) for k, v in (kv.split("=") for kv in policy_knobs)} == \
                json.loads(point["policy_knobs"])
            assert int(parts["gamma"]) == point["gamma"]
            assert parts["measure"] == point["measure"]
            assert parts["alpha"] == ("none" if point["alpha"] is None else repr(point["alpha"]))
            meta = pq.read_schema(path).metadata
            tag = f"scheme_{kind}" if point["measure"] == "scheme" else kind
            assert meta[b"specsim.schema"] == f"{tag}/1".encode()
            assert len(meta[b"specsim.point_digest"]) == 16
            assert len(meta[b"specsim.payload_sha256"]) == 64
            assert b"numpy" in meta[b"specsim.versions"]
    logs = sorted((tiny_run / "logs" / "point").rglob("*.log"))
    assert len(logs) == len(grid["points"])
    assert all(log.read_text().splitlines()[-1].startswith("done: ") for log in logs)


def test_one_point_builds_alone(tmp_path: Path) -> None:
    """A user reads a point's parameters off its path and asks for just that file."""
    target = ("results/sim/model~calibrated/draft~none/alpha~0.9/gamma~4/temperature~1.0/"
              "rule~correct/policy~fixed/measure~long_run.parquet")
    res = snakemake(tmp_path, TINY, "--cores", "1", target)
    assert (tmp_path / target).is_file()
    assert (tmp_path / target.replace("results/sim/", "results/exact/")).is_file()
    assert "1 of 1 steps" in res.stderr
    res = snakemake(tmp_path, TINY, "--cores", "1", target.replace("alpha~0.9", "alpha~0.33"),
                    check=False)
    assert res.returncode != 0 and "not a point of this config's grid" in res.stderr


def test_figures_exist(tiny_run: Path) -> None:
    figs = list((tiny_run / "results" / "figures").glob("*.png"))
    assert figs
    for png in figs:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert png.with_suffix(".pdf").read_bytes()[:5] == b"%PDF-"


def test_rerun_is_a_no_op(tiny_run: Path) -> None:
    """Nothing is rebuilt: the one job is `all`, which verifies every file (it has no output,
    so it runs on every run)."""
    result = snakemake(tiny_run, TINY, "-n", "--cores", "1")
    assert result.returncode == 0
    assert only_the_check_runs(result.stdout + result.stderr)


def test_report_builds(tiny_run: Path, tmp_path: Path) -> None:
    work = tmp_path / "tiny"  # a copy: other workers' tests read and copy the shared run
    shutil.copytree(tiny_run, work, symlinks=True)
    result = snakemake(work, TINY, "--report", "results/report.html", check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    html = (work / "results" / "report.html").read_text(errors="replace")
    assert "equivalence" in html and "accept_curve" in html


@pytest.mark.parametrize("point", [
    "model~calibrated/draft~none/alpha~0.33/gamma~4/temperature~1.0/rule~correct/policy~fixed/"
    "measure~long_run",
    "model~../draft~none/alpha~0.9/gamma~4/temperature~1.0/rule~correct/policy~fixed/"
    "measure~long_run"])
def test_a_bad_target_is_one_line_naming_it(tmp_path: Path, point: str) -> None:
    """No study listing (that belongs to the whole run's DAG), no traceback: one line."""
    res = snakemake(tmp_path, TINY, "-n", f"results/sim/{point}.parquet", check=False)
    ours = [ln for ln in res.stderr.splitlines() if ln.startswith(("target error", "specsim"))]
    assert res.returncode != 0 and len(ours) == 1, res.stderr[-2000:]
    assert ours[0].startswith(f"target error: {point}: not a point of this config's grid")
    assert "Traceback" not in res.stderr
