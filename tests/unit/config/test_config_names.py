"""Config keys that name things are checked against what exists, in one line naming the key:
``cost.expect`` (a costed model, a rule of the registry and its knobs, a point a schemes study
runs), and the optimal policy's cap on a trace as documented (docs/explanation/schemes.md)."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
import yaml
from conftest import ROOT, SCHEMA

from specsim.config import load_grid
from specsim.errors import ConfigError

GOOD = {"model": "seed_good", "gamma": 2, "rule": "multi_draft", "knobs": {"drafts": 2},
        "c": 0.1, "sequential": 1.5, "batched": 1.6}


def _with_claim(config: dict[str, Any], **change: Any) -> dict[str, Any]:
    config = copy.deepcopy(config)
    config["cost"]["expect"] = [{**GOOD, **change}]
    return config


def test_a_claim_on_a_point_a_study_runs_is_accepted(tiny_config: dict) -> None:
    load_grid(_with_claim(tiny_config), SCHEMA)


@pytest.mark.parametrize(("change", "key", "said"), [
    ({"rule": "multi_drafts"}, "cost.expect[0].rule", "is not a rule"),
    ({"rule": "rm -rf /"}, "cost.expect[0].rule", "is not a rule"),
    ({"knobs": {"draft": 2}}, "cost.expect[0].knobs.draft", "has no knob 'draft'"),
    ({"knobs": {"drafts": 0}}, "cost.expect[0].knobs.drafts", "outside the domain"),
    ({"model": "calibrated"}, "cost.expect[0].model", "is not costed"),
    ({"model": "nope"}, "cost.expect[0].model", "is not defined"),
    ({"gamma": 5}, "cost.expect[0]", "no schemes study runs"),
    ({"c": 0.3}, "cost.expect[0]", "no schemes study runs"),
    ({"knobs": {"drafts": 4}}, "cost.expect[0]", "no schemes study runs"),
    ({"rule": "spectr"}, "cost.expect[0]", "no schemes study runs"),
])
def test_a_claim_naming_what_does_not_exist_is_refused(
        tiny_config: dict, change: dict, key: str, said: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_grid(_with_claim(tiny_config, **change), SCHEMA)
    msg = str(err.value)
    assert msg.startswith(f"{key}") and said in msg and "\n" not in msg, msg


def test_a_model_out_of_cost_models_is_not_costed(tiny_config: dict) -> None:
    config = _with_claim(tiny_config)
    config["cost"]["models"] = ["stub"]
    with pytest.raises(ConfigError, match=re.escape("cost.expect[0].model: 'seed_good' is not "
                                                    "costed (cost.models: ['stub'])")):
        load_grid(config, SCHEMA)


def test_the_optimal_policy_past_its_cap_on_a_trace_is_refused() -> None:
    """The docs' pair_policies_optimal runs at cap 2 because cap 3 is refused: so it is."""
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    assert config["studies"]["pair_policies_optimal"]["gamma"] == [2]
    config["studies"]["pair_policies_optimal"]["gamma"] = [3]
    with pytest.raises(ConfigError, match=r"^studies\.pair_policies_optimal\.gamma: trace model "
                                          r"'ngram_o4'.*optimal policy.*lower gamma"):
        load_grid(config, SCHEMA)


@pytest.mark.parametrize(("roofline", "said"), [
    (["Llama-2-700B", "Llama-2-7B", "H100-SXM"], "realtext.engine.roofline[0]: 'Llama-2-700B' "
                                                 "is not a shape"),
    (["Llama-2-70B", "GPT-5", "H100-SXM"], "realtext.engine.roofline[1]: 'GPT-5' is not a "
                                           "shape"),
    (["Llama-2-70B", "Llama-2-7B", "H100"], "realtext.engine.roofline[2]: 'H100' is not a "
                                            "device"),
])
def test_the_engine_roofline_names_shapes_and_a_device(roofline: list[str], said: str) -> None:
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config["realtext"].setdefault("engine", {})["roofline"] = roofline
    with pytest.raises(ConfigError) as err:
        load_grid(config, SCHEMA)
    assert str(err.value).startswith(said) and "\n" not in str(err.value)
