"""specsim.schemes.tree: SpecInfer token trees verified by multi-step speculative sampling.

The exact law is checked against a brute-force reference (every drawn tree, every accept
outcome, in exact rational arithmetic), against Algorithm 1 for a chain (all ones), against the
target (lossless: first two tokens), against the chain of the same depth (never fewer tokens),
and the vectorised round against the exact law by Monte Carlo (G-tests, Bonferroni-corrected,
fixed seeds).
"""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction as Fr
from pathlib import Path

import numpy as np
import pytest
from multi_draft_reference import (
    DRAFT,
    LEVEL,
    P3,
    PAIRS,
    Q3,
    Q3B,
    TARGET,
    assert_law_matches,
    assert_lossless_law,
    assert_play_matches_law,
    stub,
)

from specsim.config import load_grid
from specsim.errors import ConfigError
from specsim.exact import first_two_law, round_law, stationary_rates, target_joint, tv
from specsim.models.iid import chain_of_rows
from specsim.schemes import Scheme
from specsim.schemes.tree import law, parents_of, play, play_tree, tree_law, window_tree_law
from specsim.stats import gof_test

SCHEMA = Path(__file__).resolve().parents[3] / "workflow" / "schemas" / "config.schema.yaml"
OTHER = PAIRS["other"]


def _residual(r: list[Fr], q: list[Fr]) -> list[Fr]:
    d = [max(a - b, Fr(0)) for a, b in zip(r, q, strict=True)]
    z = sum(d)
    return [x / z for x in d] if z > 0 else list(r)


def reference_round(p: list[list[Fr]], q: list[list[Fr]], parents: list[int],
                    s: int) -> dict[tuple[int, ...], Fr]:
    """P(one round from s emits exactly this sequence): every assignment of tokens to the tree's
    nodes (each drawn from Q given its parent's token), then every outcome of every accept test
    from the root down, one at a time, as the algorithm is written."""
    children: dict[int, list[int]] = defaultdict(list)
    for v, u in enumerate(parents):
        children[u].append(v)
    out: dict[tuple[int, ...], Fr] = defaultdict(Fr)

    def walk(toks: list[int], node: int, ctx: int, emitted: tuple[int, ...], prob: Fr) -> None:
        r = list(p[ctx])
        for ch in children[node]:
            y = toks[ch]
            a = min(Fr(1), r[y] / q[ctx][y])
            if a > 0:
                walk(toks, ch, y, (*emitted, y), prob * a)
            prob *= 1 - a
            if prob == 0:
                return
            r = _residual(r, q[ctx])
        for b, rb in enumerate(r):  # all rejected (a leaf: the bonus from P)
            out[(*emitted, b)] += prob * rb

    def assign(i: int, toks: list[int], prob: Fr) -> None:
        if i == len(parents):
            walk(toks, -1, s, (), prob)
            return
        ctx = s if parents[i] < 0 else toks[parents[i]]
        for y, qy in enumerate(q[ctx]):
            if qy > 0:
                assign(i + 1, [*toks, y], prob * qy)

    assign(0, [], Fr(1))
    return {seq: pr for seq, pr in out.items() if pr > 0}


@pytest.mark.parametrize("draft", [Q3, Q3B], ids=["Q3", "Q3B"])
@pytest.mark.parametrize("parents", [[-1, -1, -1, 0], [-1, -1, 0]], ids=["3 then 1", "uneven"])
def test_tree_law_of_any_tree_equals_brute_force_rational_reference(draft: list[list[Fr]],
                                                                    parents: list[int]) -> None:
    """Trees no ``branches`` shape spells (shapes: tests/test_scheme_contract.py)."""
    p, q = np.array(P3, dtype=float), np.array(draft, dtype=float)
    exact = tree_law(p, q, parents)
    np.testing.assert_array_equal(exact.drafted, len(parents))
    for s in range(3):
        ref = reference_round(P3, draft, parents, s)
        assert sum(ref.values()) == 1
        assert_law_matches(exact, s, ref)


def test_parents_of_shapes() -> None:
    assert parents_of((2, 2)).tolist() == [-1, -1, 0, 0, 1, 1]
    assert parents_of((1, 1, 1)).tolist() == [-1, 0, 1]
    assert parents_of((3, 1)).size == 6


