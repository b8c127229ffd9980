"""Bad configs stop before any job runs, naming the key, the value and what is allowed."""

from __future__ import annotations

import copy
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, SCHEMA, TINY

from specsim.config import load_grid, validate_config
from specsim.errors import ConfigError

BASE: dict[str, Any] = yaml.safe_load(TINY.read_text())


def mutate(path: str, value: Any, delete: bool = False) -> dict[str, Any]:
    """A copy of the tiny config with one key (dotted path, [i] for list items) changed."""
    cfg = copy.deepcopy(BASE)
    *parents, last = path.split(".")
    node: Any = cfg
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if delete:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return cfg


def rename(section: str, old: str, new: str) -> dict[str, Any]:
    cfg = copy.deepcopy(BASE)
    cfg[section][new] = cfg[section].pop(old)
    return cfg


# (id, config, fragments the message must contain)
BAD: list[tuple[str, Any, list[str]]] = [
    ("list_yaml", [1, 2, 3], ["mapping", "list"]),
    ("scalar_yaml", "just a string", ["mapping", "str"]),
    ("none_yaml", None, ["mapping", "NoneType"]),
    ("missing_models", mutate("models", None, delete=True), ["models", "required"]),
    ("missing_gamma", mutate("studies.accept_curve.gamma", None, delete=True),
     ["studies.accept_curve", "gamma", "required"]),
    ("unknown_top_key", {**BASE, "seeds": 3}, ["seeds", "unexpected"]),
    ("unknown_model_key", mutate("models.seed_good.colour", "red"),
     ["models.seed_good", "colour"]),
    ("unknown_study_key", mutate("studies.equivalence.rules", ["correct"]),
     ["studies.equivalence", "rules"]),
    ("unknown_rule", mutate("studies.equivalence.rule", ["correct", "nucleus"]),
     ["studies.equivalence.rule[1]", "nucleus"]),
    ("scheme_rule_outside_schemes", mutate("studies.equivalence.rule", ["correct", "typical"]),
     ["studies.equivalence.rule", "'typical'", "analysis: schemes"]),
    ("unknown_model_in_study", mutate("studies.accept_curve.models", ["calibrated", "gpt"]),
     ["studies.accept_curve.models", "gpt", "not defined"]),
    ("alpha_above_one", mutate("studies.accept_curve.alpha", [0.5, 1.5]),
     ["studies.accept_curve.alpha[1]", "1.5"]),
    ("alpha_negative", mutate("studies.accept_curve.alpha", [-0.1]),
     ["studies.accept_curve.alpha[0]", "-0.1"]),
    ("alpha_unreachable", mutate("models.calibrated.draft.other", {"seed": 1, "sharpness": 2.5}),
     ["studies", "alpha", "reachable alpha"]),
    ("gamma_zero", mutate("studies.accept_curve.gamma", [0, 4]),
     ["studies.accept_curve.gamma[0]", "0"]),
    ("gamma_string", mutate("studies.accept_curve.gamma", ["four"]),
     ["studies.accept_curve.gamma[0]", "'four'", "integer"]),
    ("gamma_float", mutate("studies.accept_curve.gamma", [2.5]),
     ["studies.accept_curve.gamma[0]", "2.5"]),
    ("temperature_negative", mutate("studies.temperature.temperature", [-1.0]),
     ["studies.temperature.temperature[0]", "-1.0"]),
    ("c_negative", mutate("studies.break_even.c", [0.1, -0.5]),
     ["studies.break_even.c[1]", "-0.5"]),
    ("nan_value", mutate("studies.break_even.c", [math.nan]), ["studies.break_even.c[0]", "nan"]),
    ("inf_value", mutate("budget.chains", math.inf), ["budget.chains", "inf"]),
    ("string_number", mutate("budget.rounds", "many"), ["budget.rounds", "'many'"]),
    ("bool_for_integer", mutate("budget.rounds", True), ["budget.rounds", "True"]),
    ("negative_chains", mutate("budget.chains", -5), ["budget.chains", "-5"]),
    ("zero_trials", mutate("budget.equivalence_trials", 0), ["budget.equivalence_trials", "0"]),
    ("batches_over_chains", mutate("budget.batches", 1024), ["budget.batches", "1024", "chains"]),
    ("shell_model_name", rename("models", "seed_good", "$(touch x)"), ["$(touch x)", "match"]),
    ("shell_study_name", rename("studies", "break_even", "x; rm -rf /"), ["x; rm -rf /", "match"]),
    ("uppercase_name", rename("models", "stub", "Stub"), ["Stub", "match"]),
    ("duplicate_grid_values", mutate("studies.accept_curve.gamma", [1, 4, 4]),
     ["studies.accept_curve.gamma", "non-unique"]),
    ("grid_too_large", {**BASE, "max_points": 3}, ["max_points", "raise"]),
    ("vocab_too_large_for_equivalence", mutate("models.stub.vocab", 2000),
     ["equivalence", "vocab"]),
    ("iid_with_target", mutate("models.stub.target", {"seed": 1}), ["models.stub.target"]),
    ("markov_with_noise", mutate("models.seed_good.noise", 0.3), ["models.seed_good.noise"]),
    ("blend_without_weight", mutate("models.seed_good.draft", {"kind": "blend"}),
     ["models.seed_good.draft.weight"]),
    ("knob_on_calibrated", mutate("studies.optimal_k.draft", [0.5]),
     ["studies.optimal_k.draft", "calibrated"]),
    ("noise_draft_on_markov", mutate("models.seed_good.draft", {"kind": "noise"}),
     ["models.seed_good.draft.kind", "noise"]),
    ("unknown_family", mutate("models.stub.family", "transformer"),
     ["models.stub.family", "transformer"]),
    ("bad_table_base", mutate("models.calibrated.draft.other", "nearby"),
     ["models.calibrated.draft.other", "nearby"]),
    ("negative_latency", mutate("latency", [[0.01, -0.001]]), ["latency[0][1]", "-0.001"]),
    ("empty_rule_list", mutate("studies.equivalence.rule", []),
     ["studies.equivalence.rule", "[]"]),
]


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


def _snakemake(workdir: Path, configfile: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("snakemake")
    return subprocess.run(
        [str(exe), "-s", str(ROOT / "Snakefile"), "-d", str(workdir), "--configfile",
         str(configfile), "-n", "--cores", "1"],
        capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("name", ["shell_model_name", "gamma_zero", "list_yaml"])
def test_snakemake_stops_before_any_job(tmp_path: Path, name: str) -> None:
    """Through the real CLI: non-zero exit, the message, and nothing written anywhere."""
    config = dict((b[0], b) for b in BAD)[name]
    cfg_file = tmp_path / "bad.yaml"
    cfg_file.write_text(yaml.safe_dump(config[1]))
    work = tmp_path / "work"
    work.mkdir()
    marker = tmp_path / "x"
    before = set(os.listdir(tmp_path))
    result = _snakemake(work, cfg_file)
    assert result.returncode != 0
    assert "config error" in result.stderr + result.stdout or name == "list_yaml"
    for fragment in config[2]:
        if name != "list_yaml":
            assert fragment in result.stderr + result.stdout
    assert not (work / "results").exists()
    assert not marker.exists()
    assert set(os.listdir(tmp_path)) == before
