"""specsim.schemes.traversal: the token tree of specsim.schemes.tree verified leaf to root.

The exact law is checked against a brute-force reference (every drawn tree, every accept
outcome, the parents' states updated event by event as the algorithm is written, in exact
rational arithmetic), against block verification (a chain) and the tree rule (depth 1),
against the target (lossless: first two tokens), against the tree rule on the same trees
(never fewer tokens), and the vectorised round against the exact law by Monte Carlo (G-tests,
Bonferroni-corrected, fixed seeds). The positional law (frozen rows per start and depth, as on a
trace) equals the exact law on each start's window chain, block verification's on a chain and
the tree rule's at depth 1.
"""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction as Fr
from types import ModuleType

import numpy as np
import pandas as pd
import pytest
from multi_draft_reference import (
    DRAFT,
    LEVEL,
    PAIRS,
    TARGET,
    assert_lossless_law,
    assert_play_matches_law,
    stub,
)

from specsim.checks.schemes import scheme_checks
from specsim.exact import first_two_law, stationary_rates, target_joint, tv
from specsim.models.iid import chain_of_rows
from specsim.schemes import SCHEMES, Scheme, block, traversal, tree
from specsim.schemes.traversal import (
    BUDGET,
    INTERNAL_COST,
    SECONDS_PER_ENTRY,
    footprint,
    law,
    play,
    positional_cost,
    positional_law,
)
from specsim.schemes.tree import draft_tree, parents_of
from specsim.stats import gof_test
from specsim.verify import RULES

OTHER = PAIRS["other"]


def reference_round(p: list[list[Fr]], q: list[list[Fr]], shape: tuple[int, ...],
                    s: int) -> dict[tuple[int, ...], Fr]:
    """P(one round from s emits exactly this sequence): every assignment of tokens to the tree's
    nodes (each drawn from Q given its parent's token), then the post-order traversal with every
    accept outcome, each deletion updating the parent's (a, B) as the module docstring writes
    it."""
    parents = parents_of(shape).tolist()
    children: dict[int, list[int]] = defaultdict(list)
    for v, u in enumerate(parents):
        children[u].append(v)
    out: dict[tuple[int, ...], Fr] = defaultdict(Fr)

    def visit(toks: list[int], v: int, ctx: int, a: Fr, b: list[Fr], path: tuple[int, ...],
              weight: Fr) -> Fr:
        """Add v's accepted outcomes to ``out``; return ``weight`` x P(v is deleted)."""
        for ch in children[v]:
            x = toks[ch]
            a_x = min(Fr(1), a * b[x] / q[ctx][x])
            weight = visit(toks, ch, x, a_x, list(p[x]), (*path, x), weight)
            if weight == 0:
                return weight
            exc = [max(a * by - qy, Fr(0)) for by, qy in zip(b, q[ctx], strict=True)]
            mass = sum(exc)
            a, b = (mass / (mass + 1 - a) if mass + 1 - a > 0 else Fr(1),
                    [e / mass for e in exc] if mass > 0 else b)
        for y, by in enumerate(b):  # v is a leaf now: accepted w.p. a, the bonus from b
            out[(*path, y)] += weight * a * by
        return weight * (1 - a)

    def assign(i: int, toks: list[int], prob: Fr) -> None:
        if i == len(parents):
            assert visit(toks, -1, s, Fr(1), list(p[s]), (), prob) == 0  # the root stays
            return
        ctx = s if parents[i] < 0 else toks[parents[i]]
        for y, qy in enumerate(q[ctx]):
            if qy > 0:
                assign(i + 1, [*toks, y], prob * qy)

    assign(0, [], Fr(1))
    return {seq: pr for seq, pr in out.items() if pr > 0}


def _shape(text: str) -> tuple[int, ...]:
    return tuple(int(b) for b in text.split("x"))


@pytest.mark.parametrize("pair", ["blend", "other"])
@pytest.mark.parametrize("gamma", [1, 2, 4])
def test_chain_is_block_verification_and_depth_one_is_the_tree(pair: str, gamma: int) -> None:
    p, q = (TARGET, DRAFT) if pair == "blend" else OTHER
    ours = law(p, q, gamma, {"branches": "x".join(["1"] * gamma)})
    blk = block.law(p, q, gamma, {})
    for field in ("tokens", "next_state", "single", "pair"):
        np.testing.assert_allclose(getattr(ours, field), getattr(blk, field), rtol=0,
                                   atol=1e-12, err_msg=field)
    if gamma == 1:
        for k in (2, 3):
            mine, rrs = law(p, q, 1, {"branches": str(k)}), tree.law(p, q, 1, {"branches": str(k)})
            for field in ("tokens", "next_state", "single", "pair"):
                np.testing.assert_allclose(getattr(mine, field), getattr(rrs, field), rtol=0,
                                           atol=1e-12, err_msg=field)


