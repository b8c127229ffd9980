"""User-supplied target/draft tables: each kind of bad file is refused, naming file and fault;
good files give exactly the program's numbers."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from conftest import SCHEMA, TINY

from specsim import exact
from specsim.config import load_grid
from specsim.errors import ConfigError
from specsim.families import markov_pair
from specsim.job import describe
from specsim.models.files import load_table
from specsim.models.maths import blend, random_table

TARGET = random_table(1, 2.5)
DRAFT = blend(TARGET, random_table(2, 2.5), 0.85)


def config_with(target: str, draft: str | None = None, vocab: int = 6) -> dict[str, Any]:
    cfg = copy.deepcopy(yaml.safe_load(TINY.read_text()))
    model: dict[str, Any] = {"family": "custom", "vocab": vocab, "target_file": target,
                             "draft": {"kind": "file", "file": draft} if draft else
                             {"kind": "calibrated", "other": "far"}}
    cfg["models"]["mine"] = model
    cfg["studies"]["equivalence"]["models"] = ["mine"]
    return cfg


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    load_table.cache_clear()
    (tmp_path / "t").mkdir()
    np.save(tmp_path / "t" / "target.npy", TARGET)
    np.savetxt(tmp_path / "t" / "draft.csv", DRAFT, delimiter=",", fmt="%.17g")
    return tmp_path


def write(name: str, table: np.ndarray) -> str:
    path = Path("t") / name
    if name.endswith(".npy"):
        np.save(path, table)
    else:
        np.savetxt(path, table, delimiter=",", fmt="%.17g")
    return str(path)


def test_good_files_reproduce_the_program_tables_exactly() -> None:
    grid = load_grid(config_with("t/target.npy", "t/draft.csv"), SCHEMA)
    point = next(p for p in grid.points if p.model == "mine")
    p, q = markov_pair(point.spec, 1.0, None)
    assert np.array_equal(p, TARGET)
    np.testing.assert_allclose(q, DRAFT, rtol=0, atol=1e-15)
    ours = exact.first_tokens_distribution(p, q, 0, 4, "greedy")
    theirs = exact.first_tokens_distribution(TARGET, DRAFT, 0, 4, "greedy")
    np.testing.assert_allclose(ours, theirs, atol=1e-14)


def test_editing_a_file_changes_only_its_points_job_digests() -> None:
    g1 = load_grid(config_with("t/target.npy", "t/draft.csv"), SCHEMA)
    d1 = {p.path: describe(g1, p)["digest"] for p in g1.points}
    write("draft.csv", blend(TARGET, random_table(2, 2.5), 0.5))
    load_table.cache_clear()
    g2 = load_grid(config_with("t/target.npy", "t/draft.csv"), SCHEMA)
    d2 = {p.path: describe(g2, p)["digest"] for p in g2.points}
    assert d1.keys() == d2.keys()
    changed = {path for path in d1 if d1[path] != d2[path]}
    assert changed and all(path.startswith("model~mine/") for path in changed)
    assert changed == {path for path in d1 if path.startswith("model~mine/")}


def _bad_cases() -> list[tuple[str, Any, list[str]]]:
    rows_off = DRAFT.copy()
    rows_off[2] *= 0.97
    negative = DRAFT.copy()
    negative[1, 0], negative[1, 1] = -0.01, negative[1, 1] + 0.01 + negative[1, 0]
    nan = DRAFT.copy()
    nan[3, 3] = np.nan
    zero_row = DRAFT.copy()
    zero_row[4] = 0.0
    return [
        ("rows_not_one", ("draft_off.csv", rows_off), ["row 2", "sums to", "draft"]),
        ("negative", ("neg.npy", negative), ["negative", "row 1"]),
        ("nan", ("nan.npy", nan), ["non-finite", "row 3", "column 3"]),
        ("zero_draft_row", ("zero.npy", zero_row), ["row 4", "no mass", "propose"]),
        ("not_square", ("rect.npy", DRAFT[:, :5]), ["square", "(6, 5)"]),
        ("mismatched_shape", ("small.npy", random_table(3, 1.0, vocab=5)), ["5 rows", "vocab"]),
    ]


@pytest.mark.parametrize(("name", "file", "fragments"), _bad_cases(),
                         ids=[c[0] for c in _bad_cases()])
def test_bad_draft_tables_are_refused(name: str, file: tuple[str, np.ndarray],
                                      fragments: list[str]) -> None:
    path = write(*file)
    with pytest.raises(ConfigError) as info:
        load_grid(config_with("t/target.npy", path), SCHEMA)
    msg = str(info.value)
    assert ("models.mine" in msg and path in msg) or "models.mine" in msg
    for f in fragments:
        assert f in msg, (f, msg)


@pytest.mark.parametrize(("path", "fragment"), [
    ("../outside.npy", "match"),
    ("t/../../outside.npy", "match"),
    ("t/link/passwd.csv", "outside the working directory"),
    ("/etc/passwd", "match"),
    ("t/$(touch x).npy", "match"),
    ("t/missing.npy", "no such file"),
    ("t/target.txt", ".npy or .csv"),
])
def test_bad_paths_are_refused(path: str, fragment: str, in_tmp: Path) -> None:
    (in_tmp / "t" / "target.txt").write_text("1,0\n0,1\n")
    outside = in_tmp.parent / f"{in_tmp.name}_outside"
    outside.mkdir(exist_ok=True)
    (outside / "passwd.csv").write_text("1,0\n0,1\n")
    (in_tmp / "t" / "link").symlink_to(outside)
    with pytest.raises(ConfigError) as info:
        load_grid(config_with(path), SCHEMA)
    assert fragment in str(info.value)
    assert not (in_tmp / "x").exists()


def test_zero_draft_probability_where_target_has_mass_is_allowed() -> None:
    """q(x) = 0 < p(x): never proposed; the residual supplies x's mass -- still lossless."""
    q = DRAFT.copy()
    q[:, 4] = 0.0
    q /= q.sum(axis=1, keepdims=True)
    path = write("q0.npy", q)
    grid = load_grid(config_with("t/target.npy", path), SCHEMA)
    point = next(p for p in grid.points if p.model == "mine")
    p, qq = markov_pair(point.spec, 1.0, None)
    law = exact.first_tokens_distribution(p, qq, 0, 4, "correct")
    np.testing.assert_allclose(law, exact.target_joint(p, 0, 2), atol=1e-12)
