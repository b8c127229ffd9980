"""specsim.schemes.sequoia: Sequoia's optimal tree by dynamic programming (arXiv 2402.12374).

The DP is checked against every ordered tree of small budgets, its value against the
positional-model value of the tree it returns, and the positional acceptance vector against
the tree rule's exact law where the positional model is exact (a context-free pair)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np
import pytest

from specsim.exact import stationary_rates
from specsim.models.maths import blend, one_hot_argmin, random_table
from specsim.schemes.sequoia import (
    best_tree,
    best_trees,
    level_widths,
    positional_acceptance,
    tree_value,
)
from specsim.schemes.tree import tree_law

TARGET = random_table(1, 2.5)
DRAFT = blend(TARGET, one_hot_argmin(TARGET), 0.55)


def ordered_trees(n: int) -> Iterator[list[int]]:
    """Every ordered tree of n non-root nodes as a parent array in depth-first order (the
    j-th child of a node is the j-th to name it)."""
    def forests(parent: int, m: int, start: int) -> Iterator[list[int]]:
        # m nodes hung under ``parent``, node ids from ``start``
        if m == 0:
            yield []
            return
        for size in range(1, m + 1):  # the first child's subtree size
            for sub in forests(start, size - 1, start + 1):
                for rest in forests(parent, m - size, start + size):
                    yield [parent, *sub, *rest]
    yield from forests(-1, n, 0)


def test_ordered_trees_are_catalan() -> None:
    assert [sum(1 for _ in ordered_trees(n)) for n in range(1, 7)] == [1, 2, 5, 14, 42, 132]


@pytest.mark.parametrize("accept", [[0.6, 0.5, 0.4], [0.9, 0.1], [0.3, 0.7, 0.7, 0.2],
                                    [0.5], [0.8, 0.0, 0.9]])
def test_dp_equals_brute_force(accept: list[float]) -> None:
    for n in range(1, 9):
        value, parents = best_tree(accept, n)
        brute = max(tree_value(accept, t) for t in ordered_trees(n))
        assert abs(value - brute) < 1e-12
        assert abs(tree_value(accept, parents) - value) < 1e-12
        assert parents.size <= n and all(-1 <= u < i for i, u in enumerate(parents))


def test_level_widths_count_nodes_per_depth() -> None:
    assert level_widths([-1, 0, 1]) == (1, 1, 1)  # a chain
    assert level_widths([-1, -1, 0, 0, 1, 2]) == (2, 3, 1)
    for n in range(1, 7):  # every ordered tree: widths sum to n, depth = the longest path
        for t in ordered_trees(n):
            widths = level_widths(t)
            depth = [0] * n
            for v, u in enumerate(t):
                depth[v] = 1 if u < 0 else depth[u] + 1
            assert sum(widths) == n and len(widths) == max(depth) and min(widths) >= 1


def test_chain_and_known_values() -> None:
    value, parents = best_tree([0.5], 3)  # one child per node: a chain
    assert parents.tolist() == [-1, 0, 1] and value == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    value, parents = best_tree([1.0], 4)
    assert value == 5.0


def test_positional_model_is_exact_for_context_free_pairs() -> None:
    """Every row of P (and of Q) the same: acceptance cannot depend on the context, so Sequoia's
    prediction is the tree rule's exact tokens per call."""
    rng = np.random.default_rng(3)
    p, q = rng.dirichlet(np.ones(5)), rng.dirichlet(np.ones(5))
    P, Q = np.tile(p, (5, 1)), np.tile(q, (5, 1))
    accept = positional_acceptance(P, Q, 6)
    assert (np.diff(accept) <= 1e-12).all() and accept[0] == pytest.approx(np.minimum(p, q).sum())
    for n in (1, 3, 6, 9):
        value, parents = best_tree(accept, n)
        exact = stationary_rates(tree_law(P, Q, parents)).tokens_per_round
        assert exact == pytest.approx(value, abs=1e-12)


def test_sequoia_tree_at_least_chain_on_tables() -> None:
    accept = positional_acceptance(TARGET, DRAFT, 10)
    for n in (2, 5, 10):
        value, parents = best_tree(accept, n)
        chain = tree_value(accept, np.arange(n) - 1)
        assert value >= chain - 1e-12
        assert stationary_rates(tree_law(TARGET, DRAFT, parents)).tokens_per_round > 1.0


@pytest.mark.parametrize(("args", "needle"), [(([0.5], 0), "budget"), (([0.5], 2.0), "budget"),
                                              (([1.5], 3), "accept"), (([], 3), "accept")])
def test_bad_inputs_refused(args: tuple, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        best_tree(*args)


def test_brute_force_lists_every_shape_once() -> None:
    seen = {tuple(t) for t in ordered_trees(5)}
    assert len(seen) == 42
    assert all(len(t) == 5 for t in itertools.islice(ordered_trees(5), 10))


def test_one_dp_gives_every_budget_its_own_tree() -> None:
    """best_trees runs the DP once to the largest budget; each budget's value and tree are
    best_tree's for that budget alone, bit for bit, in the order asked."""
    accept = np.array([0.8, 0.45, 0.3, 0.2, 0.1])
    budgets = [7, 1, 3, 12, 3]
    for (value, parents), b in zip(best_trees(accept, budgets), budgets, strict=True):
        want_value, want_parents = best_tree(accept, b)
        assert value == want_value and parents.size == b
        np.testing.assert_array_equal(parents, want_parents)
    with pytest.raises(ValueError, match="budget must be an integer >= 1"):
        best_trees(accept, [2, 0])