@pytest.mark.parametrize("shape", ["1x1x1", "2x1x1", "2x2x1", "4x2x1", "3x3", "1x3"])
@pytest.mark.parametrize("pair", ["blend", "other"])
def test_lossless_and_never_below_the_tree_on_the_same_trees(shape: str, pair: str) -> None:
    p, q = (TARGET, DRAFT) if pair == "blend" else OTHER
    gamma = len(shape.split("x"))
    exact = law(p, q, gamma, {"branches": shape})
    assert_lossless_law(exact, p)
    base = tree.law(p, q, gamma, {"branches": shape})
    assert (exact.mean_tokens >= base.mean_tokens - 1e-12).all()  # from every context
    ours, theirs = (stationary_rates(x).tokens_per_round for x in (exact, base))
    assert ours > theirs  # strictly, on these dense tables


@pytest.mark.parametrize("shape", ["2x2x1", "3x3", "1x1x1"])
def test_play_matches_law(shape: str) -> None:
    p, q = TARGET, DRAFT
    size = p.shape[0]
    state = np.arange(120_000) % size
    gamma = len(shape.split("x"))
    sample = play(p, q, state, gamma, {"branches": shape}, np.random.default_rng(2026))
    exact = law(p, q, gamma, {"branches": shape})
    assert (sample.drafted == parents_of(_shape(shape)).size).all()
    last = sample.tokens[np.arange(state.size), sample.n_emitted - 1]
    assert np.array_equal(sample.next_state, last)
    assert_play_matches_law(sample, exact, state, next_state=True)


def test_play_verifies_the_trees_the_tree_rule_draws() -> None:
    """The round's first uniforms draft the tree as the tree rule does (the same seed, the
    same tokens): every emitted prefix is the path from the root to a node of that tree."""
    state = np.arange(3000) % 6
    parents = parents_of((2, 2)).tolist()
    toks = draft_tree(DRAFT, state, parents, np.random.default_rng(9))
    sample = play(TARGET, DRAFT, state, 2, {"branches": "2x2"}, np.random.default_rng(9))
    for i in range(state.size):
        path: dict[int, tuple[int, ...]] = {-1: ()}
        for v, u in enumerate(parents):
            path[v] = (*path[u], int(toks[i, v]))
        emitted = tuple(sample.tokens[i, : sample.n_emitted[i] - 1].tolist())
        assert emitted in set(path.values()), (i, emitted)
    again = play(TARGET, DRAFT, state, 2, {"branches": "2x2"}, np.random.default_rng(9))
    assert np.array_equal(again.tokens, sample.tokens)


def test_lossless_and_play_on_iid_stub() -> None:
    """The i.i.d. stub's frozen position-indexed chain (one round from its start)."""
    p, q, start = stub(3)  # 4 frozen positions
    exact = law(p, q, 2, {"branches": "3x2"})
    assert tv(first_two_law(exact, start), target_joint(p, start, 2)) <= 1e-12
    sample = play(p, q, np.full(60_000, start), 2, {"branches": "3x2"},
                  np.random.default_rng(78))
    tokens = np.bincount(sample.n_emitted, minlength=4)
    nxt = np.bincount(sample.next_state, minlength=p.shape[0])
    assert gof_test(tokens, exact.tokens[start]).p_value > LEVEL / 2
    assert gof_test(nxt, exact.next_state[start]).p_value > LEVEL / 2


