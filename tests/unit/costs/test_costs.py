"""The round cost model (specsim.costs): its arithmetic against hand values, the roofline at
batch size b, the registry's draft width, the cost: section's refusals, cost_batch's columns
and the config's worked-example claim."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import ROOT, SCHEMA, TINY

from specsim import intensity
from specsim.checks.schemes import cost_claims
from specsim.config import load_grid, validate_config
from specsim.costs import BATCHED, SEQUENTIAL, ConstantCost, RooflineCost, settings
from specsim.errors import ConfigError
from specsim.outputs import table
from specsim.verify import RULES

# A decoder small enough to count by hand: d = 4, one layer, one head, d_ff = 4, vocab 8.
# params: q,o 32 + k,v 32 + mlp 48 + norms 12 + embed 32 + lm_head 32 = 188 (376 bytes);
# matmul params 144. A pass of t tokens after no context: 144 t + 4 t (t + 1) MACs,
# 376 + 16 t bytes per sequence's KV written.
TOY = intensity.TransformerShape("toy", 4, 1, 1, 1, 4, 8)
UNIT = intensity.Device("unit", 2.0, 1.0)  # 1 MAC/s, 1 B/s: time = max(MACs, bytes)


def test_constant_cost_is_the_issue_arithmetic() -> None:
    cost = ConstantCost(0.05)
    assert cost.total(16, 4, SEQUENTIAL) == pytest.approx(1.8)  # 1 + k γ c, k = γ = 4
    assert cost.total(16, 4, BATCHED) == pytest.approx(1.2)  # 1 + γ c
    assert cost.total(4, 1, BATCHED) == cost.total(4, 1, SEQUENTIAL) == pytest.approx(1.2)
    assert cost.total(16.0, 4, SEQUENTIAL, rounds=3.0) == pytest.approx(3.8)
    with pytest.raises(ValueError, match="drafting"):
        cost.total(4, 1, "parallel")


def test_roofline_cost_by_hand() -> None:
    assert TOY.param_count() == 188 and TOY.matmul_params() == 144
    one = RooflineCost(TOY, TOY, UNIT, batch=1, n_ctx=0)
    assert one.unit == 392  # max(152 MACs, 392 bytes): memory-bound
    assert one.c == 1.0  # the same shape drafts
    assert one.verify(4) == pytest.approx(656 / 392)  # 576 + 80 MACs > 440 bytes
    # 4 tokens in 2 drafts of depth 2 (verify 5 tokens: 840 MACs > 456 bytes)
    assert one.total((2, 2), SEQUENTIAL) == pytest.approx(4 * 1.0 + 840 / 392)
    assert one.total((2, 2), BATCHED) == pytest.approx(2 * 408 / 392 + 840 / 392)
    # a tree of 1 + 2 nodes: batched, one step of 1 token and one of 2 (408), verify 4 (656)
    assert one.total((1, 2), BATCHED) == pytest.approx(1.0 + 408 / 392 + 656 / 392)
    assert one.totals(np.array([4]))[0] == pytest.approx(4.0 + 840 / 392)
    with pytest.raises(ValueError, match="drafting"):
        one.total((1,), "parallel")
    eight = RooflineCost(TOY, TOY, UNIT, batch=8, n_ctx=0)
    assert eight.unit == 8 * 152  # 1216 MACs > 376 + 128 bytes: compute-bound
    assert eight.verify(2) == pytest.approx(8 * 312 / 1216)


def test_batch_one_is_the_intensity_stage_roofline() -> None:
    for shape in intensity.SHAPES:
        for dev in intensity.DEVICES:
            for t in (1, 5, 64):
                assert intensity.batch_roofline_time(shape, dev, t, 1, 512) == \
                    intensity.roofline_time(intensity.pass_cost(shape, t, 512), dev)
    with pytest.raises(ValueError, match="batch"):
        intensity.batch_roofline_time(TOY, UNIT, 1, 0, 0)


def test_verifying_is_nearly_free_only_at_small_batch() -> None:
    small = RooflineCost(intensity.LLAMA2_70B, intensity.LLAMA2_7B, intensity.A100_80GB, 1, 512)
    large = RooflineCost(intensity.LLAMA2_70B, intensity.LLAMA2_7B, intensity.A100_80GB, 256,
                         512)
    assert small.verify(5) < 1.01
    assert large.verify(5) > 3.0
    assert 0.08 < small.c < 0.12  # ~7B / 70B weights


def test_draft_widths_come_from_the_registry() -> None:
    assert RULES["multi_draft"].draft_widths({"drafts": 4}, 3) == (4, 4, 4)
    assert RULES["multi_draft"].draft_widths({}, 2) == (2, 2)  # the knob's default
    assert RULES["tree"].draft_widths({"branches": "2x2x1"}, 3) == (2, 4, 4)
    assert all(s.draft_widths({}, 3) == (1, 1, 1) for s in RULES.values()
               if s.width_knob is None)


def _cfg(**cost: Any) -> dict[str, Any]:
    cfg = yaml.safe_load(TINY.read_text())
    cfg["cost"] = {**cfg.get("cost", {}), **cost}
    return cfg


@pytest.mark.parametrize(("cost", "key"), [
    ({"devices": ["B200"]}, "cost.devices[0]"),
    ({"pairs": [["Llama-2-70B", "GPT-4"]]}, "cost.pairs[0][1]"),
    ({"models": ["nope"]}, "cost.models[0]"),
    ({"models": ["calibrated"]}, "cost.models[0]"),
])
def test_bad_names_are_refused_in_one_line(cost: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_grid(_cfg(**cost), SCHEMA)
    text = str(err.value)
    assert text.startswith(key) and "\n" not in text


@pytest.mark.parametrize(("cost", "key"), [
    ({"batch": [0]}, "batch"), ({"gamma_max": 0}, "gamma_max"), ({"n_ctx": -1}, "n_ctx"),
    ({"devices": []}, "devices"), ({"size": 3}, "size"),
])
def test_bad_values_are_refused_by_the_schema(cost: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError, match=key) as err:
        validate_config(_cfg(**cost), SCHEMA)
    assert "\n" not in str(err.value)


def test_models_default_to_the_schemes_studies_without_alpha() -> None:
    cfg = yaml.safe_load(TINY.read_text())
    assert settings(cfg)["models"] == ["seed_good", "stub"]
    cfg["studies"] = {k: v for k, v in cfg["studies"].items() if v["analysis"] != "schemes"}
    assert settings(cfg)["models"] == []
    assert settings({"cost": {"models": ["x"]}})["models"] == ["x"]


def test_cost_batch_declares_its_columns() -> None:
    from specsim.tables.schemes import COST_COLUMNS
    declared = table("cost_batch")
    assert all(declared.describe(c) for c in COST_COLUMNS)


def test_cost_claims_pass_and_fail_on_the_digits() -> None:
    df = pd.DataFrame([{"model": "m", "gamma": 4, "rule": "multi_draft", "drafts": 4.0,
                        "policy": "fixed", "tokens_stationary": 3.70379286,
                        "speedup_exact_c0.05": 3.70379286 / 1.8,
                        "speedup_exact_batched_c0.05": 3.70379286 / 1.2}])
    claim = {"model": "m", "gamma": 4, "rule": "multi_draft", "knobs": {"drafts": 4},
             "c": 0.05, "sequential": 2.06, "batched": 3.09, "source": "a test"}
    (row,) = cost_claims(df, [claim])
    assert row[2] and row[1] == "a test"
    (wrong,) = cost_claims(df, [claim | {"batched": 3.08}])
    assert not wrong[2]
    (absent,) = cost_claims(df, [claim | {"knobs": {"drafts": 2}}])
    assert not absent[2] and "no such" in absent[3]


def test_default_config_states_the_issue_example() -> None:
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    (claim,) = cfg["cost"]["expect"]
    assert (claim["sequential"], claim["batched"]) == (2.06, 3.09)
    assert copy.deepcopy(claim["knobs"]) == {"drafts": 4}


