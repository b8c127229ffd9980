"""A token-wise rule's tables are built by whoever plays on them, once per job, and never kept
between calls: a point job builds them once for its rounds and once for its exact law, and a
table changed in place is never answered with the tables of its old values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from trace_files import grid_of

from specsim.job import describe
from specsim.measures import measure_of
from specsim.schemes import Scheme, tokenwise


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts every build of the ``correct`` rule's tables."""
    count = [0]
    build = tokenwise.correct_tables

    def counted(P: Any, Q: Any) -> Any:
        count[0] += 1
        return build(P, Q)

    monkeypatch.setattr(tokenwise, "correct_tables", counted)
    return count


@pytest.mark.parametrize("policy", ["fixed", "heuristic", "optimal"])
def test_a_point_job_builds_the_tables_once_for_its_rounds_and_once_for_its_law(
        tiny_config: dict, builds: list[int], policy: str) -> None:
    cfg = tiny_config
    grid = grid_of(cfg)
    point = next(p for p in grid.points if p.measure == "scheme" and p.scheme is not None
                 and p.scheme.rule == "correct" and p.scheme.policy == policy
                 and p.family.stationary_schemes)
    budget = describe(grid, point)["budget"]
    assert int(budget["rounds"]) > 1  # many rounds: one build for all of them
    measure = measure_of("scheme")
    measure.simulate(point, budget, 8)
    assert builds[0] == 1
    measure.exact(point, budget, 8)
    assert builds[0] == 2


def test_tables_follow_a_table_changed_in_place(builds: list[int]) -> None:
    rng = np.random.default_rng(0)
    P, Q = rng.dirichlet(np.ones(4), 4), rng.dirichlet(np.ones(4), 4)
    scheme = Scheme.build("correct")
    before = scheme.tables(P, Q)
    assert before is not None
    P[:] = Q  # the draft is the target now: every draft is accepted
    after = scheme.tables(P, Q)
    assert after is not None
    np.testing.assert_array_equal(after[0], np.ones((4, 4)))
    assert not np.array_equal(before[0], after[0])
    on = scheme.on(P, Q)
    assert builds[0] == 3  # one per call of tables() or on(), none kept
    law = on.law(2)
    np.testing.assert_allclose(law.mean_tokens, np.full(4, 3.0), rtol=1e-12)  # γ + 1 a round
    assert builds[0] == 3
