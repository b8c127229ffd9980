"""Bad configs stop before any job runs, naming the key, the value and what is allowed."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from config_cases import BAD, BASE
from conftest import ROOT, SCHEMA, TINY

from specsim.config import load_grid, validate_config
from specsim.errors import ConfigError


@pytest.mark.parametrize(("name", "config", "fragments"), BAD, ids=[b[0] for b in BAD])
def test_bad_config_is_refused_with_a_clear_message(name: str, config: Any,
                                                    fragments: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        load_grid(copy.deepcopy(config), SCHEMA)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{name}: {fragment!r} not in {message!r}"


def test_there_are_at_least_25_bad_configs() -> None:
    assert len(BAD) >= 25


def test_defaults_are_filled_in() -> None:
    cfg = validate_config({"models": BASE["models"], "studies": {"a": {
        "analysis": "accept_curve", "models": ["calibrated"], "gamma": [2]}}}, SCHEMA)
    assert cfg["budget"]["chains"] == 16384
    assert cfg["studies"]["a"]["rule"] == ["correct"]
    assert cfg["studies"]["a"]["temperature"] == [1.0]
    assert cfg["significance"] == 0.001


def test_default_and_tiny_configs_are_valid() -> None:
    for path in (ROOT / "config.yaml", TINY):
        grid = load_grid(yaml.safe_load(path.read_text()), SCHEMA)
        assert len(grid.points) > 0
        assert len({p.point_id for p in grid.points}) == len(grid.points)




def test_a_bad_realtext_section_is_refused_before_its_trace_models_read_it() -> None:
    """The default config's trace models size themselves from the realtext section: a
    cross-field error there is one config error naming the section, not a traceback from
    the model that read it first."""
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config["realtext"]["model"]["target_order"] = 2  # below the draft orders 1-4
    with pytest.raises(ConfigError, match=r"^realtext: draft orders .*target_order"):
        load_grid(config, SCHEMA)
