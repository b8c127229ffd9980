"""Model families behind one interface: identities pinned, registries read everywhere.

``tests/data/golden_points.json`` was written by the code *before* the families refactor: the
canonical model dicts, every point id and every job digest of config.yaml and tests/data/
tiny.yaml. Point ids and seeds derive from the canonical dicts, so if one of them moves, every
number of that point moves -- these tests fail first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from specsim.config import load_grid
from specsim.job import describe
from specsim.models import ModelSpec

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
GOLDEN = json.loads((ROOT / "tests" / "data" / "golden_points.json").read_text())
CONFIGS = {"config.yaml": ROOT / "config.yaml", "tiny.yaml": ROOT / "tests" / "data" / "tiny.yaml"}
# The custom tables the golden "specs" entries were hashed with.
TARGET_CSV = "0.5,0.25,0.25\n0.125,0.75,0.125\n0.25,0.25,0.5\n"
DRAFT_CSV = "0.25,0.5,0.25\n0.25,0.5,0.25\n0.5,0.25,0.25\n"


def _grid(name: str) -> Any:
    return load_grid(yaml.safe_load(CONFIGS[name].read_text()), SCHEMA)


# ---------------------------------------------------------------------------------------------
# 1. identities do not move
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_canonical_model_dicts_are_unchanged(name: str) -> None:
    config = yaml.safe_load(CONFIGS[name].read_text())
    want = GOLDEN[name]["models"]
    assert sorted(config["models"]) == sorted(want)
    for model, entry in config["models"].items():
        assert ModelSpec.from_dict(model, entry).to_dict() == want[model], model


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_point_ids_and_job_digests_are_unchanged(name: str) -> None:
    grid = _grid(name)
    found = {p.path: [p.point_id, describe(grid, p)["digest"]] for p in grid.points}
    assert found == GOLDEN[name]["points"]


def test_canonical_dicts_of_every_family_and_draft_are_unchanged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "target.csv").write_text(TARGET_CSV)
    (tmp_path / "t" / "draft.csv").write_text(DRAFT_CSV)
    for model, case in GOLDEN["specs"].items():
        assert ModelSpec.from_dict(model, case["entry"]).to_dict() == case["canonical"], model
