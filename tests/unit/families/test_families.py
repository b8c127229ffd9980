"""Model families behind one interface: identities pinned, registries read everywhere.

``tests/data/golden_points.json`` pins the canonical model dicts, every point id and every job
digest of config.yaml and tests/data/tiny.yaml. Point ids and seeds derive from the canonical
dicts, so if one of them moves, every number of that point moves -- these tests fail first.
"""

from __future__ import annotations

import ast
import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from specsim import checks, families
from specsim.config import load_grid
from specsim.errors import ConfigError
from specsim.families import (
    COMMON_KEYS,
    FAMILIES,
    KNOBS,
    Family,
    TableFamily,
    family_of,
    model_identity,
)
from specsim.figures.style import RULE_ORDER, rule_label
from specsim.grid import build_grid
from specsim.job import describe
from specsim.measures import measure_of
from specsim.measures.long_run import exact_curve
from specsim.models.maths import blend, random_table
from specsim.models.spec import ModelSpec
from specsim.tables import studies
from specsim.verify import RULE_NAMES, RULES

ROOT = Path(__file__).resolve().parents[3]
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
    models = config["models"]
    assert set(want) <= set(models)
    # models beyond the golden file's: the recorded pairs' traces
    assert {models[m]["family"] for m in set(models) - set(want)} <= {"trace"}
    for model in want:
        entry = models[model]
        assert model_identity(family_of(entry["family"]).build(model, entry)) == want[model], model


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_point_ids_and_job_digests_are_unchanged(name: str) -> None:
    """Every point the golden file pins keeps its id and job digest (its paths carry the
    ``policy~fixed`` level); the points beyond the golden file's are schemes points or points
    of the trace models."""
    grid = _grid(name)
    found = {p.path: [p.point_id, describe(grid, p)["digest"]] for p in grid.points}
    golden = GOLDEN[name]["points"]
    assert {k: found.get(k) for k in golden} == golden
    added = [grid.by_path[k] for k in set(found) - set(golden)]
    assert {p.measure for p in added if p.spec.family != "trace"} <= {"scheme"}


def test_canonical_dicts_of_every_family_and_draft_are_unchanged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "target.csv").write_text(TARGET_CSV)
    (tmp_path / "t" / "draft.csv").write_text(DRAFT_CSV)
    for model, case in GOLDEN["specs"].items():
        entry = case["entry"]
        spec = family_of(entry["family"]).build(model, entry)
        assert model_identity(spec) == case["canonical"], model


# ---------------------------------------------------------------------------------------------
# 2. the registries and the schema agree
# ---------------------------------------------------------------------------------------------
SCHEMA_DOC = yaml.safe_load(SCHEMA.read_text())
MODEL_SCHEMA = SCHEMA_DOC["definitions"]["model"]["properties"]


def test_schema_rule_enum_is_the_rule_registry() -> None:
    enum = SCHEMA_DOC["definitions"]["study"]["properties"]["rule"]["items"]["enum"]
    missing = [r for r in RULE_NAMES if r not in enum]
    extra = [r for r in enum if r not in RULES]
    assert not missing, f"rules of specsim.verify.RULES missing from the schema's enum: {missing}"
    assert not extra, f"schema rule enum names rules not in specsim.verify.RULES: {extra}"


def test_schema_family_enum_is_the_family_registry() -> None:
    enum = MODEL_SCHEMA["family"]["enum"]
    assert sorted(enum) == sorted(FAMILIES), (
        f"schema families {enum} != specsim.families.FAMILIES {sorted(FAMILIES)}")


def test_schema_lists_every_family_setting_and_draft_kind() -> None:
    settings = {k for f in FAMILIES.values() for k in f.settings}
    assert set(MODEL_SCHEMA) == set(COMMON_KEYS) | settings
    kinds = SCHEMA_DOC["definitions"]["draft"]["properties"]["kind"]["enum"]
    assert set(kinds) == {d for f in FAMILIES.values() for d in f.drafts}


def test_every_family_is_complete_and_registered_under_its_name() -> None:
    for name, family in FAMILIES.items():
        assert family.name == name and isinstance(family, Family)
        assert not getattr(type(family), "__abstractmethods__", None), name
        assert family_of(name) is family
        for kind in family.drafts:  # every knob's field is a ModelSpec field
            knob = family.knob(kind)
            assert knob is None or knob.field in ModelSpec.__dataclass_fields__
    with pytest.raises(ConfigError, match="transformer"):
        family_of("transformer")


