"""Shared fixtures: repository paths and the tiny config."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
TINY = ROOT / "tests" / "data" / "tiny.yaml"


@pytest.fixture
def tiny_config() -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(TINY.read_text()))
