"""Capabilities callers read instead of a name: a token-wise rule's accept table on rows of
any shape (``accepts``, what a trace's per-position rows use) is its tables' accept table, bit
for bit, where both run; a policy's legend label is its own."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.schemes import POLICIES, SCHEME_RULES, Scheme
from specsim.verify import acceptance_probability


@pytest.mark.parametrize("rule", [r for r in SCHEME_RULES if Scheme.build(r).tokenwise])
def test_accepts_is_the_tables_accept_table(rule: str) -> None:
    rng = np.random.default_rng(1)
    P, Q = rng.dirichlet(np.full(6, 0.5), 6), rng.dirichlet(np.full(6, 0.5), 6)
    P[0, 2], Q[1, 3] = 0.0, 0.0  # the edge rules: p = 0, q = 0
    P[0] /= P[0].sum()
    Q[1] /= Q[1].sum()
    scheme = Scheme.build(rule)
    tables, accepts = scheme.tables(P, Q), scheme.accepts(P, Q)
    assert tables is not None and accepts is not None
    assert accepts.tobytes() == tables[0].tobytes()


def test_correct_accepts_rows_its_square_tables_refuse() -> None:
    rng = np.random.default_rng(2)
    p, q = rng.dirichlet(np.ones(5), 9), rng.dirichlet(np.ones(5), 9)  # 9 positions' rows
    scheme = Scheme.build("correct")
    with pytest.raises(ValueError, match="square"):
        scheme.tables(p, q)
    accepts = scheme.accepts(p, q)
    assert accepts is not None
    assert accepts.tobytes() == acceptance_probability(p, q).tobytes()
    assert Scheme.build("block").accepts(p, q) is None


@pytest.mark.parametrize("policy,knobs,gamma,want", [
    ("fixed", {}, 20, "fixed γ=20"),
    ("confidence", {"threshold": 0.4}, 20, "confidence 0.4, γ≤20"),
    ("heuristic", {}, 5, "heuristic from γ=5"),
    ("heuristic", {"cap": 8}, 5, "heuristic from γ=5, cap 8"),
    ("optimal", {"c": 0.05}, 8, "optimal, γ≤8")])
def test_each_policy_labels_itself(policy: str, knobs: dict, gamma: int, want: str) -> None:
    scheme = Scheme.build("correct", {}, policy, knobs)
    assert POLICIES[policy].label(gamma, dict(scheme.policy_knobs)) == want
