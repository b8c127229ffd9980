"""Seeded surveys of single-byte corruptions of every kind of result file: each flip is either
refused by the file's reader with an IntegrityError naming the file, or provably harmless (the
reader returns exactly the original content). Zero silent changes, zero other exceptions."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import SCHEMA, TINY

from specsim.cli import main
from specsim.config import load_grid
from specsim.config import read_grid_file as _load_grid
from specsim.io import (
    IntegrityError,
    read_frame,
    read_point_file,
    read_table,
    write_frame,
    write_json_verified,
    write_point_file,
    write_table,
)
from specsim.job import describe
from specsim.measures import measure_of

FLIPS = 300


def _grid() -> Any:
    cfg = yaml.safe_load(TINY.read_text())
    cfg["budget"] |= {"chains": 64, "rounds": 4, "burn_in": 1, "batches": 4,
                      "equivalence_trials": 2000, "quadrature_pairs": 1000}
    return load_grid(cfg, SCHEMA)


def survey(path: Path, read: Callable[[Path], Any], same: Callable[[Any, Any], bool],
           seed: int) -> dict[str, int]:
    """Flip one random bit of one random byte, FLIPS times; tally what the reader did."""
    original = path.read_bytes()
    reference = read(path)
    rng = np.random.default_rng(seed)
    tally = {"refused": 0, "harmless": 0}
    for _ in range(FLIPS):
        data = bytearray(original)
        i = int(rng.integers(len(data)))
        data[i] ^= 1 << int(rng.integers(8))
        path.write_bytes(bytes(data))
        try:
            got = read(path)
        except IntegrityError as err:
            assert str(path) in str(err) and "\n" not in str(err)
            tally["refused"] += 1
            continue
        assert same(got, reference), f"byte {i}: a flip changed the content silently"
        tally["harmless"] += 1
    path.write_bytes(original)
    assert tally["refused"] > 0
    return tally


def test_point_files(tmp_path: Path) -> None:
    grid = _grid()
    for point in (p for p in grid.points if p.measure == "equivalence"):
        desc = describe(grid, point)
        measure = measure_of(point.measure)
        sim, ref = tmp_path / "sim.parquet", tmp_path / "exact.parquet"
        write_point_file(sim, measure.sim_schema,
                         measure.simulate(point, desc["budget"], desc["seed"]), desc["digest"])
        write_point_file(ref, measure.exact_schema,
                         measure.exact(point, desc["budget"], desc["seed"]), desc["digest"])
        for path, kind in ((sim, measure.sim_schema), (ref, measure.exact_schema)):
            survey(path, lambda p, k=kind, d=desc["digest"]: read_point_file(p, k, d),
                   lambda a, b: json.dumps(a) == json.dumps(b), seed=1)
        break


def test_grid_file(tmp_path: Path) -> None:
    grid = _grid()
    path = tmp_path / "grid.json"
    write_json_verified(path, grid.to_json())
    survey(path, _load_grid, lambda a, b: a.config == b.config and a.points == b.points, seed=2)


def test_hand_edited_grid_file_is_refused(tmp_path: Path) -> None:
    grid = _grid()
    path = tmp_path / "grid.json"
    doc = copy.deepcopy(grid.to_json())
    doc["config"]["seed"] += 1  # a consistent edit: checksum recomputed, digest not
    write_json_verified(path, doc)
    with pytest.raises(IntegrityError, match="config digest"):
        _load_grid(str(path))


def test_tables_and_points_frame(tmp_path: Path) -> None:
    df = pd.DataFrame({"model": ["a", "b", "c"], "alpha": [0.5, np.nan, 0.9],
                       "gamma": [1, 2, 4], "tokens_per_round": [1.5, 2.25, 3.125]})
    csv = tmp_path / "t.csv"
    write_table(df, csv)
    survey(csv, read_table, lambda a, b: a.equals(b), seed=3)
    pq_path = tmp_path / "points.parquet"
    write_frame(df, pq_path)
    survey(pq_path, read_frame, lambda a, b: a.equals(b), seed=4)


def test_cli_names_the_file_and_withdraws_the_gate(tmp_path: Path, monkeypatch: Any,
                                                    capsys: Any) -> None:
    monkeypatch.chdir(tmp_path)
    grid = _grid()
    write_json_verified("results/grid.json", grid.to_json())
    Path("results/checks.ok").write_text("12 checks passed\n")
    data = bytearray(Path("results/grid.json").read_bytes())
    data[len(data) // 2] ^= 0x04
    Path("results/grid.json").write_bytes(bytes(data))
    with pytest.raises(SystemExit) as exit_:
        main(["collect", "--grid", "results/grid.json", "--results-dir", "results",
              "--out", "results/points.parquet"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2  # a usage error: the grid file is unusable
    assert "results/grid.json" in err and len(err.strip().splitlines()) == 1
    assert not Path("results/checks.ok").exists()


def test_templated_config_is_refused(tmp_path: Path) -> None:
    from specsim.configfile import check_config_files
    from specsim.errors import ConfigError

    path = tmp_path / "yte.yaml"
    path.write_text("__use_yte__: true\nseed: 1\n")
    with pytest.raises(ConfigError, match="__use_yte__"):
        check_config_files([str(path)])


def test_grid_file_keeps_the_config_order(tmp_path: Path) -> None:
    """The first model is a default (worked_example) and a point shared by two model names
    takes the first name: a grid rebuilt from grid.json must see the same order."""
    grid = _grid()
    path = tmp_path / "grid.json"
    write_json_verified(path, grid.to_json())
    again = _load_grid(str(path))
    assert list(again.config["models"]) == list(grid.config["models"])
    assert list(again.config["studies"]) == list(grid.config["studies"])
    assert [p.path for p in again.points] == [p.path for p in grid.points]