@pytest.mark.parametrize(("knobs", "needle"), [
    ({}, "branches"), ({"branches": "2x0"}, "branches"), ({"branches": "2,2"}, "branches"),
    ({"branches": True}, "branches"), ({"branches": "64x64x64"}, "266304 nodes"),
    ({"branches": "2x2", "drafts": 2}, "branches"),
])
def test_bad_knobs_refused(knobs: dict, needle: str) -> None:
    for call in (lambda: law(TARGET, DRAFT, 2, knobs),
                 lambda: play(TARGET, DRAFT, np.zeros(3, dtype=int), 2, knobs,
                              np.random.default_rng(0))):
        with pytest.raises(ValueError, match=needle) as err:
            call()
        assert "\n" not in str(err.value) and "traversal" in str(err.value)
    if knobs:
        with pytest.raises(ValueError, match="branches"):
            Scheme.build("traversal", knobs, where="studies.x.knobs")


def test_depth_budget_and_footprint() -> None:
    with pytest.raises(ValueError, match="depth 2, but gamma=3"):
        law(TARGET, DRAFT, 3, {"branches": "2x2"})
    with pytest.raises(ValueError, match=r"branches '2x2' visits ~.* cell-rows"):
        law(TARGET, DRAFT, 2, {"branches": "2x2"}, budget=100)
    assert footprint(6, 6, 3, {"branches": "4x2x1"}, 1024).law is not None
    big = footprint(160, 160, 3, {"branches": "4x2x1"}, 1024)  # Monte Carlo only
    assert big.law is None and big.play.cells > 0
    assert footprint(160, 4, 3, {"branches": "4x2x1"}, 1024).law is not None  # sparse rows
    assert BUDGET == 2**26


def test_its_time_on_a_trace_needs_the_rows() -> None:
    """How much the positional recursion merges depends on the rows: without them the rule
    gives no estimate (a recorded trace is checked when its point job has it), with them
    the sample's cost scaled to the starts."""
    scheme = Scheme.build("traversal", {"branches": "2x2"})
    assert scheme.has_window_law and scheme.window_seconds(1000, 8, 2) is None
    p, q = _frozen_rows(5, 40, 2, 5)
    est = scheme.window_seconds(4000, 5, 2, (p, q))
    assert est == pytest.approx(100 * positional_cost(p, q, (2, 2), sample=40))


def test_registry_scheme_and_check() -> None:
    spec = RULES["traversal"]
    assert not SCHEMES["traversal"].tokenwise and spec.lossless and "2505.12398" in spec.source
    assert spec.same_drafts_as == "tree" and spec.at_least_same_drafts
    s = Scheme.build("traversal", {"branches": "2x02x1"})
    assert s.rule_segment == "traversal+branches=2x2x1" and s.depth == 3
    assert not spec.knobs[0].is_neutral("1x1")  # a chain is block verification, not Alg. 1
    row = {"model": "m", "draft": np.nan, "knob": np.nan, "alpha": np.nan, "gamma": 2,
           "temperature": 1.0, "policy": "fixed", "lossless": True, "tv_exact": 0.0,
           "verdict": "lossless", "p_value": 0.5, "tv_mc": 0.01, "tv_floor": 0.01,
           "power": 1.0, "p_value_vs_exact": 0.5, "tokens_se": 0.01, "batches": 16,
           "branches": "2x1"} | {k: np.nan for k in ("drafts", "lenience", "epsilon", "delta",
                                                      "threshold", "cap", "c")}
    rows = [row | {"rule": "tree", "tokens_exact": 2.0, "tokens_per_call": 2.0},
            row | {"rule": "traversal", "tokens_exact": 2.1, "tokens_per_call": 2.1},
            row | {"rule": "tree", "branches": "3", "gamma": 1, "tokens_exact": 1.8,
                   "tokens_per_call": 1.8},
            row | {"rule": "traversal", "branches": "3", "gamma": 1, "tokens_exact": 1.7,
                   "tokens_per_call": 1.7}]
    got = {name: ok for name, _, ok, _, _ in scheme_checks(pd.DataFrame(rows), 1e-3)
           if name.startswith("traversal_at_least_tree")}
    assert got == {"traversal_at_least_tree[m/gamma=2/T=1/traversal/branches=2x1/fixed]": True,
                   "traversal_at_least_tree[m/gamma=1/T=1/traversal/branches=3/fixed]": False}


def _frozen_rows(seed: int, n: int, depth: int, v: int) -> tuple[np.ndarray, np.ndarray]:
    """Random frozen rows p, q (n, depth+1, v) with zeros in both (p zero where q is not and
    vice versa), start 0's rows identical (every weight 1) and start 1's q one-hot."""
    rng = np.random.default_rng(seed)
    p, q = rng.random((2, n, depth + 1, v)) ** 3
    p[rng.random(p.shape) < 0.3] = 0.0
    q[rng.random(q.shape) < 0.3] = 0.0
    p[..., 0] += 0.05
    q[..., -1] += 0.05
    q[1] = np.eye(v)[rng.integers(0, v, depth + 1)]
    p, q = p / p.sum(axis=-1, keepdims=True), q / q.sum(axis=-1, keepdims=True)
    q[0] = p[0]
    return p, q


def _window_laws(rule: ModuleType, p: np.ndarray, q: np.ndarray, knobs: dict) -> np.ndarray:
    """Each start's law of the tokens a round emits, from ``rule``'s exact law on its window
    chain (the per-start route of specsim.traces.schemes)."""
    out = []
    for t in range(p.shape[0]):
        P, Q, first = chain_of_rows(p[t], q[t])
        out.append(rule.law(P, Q, p.shape[1] - 1, knobs).tokens[first])
    return np.array(out)


@pytest.mark.parametrize("shape", ["2", "3", "2x1", "1x2", "2x2", "3x2", "1x1x1", "2x1x1",
                                   "2x2x1", "1x2x2"])
@pytest.mark.parametrize("v", [2, 3, 5])
def test_positional_law_is_the_law_on_each_window_chain(shape: str, v: int) -> None:
    depth = len(_shape(shape))
    p, q = _frozen_rows(10 * v + depth, 5, depth, v)
    got = positional_law(p, q, _shape(shape))
    ref = _window_laws(traversal, p, q, {"branches": shape})
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert (got[:, 0] == 0).all() and (got >= 0).all()
    assert np.array_equal(positional_law(p, q, _shape(shape), chunk=1), got)  # a start a chunk
    np.testing.assert_allclose(got[0, -1], 1.0, atol=1e-12)  # identical rows: all accepted


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_positional_chain_is_block_and_depth_one_is_the_tree(depth: int) -> None:
    p, q = _frozen_rows(depth, 4, depth, 4)
    ones = positional_law(p, q, (1,) * depth)
    np.testing.assert_allclose(ones, _window_laws(block, p, q, {}), rtol=0, atol=1e-12)
    if depth == 1:
        for k in (2, 3):
            rrs = _window_laws(tree, p, q, {"branches": str(k)})
            np.testing.assert_allclose(positional_law(p, q, (k,)), rrs, rtol=0, atol=1e-12)


def test_positional_law_on_the_iid_stub_and_its_cost() -> None:
    """The stub's frozen rows (20 tokens, one start) as the chain's law from its start state;
    the cost estimate scales its sample's work to N starts, grows with the tree, and where
    every weight is 1 (identical rows) counts one merged cell per start and child."""
    P, Q, start = stub(2)
    v = 20
    p = np.stack([P[start, :v], *(P[d * v, (d + 1) * v:(d + 2) * v] for d in range(2))])[None]
    q = np.stack([Q[start, :v], *(Q[d * v, (d + 1) * v:(d + 2) * v] for d in range(2))])[None]
    got = positional_law(p, q, (3, 2))
    np.testing.assert_allclose(got[0], law(P, Q, 2, {"branches": "3x2"}).tokens[start],
                               rtol=0, atol=1e-12)
    many_p, many_q = np.repeat(p, 700, axis=0), np.repeat(q, 700, axis=0)
    one = positional_cost(p, q, (3, 2))
    assert positional_cost(many_p, many_q, (3, 2)) == pytest.approx(700 * one, rel=1e-12)
    assert positional_cost(many_p, many_q, (3, 2), sample=700) == pytest.approx(700 * one)
    assert positional_cost(p, q, (2, 2)) < positional_cost(p, q, (4, 3))
    merged = INTERNAL_COST * v * 3 + 3 * (v * 2)  # the root's row, then one cell per child
    assert positional_cost(p, p, (3, 2)) == pytest.approx(merged * SECONDS_PER_ENTRY)
    assert one > positional_cost(p, p, (3, 2))


@pytest.mark.parametrize(("rows", "shape"), [((3, 3, 4), (2,)), ((3, 2, 4), (0,)),
                                             ((3, 2), (2,)), ((3, 3, 4), ())])
def test_positional_law_refuses_bad_rows(rows: tuple[int, ...], shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="positional"):
        positional_law(np.full(rows, 0.25), np.full(rows, 0.25), shape)