@pytest.mark.parametrize("pair", ["blend", "other"])
@pytest.mark.parametrize("gamma", [1, 2, 4])
def test_chain_is_algorithm_1(pair: str, gamma: int) -> None:
    p, q = (TARGET, DRAFT) if pair == "blend" else OTHER
    ours = law(p, q, gamma, {"branches": "x".join(["1"] * gamma)})
    alg1 = round_law(p, q, gamma, "correct")
    np.testing.assert_allclose(ours.tokens, alg1.tokens, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ours.next_state, alg1.next_state, rtol=0, atol=1e-12)


@pytest.mark.parametrize("shape", ["1x1x1", "2x1x1", "2x2x1", "4x2x1", "3x3", "1x3"])
@pytest.mark.parametrize("pair", ["blend", "other"])
def test_lossless_and_never_below_the_chain(shape: str, pair: str) -> None:
    p, q = (TARGET, DRAFT) if pair == "blend" else OTHER
    gamma = len(shape.split("x"))
    exact = law(p, q, gamma, {"branches": shape})
    assert_lossless_law(exact, p)
    chain = stationary_rates(round_law(p, q, gamma, "correct")).tokens_per_round
    ours = stationary_rates(exact).tokens_per_round
    assert ours >= chain - 1e-12
    if shape != "1x1x1":
        assert ours > chain  # a wider tree accepts strictly more on these dense tables


@pytest.mark.parametrize(("shape", "parents"), [("2x2x1", None), ("3x3", None),
                                                (None, [-1, -1, 0, 2, 1])])
def test_play_matches_law(shape: str | None, parents: list[int] | None) -> None:
    p, q = TARGET, DRAFT
    size = p.shape[0]
    state = np.arange(120_000) % size
    rng = np.random.default_rng(2025)
    if shape is not None:
        gamma = len(shape.split("x"))
        sample = play(p, q, state, gamma, {"branches": shape}, rng)
        exact = law(p, q, gamma, {"branches": shape})
        nodes = parents_of(tuple(int(b) for b in shape.split("x"))).size
    else:
        sample = play_tree(p, q, state, parents, rng)
        exact = tree_law(p, q, parents)
        nodes = len(parents)
    assert (sample.drafted == nodes).all()
    last = sample.tokens[np.arange(state.size), sample.n_emitted - 1]
    assert np.array_equal(sample.next_state, last)
    assert_play_matches_law(sample, exact, state, next_state=True)


def test_play_is_reproducible() -> None:
    state = np.arange(1000) % 6
    a = play(TARGET, DRAFT, state, 2, {"branches": "2x2"}, np.random.default_rng(5))
    b = play(TARGET, DRAFT, state, 2, {"branches": "2x2"}, np.random.default_rng(5))
    assert np.array_equal(a.tokens, b.tokens) and np.array_equal(a.next_state, b.next_state)


@pytest.mark.parametrize(("knobs", "needle"), [
    ({}, "branches"), ({"branches": "2x0"}, "branches"), ({"branches": "2x"}, "branches"),
    ({"branches": 2.5}, "branches"), ({"branches": "2,2"}, "branches"),
    ({"branches": True}, "branches"), ({"branches": 0}, "branches"),
    ({"branches": "-1x2"}, "branches"), ({"branches": "64x64x64"}, "266304 nodes"),
    ({"branches": "2x2", "drafts": 2}, "branches"),
])
def test_bad_knobs_refused(knobs: dict, needle: str) -> None:
    for call in (lambda: law(TARGET, DRAFT, 2, knobs),
                 lambda: play(TARGET, DRAFT, np.zeros(3, dtype=int), 2, knobs,
                              np.random.default_rng(0))):
        with pytest.raises(ValueError, match=needle) as err:
            call()
        assert "\n" not in str(err.value)
    if knobs:  # without knobs the registry's default shape runs
        with pytest.raises(ValueError, match="branches"):
            Scheme.build("tree", knobs, where="studies.x.knobs")


