"""Tests by kind: unit tests by package (tests/unit/<package or module>/), integrity tests
(tests/integrity/), architecture tests (tests/architecture/) and the tests that start Snakemake
(tests/workflow/, marked ``workflow`` by conftest.py). Beside them, tests/ holds only the
helpers every kind imports. Each test fails naming what is out of place."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import ROOT, WORKFLOW_TESTS

TESTS = ROOT / "tests"
KINDS = ("unit", "integrity", "architecture", "workflow")
# What starts Snakemake from a test: conftest.py's helper, its path, the shared tiny run.
STARTERS = {"snakemake", "SNAKEMAKE", "tiny_run", "built_once"}


def _test_files() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def test_every_test_file_is_in_its_kinds_folder() -> None:
    parts = [p.relative_to(TESTS).parts for p in _test_files()]
    misplaced = ["/".join(x) for x in parts
                 if x[0] not in KINDS or (x[0] == "unit") != (len(x) == 3) or len(x) > 3]
    assert not misplaced, f"not under tests/<kind>/ (kinds {KINDS}; unit/<package>/): {misplaced}"


def test_unit_folders_name_a_package_or_module_of_specsim() -> None:
    src = ROOT / "src" / "specsim"
    unknown = [p.name for p in sorted((TESTS / "unit").iterdir()) if p.is_dir()
               and p.name != "__pycache__"
               and not (src / p.name).is_dir() and not (src / f"{p.name}.py").is_file()]
    assert not unknown, f"tests/unit/ folders naming no package or module of src/specsim: {unknown}"


def _starts_snakemake(path: Path) -> list[str]:
    """Where a test module refers to what starts Snakemake (a call, its path, the tiny run)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Name) and node.id in STARTERS:
            found.append(f"{node.id} at line {node.lineno}")
        elif isinstance(node, ast.arg) and node.arg in STARTERS:
            found.append(f"fixture {node.arg} at line {node.lineno}")
        elif isinstance(node, ast.alias) and node.name in STARTERS:
            found.append(f"import of {node.name} at line {node.lineno}")
    return found


def test_no_test_outside_tests_workflow_starts_snakemake() -> None:
    """conftest.py's autouse guard fails such a test when it runs; this finds it unrun."""
    found = {str(p.relative_to(TESTS)): where for p in sorted(TESTS.rglob("*.py"))
             if p.name != "conftest.py" and not p.is_relative_to(WORKFLOW_TESTS)
             and (where := _starts_snakemake(p))}
    assert not found, f"start Snakemake outside tests/workflow/: {found}"


def test_the_workflow_tests_start_snakemake() -> None:
    idle = [p.name for p in sorted(WORKFLOW_TESTS.glob("test_*.py")) if not _starts_snakemake(p)]
    assert not idle, f"tests/workflow/ files that start no Snakemake: {idle}"


def test_the_workflow_marker_follows_the_folder(request: pytest.FixtureRequest) -> None:
    wrong = [item.nodeid for item in request.session.items
             if (item.get_closest_marker("workflow") is not None)
             != Path(str(item.fspath)).is_relative_to(WORKFLOW_TESTS)]
    assert not wrong, f"workflow marker not set by folder: {wrong[:5]}"


def test_test_file_names_are_unique() -> None:
    """pytest imports test modules by file name (no packages under tests/): two files of one
    name in different folders stop the whole run at collection."""
    names = [p.name for p in _test_files()]
    assert not sorted({n for n in names if names.count(n) > 1})
