"""No caller picks a code path by a scheme's or a policy's name, nor by probing a knob's name:
what a rule or a draft-length policy does is a declared capability of its registry entry
(:mod:`specsim.schemes.base`, :mod:`specsim.schemes.registry`), so a new rule or policy cannot
silently take another's path. Each test fails naming the file, line and expression."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
NAMES = {"rule", "policy"}  # what a scheme's registry entries are named by
KNOBS = {"rule_knobs", "policy_knobs"}
REGISTRY = SRC / "specsim" / "schemes" / "registry.py"  # where the names are the keys
SCHEMES = SRC / "specsim" / "schemes"  # the knobs' owners read them by name


def _named(node: ast.expr) -> bool:
    return ((isinstance(node, ast.Attribute) and node.attr in NAMES)
            or (isinstance(node, ast.Name) and node.id in NAMES))


def _literal(node: ast.expr) -> bool:
    """A string, or a tuple, list or set of strings."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    return (isinstance(node, (ast.Tuple, ast.List, ast.Set)) and bool(node.elts)
            and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts))


def _knobs(node: ast.expr) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr in KNOBS for n in ast.walk(node))


def name_branches(source: str) -> list[tuple[int, str]]:
    """(line, expression) of every comparison of a ``rule``/``policy`` (a name or an
    attribute) with a string literal (or a collection of them)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(map(_named, sides)) and any(map(_literal, sides)):
                out.append((node.lineno, ast.unparse(node)))
    return out


def knob_probes(source: str) -> list[tuple[int, str]]:
    """(line, expression) of every read of a rule's or policy's knob by a literal name:
    ``dict(x.policy_knobs)["c"]``, ``dict(x.policy_knobs).get("cap")``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Subscript) and _literal(node.slice) and _knobs(node.value)) or (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get" and node.args and _literal(node.args[0])
                and _knobs(node.func.value)):
            out.append((node.lineno, ast.unparse(node)))
    return out


def _found(check: Callable[[str], list[tuple[int, str]]],
           skip: Callable[[Path], bool]) -> list[str]:
    return [f"{path.relative_to(SRC.parent)}:{line}: {expr}"
            for path in sorted(SRC.rglob("*.py")) if not skip(path)
            for line, expr in check(path.read_text())]


def test_no_caller_branches_on_a_rule_or_policy_name() -> None:
    found = _found(name_branches, lambda path: path == REGISTRY)
    assert not found, ("comparisons with a rule's or policy's name (declare a capability in "
                       "specsim/schemes/base.py and set it in the registry):\n" + "\n".join(found))


def test_no_caller_outside_schemes_probes_a_knob_by_name() -> None:
    found = _found(knob_probes, lambda path: path.is_relative_to(SCHEMES))
    assert not found, ("knobs read by name outside specsim/schemes (ask the scheme for what "
                       "they mean):\n" + "\n".join(found))


def test_the_checks_can_fail() -> None:
    # each form the tests above refuse is seen; capability reads and variable keys are not
    source = '''
if scheme.policy == "optimal": pass
if point.scheme.rule != "correct": pass
if policy in ("fixed", "confidence"): pass
cap = dict(point.scheme.policy_knobs).get("cap", 0)
c = float(dict(scheme.policy_knobs)["c"])
if scheme.optimal_cost is not None: pass
if scheme.policy == other: pass
value = dict(s.rule_knobs)[name]
'''
    assert [line for line, _ in name_branches(source)] == [2, 3, 4]
    assert [line for line, _ in knob_probes(source)] == [5, 6]
