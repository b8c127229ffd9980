"""The `specsim` command: every step the README and the docs name, help for every option,
one-line usage errors (exit status 2, never a traceback) for every bad argument, and a one-line
summary at the end of every step's log. In-process, through ``specsim.cli.main``."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd  # imported before `point` runs in-process: its job hides pandas
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_tools import mini_config, run
from conftest import ROOT, SCHEMA

from specsim import cli
from specsim.config import load_grid, write_grid_file
from specsim.grid import digest
from specsim.io import write_json_verified, write_table
from specsim.job import describe, to_arg
from specsim.outputs import FIGURE_NEEDS, TABLE_NEEDS

STEPS = ["point", "collect", "tables", "figures", "checks", "gate", "html", "verify"]


def usage_error(argv: list[str], capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    """``argv`` must stop with exit status 2 and one line on stderr naming the problem."""
    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    assert stop.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err
    step = argv[0] if argv and argv[0] in STEPS else None
    assert err.startswith(f"specsim {step}: error: " if step else "specsim: error: "), err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


# --- a grid file and a finished mini pipeline, all in-process ----------------------------------


@pytest.fixture
def grid_file(tmp_path: Path, tiny_config: dict[str, Any]) -> Path:
    grid = load_grid(mini_config(tiny_config), SCHEMA)
    path = tmp_path / "results" / "grid.json"
    write_grid_file(path, grid)
    return path


@pytest.fixture
def pipeline(grid_file: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """Each step of the DAG on the mini grid: its exit status and the last line of its log."""
    from specsim.grid import Grid

    res = grid_file.parent
    grid = Grid.from_json(json.loads(grid_file.read_text()))
    last: dict[str, tuple[int, str]] = {}
    for p in grid.points:
        code, _, err = run(["point", "--job", to_arg(describe(grid, p)),
                            "--sim", f"{res}/sim/{p.path}.parquet",
                            "--exact", f"{res}/exact/{p.path}.parquet"], capsys)
        last["point"] = (code, err.splitlines()[-1])
    g = str(grid_file)
    tables = [n for n, need in TABLE_NEEDS.items() if need in (None, "accept_curve")]
    figures = ["accept_curve", "roofline"]
    for step, argv in [
        ("collect", ["--grid", g, "--results-dir", str(res), "--out", f"{res}/points.parquet"]),
        ("tables", ["--grid", g, "--points", f"{res}/points.parquet",
                    "--out-dir", f"{res}/tables", *tables]),
        ("figures", ["--grid", g, "--tables-dir", f"{res}/tables",
                     "--out-dir", f"{res}/figures", *figures]),
        ("checks", ["--grid", g, "--tables-dir", f"{res}/tables",
                    "--out", f"{res}/tables/checks.csv"]),
        ("gate", ["--checks", f"{res}/tables/checks.csv", "--out", f"{res}/checks.ok"]),
    ]:
        code, _, err = run([step, *argv], capsys)
        last[step] = (code, err.splitlines()[-1] if err else "")
    return {"res": res, "grid": grid, "last": last, "tables": tables, "figures": figures}


# --- help --------------------------------------------------------------------------------------
def test_help_lists_every_step(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["--help"], capsys)
    assert code == 0 and err == ""
    for step in STEPS:
        assert f"\n  {step} " in out or f"\n    {step} " in out, step
    # the names the pipeline (docs/explanation/analyses.md) uses for the point step's two halves
    assert "simulate" in out and "exact" in out
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = page.read_text()
        for step in STEPS:
            if f"specsim {step}" in text:
                assert step in out, (page, step)


@pytest.mark.parametrize("step", STEPS)
def test_every_option_has_help(step: str, capsys: pytest.CaptureFixture[str]) -> None:
    _, steps = cli.build_parser()
    sub = steps[step]
    assert sub.description
    actions = [a for a in sub._actions if not isinstance(a, argparse._HelpAction)]
    assert actions
    for action in actions:
        assert action.help and len(action.help) > 10, (step, action.dest)
    code, out, _ = run([step, "--help"], capsys)
    assert code == 0 and f"usage: specsim {step}" in out


# --- usage errors: one line, exit 2 ------------------------------------------------------------
def test_no_step_or_an_unknown_step(capsys: pytest.CaptureFixture[str]) -> None:
    usage_error([], capsys, "required")
    usage_error(["simulate"], capsys, "invalid choice: 'simulate'", "point")
    usage_error(["--verbose"], capsys)


def test_point_bad_arguments(tmp_path: Path, grid_file: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    out = ["--sim", str(tmp_path / "s.parquet"), "--exact", str(tmp_path / "e.parquet")]
    usage_error(["point", *out], capsys, "required: --job")
    usage_error(["point", "--job", "{not json", *out], capsys, "--job", "not JSON")
    usage_error(["point", "--job", "[1, 2]", *out], capsys, "--job", "not a point job")
    usage_error(["point", "--job", "{}", *out], capsys, "--job", "not a point job")
    from specsim.grid import Grid

    grid = Grid.from_json(json.loads(grid_file.read_text()))
    desc = describe(grid, grid.points[0])
    usage_error(["point", "--job", to_arg({**desc, "digest": "0" * 16}), *out], capsys,
                "--job", "identity changed")
    usage_error(["point", "--job", to_arg(desc)], capsys, "required: --sim, --exact")
    assert not list(tmp_path.glob("*.parquet"))


def test_collect_bad_arguments(tmp_path: Path, grid_file: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    out = ["--out", str(tmp_path / "p.parquet")]
    res = ["--results-dir", str(grid_file.parent)]
    usage_error(["collect", "--grid", str(tmp_path / "nope.json"), *res, *out], capsys,
                "--grid", "no such file", "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{truncated")
    usage_error(["collect", "--grid", str(bad), *res, *out], capsys, "--grid", "not JSON")
    bad.write_text('{"points": []}')  # JSON, but not written by specsim: no checksum
    usage_error(["collect", "--grid", str(bad), *res, *out], capsys, "--grid",
                "no checksum member")
    config = {"models": 3}
    write_json_verified(bad, {"config": config, "config_digest": digest(config)[:16]})
    usage_error(["collect", "--grid", str(bad), *res, *out], capsys, "--grid",
                "not hold a valid grid")
    usage_error(["collect", "--grid", str(grid_file), "--results-dir", str(tmp_path / "no"),
                 *out], capsys, "--results-dir", "no such directory")
    usage_error(["collect", "--grid", str(grid_file), *res, *out], capsys,
                "point files missing", "run the point jobs first")
    usage_error(["collect", "--grid", str(grid_file), *res], capsys, "required: --out")


def test_tables_bad_arguments(tmp_path: Path, grid_file: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    points = tmp_path / "points.parquet"
    pq.write_table(pa.table({"point_id": ["x"]}), points)
    args = ["--grid", str(grid_file), "--points", str(points), "--out-dir", str(tmp_path / "t")]
    usage_error(["tables", *args, "no_such_table"], capsys, "unknown table 'no_such_table'",
                "accept_curve")
    usage_error(["tables", *args, "checks"], capsys, "unknown table 'checks'")
    usage_error(["tables", *args, "equivalence"], capsys, "table 'equivalence' needs a study "
                "with analysis 'equivalence'")
    usage_error(["tables", *args], capsys, "required: NAME")
    args[3] = str(grid_file)  # --points: not Parquet
    usage_error(["tables", *args, "roofline"], capsys, "--points", "not a Parquet file")
    args[3] = str(tmp_path / "missing.parquet")
    usage_error(["tables", *args, "roofline"], capsys, "--points", "no such file")
    assert not (tmp_path / "t").exists()


def test_figures_bad_arguments(tmp_path: Path, grid_file: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--grid", str(grid_file), "--tables-dir", str(tmp_path), "--out-dir",
            str(tmp_path / "f")]
    usage_error(["figures", *args, "no_such_figure"], capsys, "unknown figure", "roofline")
    usage_error(["figures", *args, "temperature"], capsys,
                "figure 'temperature' needs a study with analysis 'temperature'")
    usage_error(["figures", *args, "accept_curve"], capsys, "no such file",
                "accept_curve.csv", "specsim tables")
    args[3] = str(tmp_path / "none")
    usage_error(["figures", *args, "roofline"], capsys, "--tables-dir", "no such directory")


def test_checks_gate_html_bad_arguments(tmp_path: Path, grid_file: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    usage_error(["checks", "--grid", str(grid_file), "--tables-dir", str(tmp_path / "none"),
                 "--out", str(tmp_path / "c.csv")], capsys, "--tables-dir", "no such directory")
    usage_error(["checks", "--grid", str(tmp_path), "--tables-dir", str(tmp_path),
                 "--out", str(tmp_path / "c.csv")], capsys, "--grid", "no such file")
    usage_error(["gate", "--checks", str(tmp_path / "c.csv"), "--out", str(tmp_path / "ok")],
                capsys, "--checks", "no such file")
    not_checks = tmp_path / "other.csv"
    not_checks.write_text("a,b\n1,2\n")  # no checksum: refused before it is parsed
    usage_error(["gate", "--checks", str(not_checks), "--out", str(tmp_path / "ok")], capsys,
                "--checks", "other.csv.sha256 is missing")
    write_table(pd.DataFrame({"a": [1], "b": [2]}), not_checks)
    usage_error(["gate", "--checks", str(not_checks), "--out", str(tmp_path / "ok")], capsys,
                "--checks", "not a checks table", "passed")
    usage_error(["gate", "--checks", str(grid_file), "--out", str(tmp_path / "ok")], capsys,
                "--checks", str(grid_file), "not a readable table")
    usage_error(["html", "--tables-dir", str(tmp_path), "no_such_table"], capsys,
                "unknown table 'no_such_table'")
    usage_error(["html", "--tables-dir", str(tmp_path), "realtext_models"], capsys,
                "no such file", "realtext_models.csv")
    assert not (tmp_path / "ok").exists()


# --- the steps, and the line each ends its log with --------------------------------------------
def test_each_step_ends_its_log_with_one_summary_line(pipeline: dict[str, Any]) -> None:
    last, res, grid = pipeline["last"], pipeline["res"], pipeline["grid"]
    assert {step for step, (code, _) in last.items() if code != 0} == set()
    assert last["point"][1].startswith("done: long_run point")
    n = len(grid.points)
    assert last["collect"][1].startswith(f"done: collect, {n} grid points joined into ")
    assert last["tables"][1].startswith(f"done: tables, {len(pipeline['tables'])} tables ")
    assert last["figures"][1].startswith(f"done: figures, {len(pipeline['figures'])} figures ")
    checks = pd.read_csv(res / "tables" / "checks.csv")
    assert last["checks"][1].startswith(f"done: checks, {len(checks)} claims re-tested, "
                                        f"{len(checks)} passed, 0 failed")
    assert last["gate"][1].startswith(f"done: gate, all {len(checks)} checks passed")
    for step, (_, line) in last.items():
        assert line.endswith(" s"), (step, line)  # how long it took
    for name in [*pipeline["tables"], "checks"]:
        assert (res / "tables" / f"{name}.html").read_text().startswith("<!DOCTYPE html>")
    for name in pipeline["figures"]:
        assert (res / "figures" / f"{name}.png").is_file()
    assert set(FIGURE_NEEDS) >= set(pipeline["figures"])


def test_a_failed_check_fails_the_gate_with_a_summary(
        pipeline: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    res = pipeline["res"]
    checks = pd.read_csv(res / "tables" / "checks.csv")
    checks.loc[0, "passed"] = False
    bad = res / "tables" / "bad_checks.csv"
    write_table(checks, bad)  # with its checksum sidecar, as 'specsim checks' writes it
    code, _, err = run(["gate", "--checks", str(bad), "--out", str(res / "bad.ok")], capsys)
    assert code == 1 and not (res / "bad.ok").exists()
    lines = err.splitlines()
    assert lines[0].startswith(f"CHECK FAILED: {checks.loc[0, 'check']}")
    assert lines[-1].startswith(f"failed: gate, 1 of {len(checks)} checks failed")


def test_a_corrupt_point_file_is_one_line(pipeline: dict[str, Any],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    res, grid = pipeline["res"], pipeline["grid"]
    victim = res / "sim" / f"{grid.points[0].path}.parquet"
    victim.write_bytes(victim.read_bytes()[:100])
    code, _, err = run(["collect", "--grid", str(res / "grid.json"), "--results-dir", str(res),
                        "--out", str(res / "p2.parquet")], capsys)
    assert code == 1
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("specsim collect: error: ") and "not a readable point file" in err


def test_html_renders_a_table_written_elsewhere(pipeline: dict[str, Any],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    res = pipeline["res"]
    table = res / "tables" / "realtext_models.csv"
    pd.DataFrame({"order": [1, 5], "role": ["draft", "target"]}).to_csv(table, index=False)
    code, _, err = run(["html", "--tables-dir", str(res / "tables"), "realtext_models"], capsys)
    assert code == 1 and "realtext_models.csv.sha256 is missing" in err  # unverifiable: refused
    write_table(pd.DataFrame({"order": [1, 5], "role": ["draft", "target"]}), table)
    code, _, err = run(["html", "--tables-dir", str(res / "tables"), "realtext_models"], capsys)
    assert code == 0 and err.startswith("done: html, 1 tables rendered")
    page = (res / "tables" / "realtext_models.html").read_text()
    assert "<th title=\"n-gram order" in page and "target" in page


def test_a_point_job_does_not_load_pandas(tmp_path: Path, tiny_config: dict[str, Any]) -> None:
    """pyarrow's pandas shim would import pandas (~0.5-1 s) in every point job: one job per
    grid point makes that the largest start-up cost, so the point step hides pandas. Nor does
    it load yaml (a point job reads JSON), subprocess or scipy.optimize (only
    multi_draft_optimal's jobs solve LPs: the registry of schemes must not import it)."""
    import subprocess
    import sys

    grid = load_grid(mini_config(tiny_config), SCHEMA)
    job = to_arg(describe(grid, grid.points[0]))
    code = ("import sys; from specsim import cli; rc = cli.main(sys.argv[1:]); "
            "print(sorted({'pandas', 'yaml', 'subprocess', 'scipy.optimize'} "
            "& set(sys.modules))); sys.exit(rc)")
    res = subprocess.run([sys.executable, "-c", code, "point", "--job", job, "--sim",
                          str(tmp_path / "s.parquet"), "--exact", str(tmp_path / "e.parquet")],
                         capture_output=True, text=True, timeout=120, check=True)
    assert res.stdout.strip() == "[]"


def test_sigterm_while_writing_leaves_no_temporary_file(tmp_path: Path) -> None:
    # Snakemake (and SLURM) stop a job with SIGTERM: the step exits 143 through its finally
    # blocks, so the temporary file beside the output goes too (without the handler the process
    # dies at once, rc -15, and the .tmp file stays).
    code = (
        "import os, signal, sys, time\n"
        "from specsim.process import exit_on_sigterm\n"
        "from specsim.io import atomic_path\n"
        "exit_on_sigterm()\n"
        f"with atomic_path({str(tmp_path / 'out.parquet')!r}) as tmp:\n"
        "    tmp.write_text('half a file')\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(30)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=False)
    assert res.returncode == 143, res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []
