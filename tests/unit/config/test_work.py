"""The work a config asks for is judged before any job: the estimate, its ceiling, studies whose
answer cannot exist, and which config file each study came from."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from config_cases import big_table
from conftest import SCHEMA

from specsim import work
from specsim.config import load_grid
from specsim.errors import ConfigError


def test_estimate_counts_every_round(tiny_config: dict[str, Any]) -> None:
    grid = load_grid(copy.deepcopy(tiny_config), SCHEMA)
    b = grid.config["budget"]
    long_run = sum(p.measure == "long_run" for p in grid.points)
    equivalence = sum(p.measure == "equivalence" for p in grid.points)
    scheme = sum(p.measure == "scheme" for p in grid.points)
    assert long_run and equivalence and scheme
    rounds = b["chains"] * (b["rounds"] + b["burn_in"])
    assert work.estimate(grid) == (long_run * rounds + equivalence * b["equivalence_trials"]
                                   + scheme * (rounds + b["scheme_trials"]))


def test_work_above_the_ceiling_is_refused_with_the_estimate(
        tiny_config: dict[str, Any]) -> None:
    cfg = copy.deepcopy(tiny_config)
    cfg["budget"] |= {"chains": 10**8, "rounds": 10**7}
    with pytest.raises(ConfigError) as err:
        load_grid(cfg, SCHEMA)
    msg = str(err.value)
    assert msg.startswith("max_work:") and "simulated rounds" in msg and "core-days" in msg
    cfg["max_work"] = 1e18  # raising the ceiling (to its largest) is the deliberate confirmation
    load_grid(cfg, SCHEMA)


@pytest.mark.parametrize("study", ["optimal_k", "break_even"])
def test_a_study_without_an_answer_is_refused(tiny_config: dict[str, Any], study: str) -> None:
    cfg = copy.deepcopy(tiny_config)
    cfg["studies"][study]["alpha"] = [0.5, 1.0]
    with pytest.raises(ConfigError, match=rf"studies\.{study}\.alpha: 1\.0 has no"):
        load_grid(cfg, SCHEMA)


def test_quadrature_memory_is_bounded(tiny_config: dict[str, Any]) -> None:
    cfg = copy.deepcopy(tiny_config)
    cfg["budget"]["quadrature_pairs"] = work.MAX_QUADRATURE_CELLS // 20 + 1  # stub: vocab 20
    with pytest.raises(ConfigError, match=r"budget\.quadrature_pairs: .* use at most 419430 "):
        load_grid(cfg, SCHEMA)
    cfg["budget"]["quadrature_pairs"] = work.MAX_QUADRATURE_CELLS // 20
    load_grid(cfg, SCHEMA)


def test_table_vocabulary_is_bounded_by_the_declared_memory(tiny_config: dict[str, Any]) -> None:
    cfg = copy.deepcopy(tiny_config)
    cfg["models"]["calibrated"]["vocab"] = work.MAX_TABLE_VOCAB + 1
    with pytest.raises(ConfigError, match=r"models\.calibrated\.vocab: 1025 tokens"):
        load_grid(cfg, SCHEMA)


# --- one estimate, one verdict: what a job would refuse, the config refuses first -------------


def test_an_exact_law_its_module_refuses_is_refused_at_config_time() -> None:
    """heuristic cap 256 on a vocab-1024 table: the point job's law() raises its 2^25-cell
    refusal (the point Monte Carlo only); the config check says the same words first."""
    import numpy as np

    from specsim.schemes import heuristic

    P = np.full((1024, 1024), 1 / 1024)
    with pytest.raises(ValueError) as law_err:
        heuristic.law(P, P, P, P, 3, {"cap": 256})
    with pytest.raises(ConfigError) as err:
        load_grid(big_table("heuristic", {"cap": [256]}), SCHEMA)
    text = str(err.value)
    assert "\n" not in text and str(law_err.value) in text
    assert text.startswith("studies.policies: model 'big' (vocab 1024), rule correct, policy "
                           "heuristic, cap=256")


def test_a_tree_shape_the_law_refuses_is_named_in_one_line() -> None:
    """A tree's knob is a shape (a string): the refusal spells it as the config does."""
    cfg = big_table("fixed", {"branches": ["2x1"]})
    cfg["studies"]["policies"] |= {"rule": ["tree"], "gamma": [2]}
    cfg["cost"] = {"tree_budget_max": 0}
    with pytest.raises(ConfigError) as err:
        load_grid(cfg, SCHEMA)
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith("studies.policies: model 'big' (vocab 1024), rule tree, policy fixed, "
                           "branches=2x1, gamma 2: "), text


