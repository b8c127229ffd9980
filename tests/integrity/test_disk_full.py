"""A disk that fills: every specsim step and every run says so in one line, and loses nothing.

A write that runs out of space ends the step with one line naming the file and leaves neither
the file nor its temporary (each CLI step, and a real full tmpfs). A run starts only with room
for Snakemake's locks and logs and the reserve it holds for Snakemake's metadata
(:mod:`specsim.io.reserve`); a job that meets the full disk frees that reserve, so the run ends
as an ordinary failed run whose last line is the job's, and a rerun with room resumes it.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from cli_tools import mini_config, run
from conftest import SCHEMA
from damage_tools import checks_table
from disk_tools import fill, no_temporaries

from specsim.config import load_grid
from specsim.io import write_json_verified, write_table
from specsim.io.reserve import (
    ADVICE,
    NOTE,
    RESERVE,
    RESERVE_BYTES,
    RunGuard,
    disk_full_note,
    full_at_exit,
    hold_reserve,
    release_reserve,
    room_to_start,
)
from specsim.job import describe, to_arg


# ---------------------------------------------------------------- disk full
def disk_full_after(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """Make every Path.write_bytes/write_text write ``n`` bytes then fail with ENOSPC (as a
    full disk does: the write raises an OSError that names no file)."""
    real = Path.write_bytes

    def write_bytes(self: Path, data: bytes) -> int:
        real(self, bytes(data[:n]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def write_text(self: Path, text: str, *args: Any, **kw: Any) -> int:
        return write_bytes(self, text.encode())

    monkeypatch.setattr(Path, "write_bytes", write_bytes)
    monkeypatch.setattr(Path, "write_text", write_text)


def test_disk_full_in_each_cli_step_is_one_line_naming_the_file(
        tmp_path: Path, tiny_config: dict[str, Any], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from specsim.grid import Grid

    monkeypatch.chdir(tmp_path)
    grid = load_grid(mini_config(tiny_config), SCHEMA)
    write_json_verified("results/grid.json", grid.to_json())
    grid = Grid.from_json(json.loads(Path("results/grid.json").read_text()))
    point = ["point", "--job", to_arg(describe(grid, grid.points[0])),
             "--sim", "results/sim/p.parquet", "--exact", "results/exact/p.parquet"]
    for p in grid.points:
        assert run(["point", "--job", to_arg(describe(grid, p)),
                    "--sim", f"results/sim/{p.path}.parquet",
                    "--exact", f"results/exact/{p.path}.parquet"], capsys)[0] == 0
    g = ["--grid", "results/grid.json"]
    steps = [
        (point, "results/sim/p.parquet"),
        (["collect", *g, "--results-dir", "results", "--out", "results/points.parquet"],
         "results/points.parquet"),
        (["tables", *g, "--points", "results/points.parquet", "--out-dir", "results/tables",
          "accept_curve"], "results/tables/accept_curve.csv"),
        (["figures", *g, "--tables-dir", "results/tables", "--out-dir", "results/figures",
          "accept_curve"], "results/figures/accept_curve.pdf"),
        (["gate", "--checks", "results/tables/checks.csv", "--out", "results/checks.ok"],
         "results/checks.ok"),
    ]
    checks_table(Path("results/tables/checks.csv"))
    for argv, first_output in steps:
        hold_reserve()  # as the workflow's main process does before any job
        with monkeypatch.context() as m:
            if argv[0] == "figures":  # matplotlib writes through its own file object
                import matplotlib.figure

                def savefig(self: Any, fname: Any, **kw: Any) -> None:
                    Path(fname).write_bytes(b"%PDF-1.4 partial")
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

                m.setattr(matplotlib.figure.Figure, "savefig", savefig)
            else:
                disk_full_after(m, 7)
            code, _, err = run(argv, capsys)
        assert code == 1, (argv[0], err)
        # the step's last line (a point job first says which point it runs), no traceback
        assert err.splitlines()[-1] == f"specsim: disk full writing {first_output}", err
        assert "Traceback" not in err and err.count("disk full") == 1, err
        assert not Path(first_output).exists(), argv[0]
        assert not no_temporaries(tmp_path), argv[0]
        # the reserve is freed for Snakemake's metadata; the run's last word is this line
        assert not RESERVE.exists(), argv[0]
        assert disk_full_note() == f"specsim: disk full writing {first_output}; {ADVICE}"
        if argv[0] in ("collect", "tables"):  # the next step needs this one's outputs
            code, _, err = run(argv, capsys)
            assert code == 0, err


def test_a_really_full_disk_is_one_line_and_leaves_no_partial_file(
        small_disk: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = small_disk / "tables"
    big = pd.DataFrame({"check": [f"claim {i}" * 20 for i in range(2000)], "passed": True,
                        "observed": 1.0, "expected": "1"})
    with pytest.raises(OSError, match=f"disk full writing {out}/checks.csv"):
        write_table(big, out / "checks.csv")
    assert list(out.iterdir()) == []
    checks_table(small_disk / "checks.csv")
    fill(small_disk)
    code, _, err = run(["gate", "--checks", str(small_disk / "checks.csv"), "--out",
                        str(small_disk / "ok" / "checks.ok")], capsys)
    assert code == 1 and err.startswith("specsim: disk full writing "), err
    assert err.count("\n") == 1 and "checks.ok" in err
    assert not no_temporaries(small_disk)


def test_no_room_names_the_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specsim.io import no_room

    assert no_room(tmp_path, need=1) is None
    monkeypatch.setattr(os, "statvfs", lambda _: os.statvfs_result((4096, 4096, 10, 0, 0, 0, 0,
                                                                   0, 0, 255)))
    assert no_room(tmp_path) == (f"disk full: {tmp_path} has 0 bytes free (a run needs at "
                                 f"least 4,194,304 for its locks, logs and results); free "
                                 f"some space and rerun")


# ---------------------------------------------------------------- the run's reserve
def test_the_reserve_is_real_blocks_held_once_and_freed_by_the_first_full_job(
        tmp_path: Path) -> None:
    (tmp_path / ".snakemake").mkdir()
    (tmp_path / NOTE).write_text("disk full writing an earlier run's file")
    hold_reserve(tmp_path)
    reserve = tmp_path / RESERVE
    assert reserve.stat().st_blocks * 512 >= RESERVE_BYTES  # not a sparse file
    assert not (tmp_path / NOTE).exists()  # an earlier run's line is not this run's
    inode = reserve.stat().st_ino
    hold_reserve(tmp_path)
    assert reserve.stat().st_ino == inode  # a whole reserve is kept, not rewritten
    assert release_reserve("disk full writing results/a.parquet", tmp_path)
    assert not reserve.exists()
    assert not release_reserve("disk full writing results/b.parquet", tmp_path)  # first wins
    assert disk_full_note(tmp_path) == (f"specsim: disk full writing results/a.parquet; "
                                        f"{ADVICE}")
    assert disk_full_note(tmp_path) is None  # said once


def test_a_job_run_by_hand_finds_no_reserve_and_leaves_nothing(tmp_path: Path) -> None:
    assert not release_reserve("disk full writing x", tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_the_manifest_step_that_meets_a_full_disk_frees_the_reserve_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tiny_config: dict[str, Any]) -> None:
    """The run's own records (grid, manifest) are steps like the others: a full disk frees the
    reserve, leaves the job's line for the run's end and exits 1, in one line."""
    from specsim.cli import main
    from specsim.config import write_grid_file

    monkeypatch.chdir(tmp_path)
    write_grid_file("grid.json", load_grid(mini_config(tiny_config), SCHEMA))
    hold_reserve()
    with monkeypatch.context() as m:
        disk_full_after(m, 3)
        assert main(["manifest", "--grid", "grid.json", "--out", "results/manifest.txt",
                     "results/points.parquet"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["specsim: disk full writing results/manifest.txt"], err
    assert not RESERVE.exists()
    assert disk_full_note() == f"specsim: disk full writing results/manifest.txt; {ADVICE}"
    assert not Path("results/manifest.txt").exists()


def statvfs_with(free: int) -> os.statvfs_result:
    return os.statvfs_result((4096, 4096, 1 << 20, free // 4096, free // 4096, 0, 0, 0, 0,
                              255))


def test_a_run_needs_room_for_its_logs_and_the_reserve_it_does_not_hold_yet(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "statvfs", lambda _: statvfs_with(5 << 20))
    assert room_to_start(tmp_path) == (
        f"disk full: {tmp_path} has 5,242,880 bytes free (a run needs at least 6,291,456 for "
        f"its locks, logs and results); free some space and rerun")
    monkeypatch.undo()
    hold_reserve(tmp_path)
    monkeypatch.setattr(os, "statvfs", lambda _: statvfs_with(5 << 20))
    assert room_to_start(tmp_path) is None  # the reserve it holds is room it has


@pytest.mark.parametrize(("outcome", "note", "free", "said"), [
    (False, True, 3 << 20, "note"),    # a job met the full disk: its line, last
    (False, False, 3 << 20, None),     # a run failed for another reason: nothing added
    (False, False, 0, "free"),         # a job's shell could not open its log: the free space
    (None, False, 0, "free"),          # Snakemake's own write met the full disk, it raised
    (None, False, 3 << 20, None),      # Snakemake raised for another reason
    (True, True, 0, None),             # a run that succeeded says nothing
])
def test_the_run_guard_says_one_line_last_only_when_the_disk_ended_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        outcome: bool | None, note: bool, free: int, said: str | None) -> None:
    guard = RunGuard(tmp_path)
    guard.at_exit()
    assert capsys.readouterr().err == ""  # a run that never started (a dry run, a refusal)
    guard.start()
    assert (tmp_path / RESERVE).exists()
    if note:
        release_reserve("disk full writing results/x.csv", tmp_path)
    if outcome is not None:
        guard.ended(failed=not outcome)
    monkeypatch.setattr(os, "statvfs", lambda _: statvfs_with(free))
    guard.at_exit()
    err = capsys.readouterr().err
    expected = {"note": f"specsim: disk full writing results/x.csv; {ADVICE}\n",
                "free": f"{full_at_exit(tmp_path)}\n", None: ""}[said]
    assert err == expected


def test_a_run_with_no_room_for_its_reserve_stops_in_one_line(small_disk: Path) -> None:
    fill(small_disk)
    guard = RunGuard(small_disk)
    with pytest.raises(SystemExit) as stop:
        guard.start()
    assert str(stop.value) == (f"specsim: disk full writing {small_disk / RESERVE}; {ADVICE}")
    assert not (small_disk / RESERVE).exists()


