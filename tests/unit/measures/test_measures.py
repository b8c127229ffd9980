"""The measure registry: one interface, no caller that branches on a measure's name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from specsim.errors import ConfigError
from specsim.measures import MEASURES, Measure, for_analysis, measure_of

SRC = Path(__file__).resolve().parents[3] / "src" / "specsim"
# Modules that run every measure through the interface (the measures live in measures/).
CALLERS = ("job", "collect", "work", "grid", "io/points")


def _branches(module: str) -> set[str]:
    """Measure names compared against (``measure == "scheme"``) or keying a dispatch table
    (a dict literal with two or more measure names as keys)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse((SRC / f"{module}.py").read_text())):
        if isinstance(node, ast.Compare):
            found |= {n.value for n in (node.left, *node.comparators)
                      if isinstance(n, ast.Constant) and n.value in MEASURES}
        elif isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)} & set(MEASURES)
            found |= keys if len(keys) > 1 else set()
    return found


@pytest.mark.parametrize("module", CALLERS)
def test_no_measure_branch_in_callers(module: str) -> None:
    found = _branches(module)
    assert not found, f"{module}.py branches on measures {found}: ask the measure instead"


def test_registry() -> None:
    assert list(MEASURES) == ["long_run", "equivalence", "scheme"]
    for name, measure in MEASURES.items():
        assert isinstance(measure, Measure) and measure.name == name
        assert measure_of(name) is measure
        assert set(measure.budget) <= {"chains", "rounds", "burn_in", "batches",
                                       "equivalence_trials", "max_enumeration", "scheme_trials"}
    with pytest.raises(ConfigError, match="unknown measure 'bogus'"):
        measure_of("bogus")
    assert for_analysis("equivalence").name == "equivalence"
    assert for_analysis("schemes").name == "scheme"
    assert for_analysis("optimal_k").name == "long_run"


def test_point_file_schemas() -> None:
    """Tags as the point files on disk carry them; one schema per tag."""
    tags = {m.name: (m.sim_schema.tag, m.exact_schema.tag) for m in MEASURES.values()}
    assert tags == {"long_run": (b"sim/1", b"exact/1"), "equivalence": (b"sim/1", b"exact/1"),
                    "scheme": (b"scheme_sim/1", b"scheme_exact/1")}
    by_tag = {}
    for m in MEASURES.values():
        for s in (m.sim_schema, m.exact_schema):
            assert by_tag.setdefault(s.tag, s) is s