def test_depth_must_be_gamma_and_budget_named() -> None:
    with pytest.raises(ValueError, match="depth 2, but gamma=3"):
        law(TARGET, DRAFT, 3, {"branches": "2x2"})
    with pytest.raises(ValueError, match="cells"):
        law(TARGET, DRAFT, 2, {"branches": "2x2"}, budget=100)
    with pytest.raises(ValueError, match="parents"):
        tree_law(TARGET, DRAFT, [0, -1])


def test_scheme_segment_and_study_pairing(tiny_config: dict) -> None:
    s = Scheme.build("tree", {"branches": "2x02x1"})
    assert s.rule_segment == "tree+branches=2x2x1" and s.depth == 3
    assert Scheme.build("correct").depth is None
    assert Scheme.build("tree", {"branches": 3}).rule_segment == "tree+branches=3"
    tiny_config["studies"] = {"t": {"analysis": "schemes", "models": ["seed_good"],
                                    "gamma": [2, 3], "rule": ["correct", "tree"],
                                    "knobs": {"branches": ["2x2x1", "3x3", "1x1"]}}}
    grid = load_grid(tiny_config, SCHEMA)
    got = sorted((p.rule, p.gamma, p.scheme.rule_segment) for p in grid.points)
    assert got == [("correct", 2, "correct"), ("correct", 3, "correct"),
                   ("tree", 2, "tree+branches=1x1"), ("tree", 2, "tree+branches=3x3"),
                   ("tree", 3, "tree+branches=2x2x1")]
    tiny_config["studies"]["t"]["gamma"] = [2]
    with pytest.raises(ConfigError, match=r"knobs.branches: '2x2x1' has depth 3"):
        load_grid(tiny_config, SCHEMA)
    tiny_config["studies"]["t"]["knobs"]["branches"] = ["2y2"]
    with pytest.raises(ConfigError, match="branches"):
        load_grid(tiny_config, SCHEMA)


def test_play_matches_law_and_lossless_on_iid_stub() -> None:
    """The i.i.d. stub's frozen position-indexed chain (one round from its start)."""
    p, q, start = stub(3)  # 4 frozen positions
    exact = law(p, q, 2, {"branches": "3x2"})
    assert tv(first_two_law(exact, start), target_joint(p, start, 2)) <= 1e-12
    state = np.full(60_000, start)
    sample = play(p, q, state, 2, {"branches": "3x2"}, np.random.default_rng(78))
    tokens = np.bincount(sample.n_emitted, minlength=4)
    nxt = np.bincount(sample.next_state, minlength=p.shape[0])
    assert gof_test(tokens, exact.tokens[start]).p_value > LEVEL / 2
    assert gof_test(nxt, exact.next_state[start]).p_value > LEVEL / 2


@pytest.mark.parametrize("parents", [[-1, -1, -1, 0, 0, 1, 3, 3, 6], [-1, 0, 0, 0, 1],
                                     [-1, -1, 0, 1, 2, 3], [-1]])
def test_window_law_on_any_tree_is_the_law_on_each_window_chain(parents: list[int]) -> None:
    """On position-indexed rows (a trace's windows) the DP over nodes with one number per start
    is tree_law on the start's window chain, irregular trees and leaves above the last depth
    included; drafted tokens through depth d count the tree's first d levels."""
    rng = np.random.default_rng(len(parents))
    par = np.asarray(parents)
    levels = np.zeros(par.size, dtype=int)
    for v, u in enumerate(par):
        levels[v] = 1 if u < 0 else levels[u] + 1
    depth = int(levels.max())
    a = rng.random((2, 4, depth + 1, 5)) ** 3
    a[a < 0.15] = 0.0
    a[..., 0] += 1e-3  # every row has mass
    p, q = a / a.sum(axis=-1, keepdims=True)
    got, drafted = window_tree_law(p, q, par)
    for i in range(4):
        P, Q, first = chain_of_rows(p[i], q[i])
        want = tree_law(P, Q, par)
        np.testing.assert_allclose(got[i], want.tokens[first], atol=1e-14)
        assert drafted[-1] == want.drafted[first] == par.size
    np.testing.assert_array_equal(np.diff(drafted), np.bincount(levels, minlength=depth + 1)[1:])