def test_rule_labels_come_from_the_registry() -> None:
    for name, spec in RULES.items():
        assert spec.label, f"rule {name} needs a label for figure legends"
        assert rule_label(name) == f"{name} ({spec.label})"
    assert RULE_ORDER == RULE_NAMES


# ---------------------------------------------------------------------------------------------
# 3. no family names and no config names in the modules that read families and tables
# ---------------------------------------------------------------------------------------------
SRC = ROOT / "src" / "specsim"
READERS = ("grid", "measures", "collect", "figures", "checks", "tables")


def _files(module: str) -> list[Path]:
    """A module's file, or every module file of a package."""
    path = SRC / f"{module}.py"
    return [path] if path.exists() else sorted((SRC / module).glob("*.py"))


def _strings(module: str) -> set[str]:
    """The string constants of a module (or of every module of a package), docstrings left out."""
    return set().union(*(_file_strings(p) for p in _files(module)))


def _file_strings(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    doc = {id(n.body[0].value) for n in ast.walk(tree)  # docstrings are prose, not branches
           if isinstance(n, ast.Module | ast.FunctionDef | ast.ClassDef) and n.body
           and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return {n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in doc}


@pytest.mark.parametrize("module", READERS)
def test_no_family_name_in_code(module: str) -> None:
    found = _strings(module) & set(FAMILIES)
    assert not found, f"{module}.py names families {found}: ask the family instead"


# The schemes study's own tables, figure and checks (tables/schemes*.py, figures/schemes.py,
# checks/schemes.py) compare named schemes -- a bound between two rules, Algorithm 1 as the
# baseline -- as the study's declarations do; every other reader names no rule.
SCHEMES_ANALYSIS = ("schemes.py", "schemes_trees.py")


@pytest.mark.parametrize("module", READERS)
def test_no_rule_name_in_code(module: str) -> None:
    found = set().union(*(_file_strings(p) for p in _files(module)
                          if p.name not in SCHEMES_ANALYSIS)) & set(RULE_NAMES)
    assert not found, f"{module}.py names rules {found}: read specsim.verify.RULES instead"


@pytest.mark.parametrize("module", READERS)
def test_no_config_model_name_in_code(module: str) -> None:
    config = yaml.safe_load(CONFIGS["config.yaml"].read_text())
    kinds = {d for f in FAMILIES.values() for d in f.drafts}
    names = set(config["models"]) - kinds  # 'calibrated' is also a draft kind
    found = {s for s in _strings(module) for n in names if n in s}
    assert not found, f"{module}.py names config models: {found}"


# ---------------------------------------------------------------------------------------------
# 4. knobs, and the config settings that replaced names in code
# ---------------------------------------------------------------------------------------------
def test_knobs_check_and_apply(tiny_config: dict[str, Any]) -> None:
    grid = load_grid(tiny_config, SCHEMA)
    spec = grid.model_spec("seed_good")
    knob = family_of(spec).knob("blend")
    assert knob is not None and knob.value(spec) == 0.85
    assert knob.apply(spec, 0.3, "x").weight == 0.3
    with pytest.raises(ConfigError, match=r"x: blend weight 1.5 is outside \[0, 1\]"):
        knob.apply(spec, 1.5, "x")
    temper = KNOBS["temper"]
    with pytest.raises(ConfigError, match=r"draft temperature 0\.0 must be > 0"):
        temper.check(0.0, "x")
    assert family_of("markov").knob("noise") is None  # iid's knob: not a markov draft
    assert family_of("iid").knob("noise") is KNOBS["noise"]


def _with(config: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(config)
    node = out
    *head, last = path.split(".")
    for part in head:
        node = node[part]
    node[last] = value
    return out


@pytest.mark.parametrize(("path", "value", "fragments"), [
    ("studies.break_even.expect_slower", [{"model": "seed_good", "c": 0.3, "label": "x"}],
     ["studies.break_even.expect_slower[0].c", "0.3"]),
    ("studies.break_even.expect_slower", [{"model": "stub", "c": 0.05, "label": "x"}],
     ["expect_slower[0].model", "'stub'"]),
    ("studies.accept_curve.expect_slower", [{"model": "seed_good", "c": 0.1, "label": "x"}],
     ["studies.accept_curve.expect_slower", "break_even"]),
    ("studies.break_even.expect_slower", [{"model": "seed_good", "c": 0.05, "label": "x",
                                           "alpha": 0.6}], ["expect_slower[0].alpha"]),
    ("worked_example", {"model": "nope"}, ["worked_example.model", "'nope'"]),
    ("worked_example", {"model": "seed_good", "context": 6}, ["worked_example.context", "6"]),
    ("worked_example", {"model": "calibrated", "alpha": 0.01},
     ["worked_example.alpha", "reachable"]),
    ("models.seed_good.draft", {"kind": "blend", "weight": 0.5, "file": "t/x.npy"},
     ["models.seed_good.draft.file"]),
])
def test_new_settings_are_checked(tiny_config: dict[str, Any], path: str, value: Any,
                                  fragments: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        load_grid(_with(tiny_config, path, value), SCHEMA)
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))


def test_worked_example_reads_its_model_from_the_config(tiny_config: dict[str, Any]) -> None:
    """The default (first model) reproduces the program's demo 1; another model, context or
    family changes the table, without any name in the code."""
    first = studies.worked_example(load_grid(copy.deepcopy(tiny_config), SCHEMA), pd.DataFrame())
    target = random_table(1, 2.5)
    draft = blend(target, random_table(2, 2.5), 0.85)
    assert list(first["token"]) == list("abcdef")
    # identity is the claim: the example's rows are the model's, built by random_table and
    # blend with the same operations in the same order
    assert np.array_equal(first["p"], target[0]) and np.array_equal(first["q"], draft[0])
    cfg = _with(tiny_config, "worked_example", {"model": "seed_good", "context": 2})
    again = studies.worked_example(load_grid(cfg, SCHEMA), pd.DataFrame())
    assert np.array_equal(again["p"], target[2]) and np.array_equal(again["q"], draft[2])
    cfg = _with(tiny_config, "worked_example", {"model": "stub"})
    stub = studies.worked_example(load_grid(cfg, SCHEMA), pd.DataFrame())
    assert len(stub) == 20 and np.isclose(stub["p"].sum(), 1) and np.isclose(stub["q"].sum(), 1)
    cfg = _with(tiny_config, "worked_example", {"model": "calibrated", "alpha": 0.6})
    cal = studies.worked_example(load_grid(cfg, SCHEMA), pd.DataFrame())
    assert np.isclose(cal["accepted_mass"].sum(), 0.6)


def test_checks_follow_the_registries_and_the_config() -> None:
    """Which rule must be lossless comes from RuleSpec.lossless; which draft must be slower
    from the config's expect_slower."""
    eq = pd.DataFrame([{"model": "m", "gamma": 2, "temperature": 1.0, "rule": r,
                        "verdict": "lossless" if RULES[r].lossless else "biased",
                        "p_value": 0.5, "tv_mc": 0.01, "tv_floor": 0.01,
                        "tv_exact": 0.0 if RULES[r].lossless else 0.2, "power": 1.0,
                        "p_value_vs_exact": 0.5} for r in RULE_NAMES])
    out = checks.equivalence_checks(eq)
    assert all(c.passed for c in out)
    small = [c.check for c in out if c.check.startswith("tv_distance_small")]
    assert len(small) == sum(s.lossless for s in RULES.values())
    sv = pd.DataFrame([{"study": "be", "model": "poor", "alpha": np.nan, "c": c,
                        "speedup": 2 - c, "speedup_ci_high": 2.1 - c, "speedup_exact": 2 - c}
                       for c in (0.5, 1.5)])
    claim = {"model": "poor", "c": 1.5, "label": "very-slow draft", "source": "me"}
    [check] = checks.slower_checks(sv, [("be", claim)])
    assert (check.check, check.source, check.passed) == (
        "very_slow_draft_is_slower", "me: a very-slow draft loses", True)
    assert not checks.slower_checks(sv, [("other_study", claim)])


# ---------------------------------------------------------------------------------------------
# 5. a new family is one class and one registry line
# ---------------------------------------------------------------------------------------------
class DiagonalFamily(TableFamily):
    """A toy table family: the target stays on its token with probability ``sigma``."""

    name = "diagonal"
    source = "test"
    settings = ("sigma",)
    drafts = ("calibrated", "uniform", "temper")

    def spec_fields(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        return {"sigma": float(entry.get("sigma", 0.5))}

    def describe(self, spec: ModelSpec) -> dict[str, Any]:
        return {"stay": spec.sigma}

    def base_target(self, spec: ModelSpec) -> np.ndarray:
        v = spec.vocab
        return np.full((v, v), (1 - spec.sigma) / (v - 1)) + np.eye(v) * (
            spec.sigma - (1 - spec.sigma) / (v - 1))


def test_a_new_family_runs_through_every_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(families, "FAMILIES", {**families.FAMILIES, "diagonal": DiagonalFamily()})
    config = {
        "seed": 3, "max_points": 100, "significance": 1e-3,
        "budget": {"chains": 64, "rounds": 8, "burn_in": 2, "batches": 4,
                   "equivalence_trials": 2000, "max_enumeration": 10**6},
        "models": {"toy": {"family": "diagonal", "vocab": 4, "sigma": 0.7,
                           "draft": {"kind": "temper", "temperature": 2.0}},
                   "toy_cal": {"family": "diagonal", "vocab": 4,
                               "draft": {"kind": "calibrated", "other": "far"}}},
        "studies": {
            "eq": {"analysis": "equivalence", "models": ["toy"], "gamma": [2],
                   "temperature": [1.0], "rule": ["correct"], "alpha": [0.8], "c": [0.1]},
            "sweep": {"analysis": "temperature", "models": ["toy", "toy_cal"], "gamma": [2],
                      "temperature": [1.0], "rule": ["correct"], "alpha": [0.6], "c": [0.1]},
        },
    }
    grid = build_grid(config)
    assert {model_identity(p.spec)["stay"] for p in grid.points} == {0.7, 0.5}
    budget = config["budget"]
    for point in grid.points:
        sim = measure_of(point.measure).simulate(point, budget, 3)
        ref = measure_of(point.measure).exact(point, budget, 3)
        if point.measure == "equivalence":
            assert sum(sim["joint2"]) == 2000 and ref["tv_exact"] < 1e-12
        else:
            assert sum(sim["accepted_hist"]) == 64 * 8 and ref["exact_method"] == "dp_horizon"
        if point.alpha is not None:
            assert np.isclose(ref["tokens_exact"], ref["tokens_closed_form"])
    with pytest.raises(ConfigError, match=r"models\.toy\.noise: not a setting of a 'diagonal'"):
        build_grid(_with(config, "models.toy.noise", 0.3))


# ---------------------------------------------------------------------------------------------
# 6. exact curves: the exact stage's numbers at other γ, for the optimal_k figure
# ---------------------------------------------------------------------------------------------
def test_exact_curve_agrees_with_each_points_reference(tiny_config: dict[str, Any]) -> None:
    """At the point's own γ the curve is the reference's stationary value: the DP limit for
    tables, the same quadrature (same β samples) for the stub, Eq. 1 for calibrated drafts."""
    cfg = _with(tiny_config, "studies.optimal_k.models", ["calibrated", "seed_good", "stub"])
    cfg["budget"]["quadrature_pairs"] = 4096
    grid = load_grid(cfg, SCHEMA)
    budget, root = grid.config["budget"], int(grid.config["seed"])
    ids = set(grid.studies["optimal_k"]["points"])
    methods = set()
    for point in (p for p in grid.points if p.point_id in ids):
        gammas = np.arange(1, point.gamma + 1)
        tokens, method = exact_curve(point, gammas, budget, root)
        ref = measure_of(point.measure).exact(point, budget, root)
        assert np.isclose(tokens[-1], ref["tokens_stationary"], rtol=1e-12, atol=0), point.path
        assert np.all(np.diff(tokens) > 0) and tokens[0] > 1
        methods.add(method.split("(")[0])
    assert methods == {"Eq. 1", "exact DP", "quadrature_mc"}
    table = studies.optimal_k_exact(grid, pd.DataFrame())
    assert set(table.groupby("model")["gamma"].max()) == {4}
    assert list(table.columns) == ["study", *studies.KEYS, "tokens_stationary", "exact_method"]


def test_worked_example_alpha_defaults_to_one_the_run_uses(tiny_config: dict[str, Any]) -> None:
    """A calibrated example with no alpha takes the first alpha a study runs that model at."""
    from specsim.grid import worked_example

    grid = load_grid(_with(tiny_config, "worked_example", {"model": "calibrated"}), SCHEMA)
    specs = {n: grid.model_spec(n) for n in grid.config["models"]}
    first = next(a for st in tiny_config["studies"].values() if "calibrated" in st["models"]
                 for a in st.get("alpha", []))
    assert worked_example(grid.config, specs)["alpha"] == first