def test_sequoia_trees_the_tables_job_would_refuse_are_refused_at_config_time() -> None:
    from specsim.schemes.tree import law_refusal

    with pytest.raises(ConfigError) as err:  # its points pass; the tables job would not
        load_grid(big_table("fixed", {}, vocab=512), SCHEMA)
    text = str(err.value)
    why = law_refusal(512, 32, 32)
    assert why and why in text and "\n" not in text
    assert text.startswith("cost.tree_budget_max: 32 on model 'big' (vocab 512)")


# --- the equivalence study's exact law: refused at config time, by the job's own test ---------
EQBIG = {"family": "markov", "vocab": 200, "target": {"seed": 1, "sharpness": 2.5},
         "draft": {"kind": "blend", "weight": 0.85, "other": {"seed": 2, "sharpness": 2.5}}}


def test_an_equivalence_law_too_large_to_enumerate_is_refused_in_one_line(
        tiny_config: dict[str, Any]) -> None:
    """vocab 200: 200^3 cells > max_enumeration 4e6. The job would go Monte Carlo only and the
    run would fail at the checks (tv_exact = nan) after all its work; the config says so."""
    cfg = copy.deepcopy(tiny_config)
    cfg["models"]["eqbig"] = EQBIG
    cfg["studies"]["equivalence"]["models"] = ["eqbig", "stub"]
    with pytest.raises(ConfigError) as err:
        load_grid(copy.deepcopy(cfg), SCHEMA)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("studies.equivalence: model 'eqbig' (vocab 200), rule correct")
    assert "200**3 = 8000000 cells" in msg and "max_cells=4000000" in msg
    assert "lower the vocab (a chain of 200 states)" in msg
    assert msg.endswith("raise budget.max_enumeration to 8000000")
    cfg["budget"]["max_enumeration"] = 8_000_000  # the knob it names is enough
    load_grid(cfg, SCHEMA)
    # the stub's frozen chain grows with gamma: (gamma + 2) 20 + 1 = 161 states at gamma 6
    cfg = copy.deepcopy(tiny_config)
    cfg["studies"]["equivalence"]["gamma"] = [6]
    with pytest.raises(ConfigError, match=r"^studies\.equivalence: model 'stub' \(vocab 20\), "
                       r"rule \w+, policy fixed, gamma 6: .*161\*\*3 .* lower the vocab or "
                       r"gamma \(a chain of 161 states\)"):
        load_grid(cfg, SCHEMA)


@pytest.mark.parametrize("model, gamma", [("eqbig", 3), ("stub", 6), ("stub", 5),
                                          ("seed_good", 3)])
def test_the_job_and_the_config_make_the_same_equivalence_decision(
        tiny_config: dict[str, Any], model: str, gamma: int) -> None:
    """The job's chain (p.shape[0]) is the config's (chain_size); a refused point's job row
    says the config's words, an accepted one enumerates."""
    from specsim.config import validate_config
    from specsim.grid import build_grid
    from specsim.measures import measure_of

    cfg = copy.deepcopy(tiny_config)
    cfg["models"]["eqbig"] = EQBIG
    cfg["studies"] = {"equivalence": cfg["studies"]["equivalence"] | {
        "models": [model], "gamma": [gamma], "rule": ["correct"]}}
    grid = build_grid(validate_config(cfg, SCHEMA))  # no work.check: the job's side alone
    (point,) = grid.points
    measure = measure_of(point.measure)
    budget = grid.config["budget"]
    p = point.family.equivalence_model(point)[0]
    assert p.shape[0] == point.family.chain_size(point)[0]
    why = measure.refusal(point, budget)
    row = measure.exact(point, budget, 1)
    if why:
        assert row["exact_method"] == f"mc_only ({why})" and row["tv_exact"] != row["tv_exact"]
        with pytest.raises(ConfigError, match=re.escape(why)):
            load_grid(copy.deepcopy(cfg), SCHEMA)
    else:
        assert row["exact_method"] == "enumeration" and row["tv_exact"] < 1e-9
        load_grid(copy.deepcopy(cfg), SCHEMA)
    assert bool(why) == (model == "eqbig" or gamma >= 6)
