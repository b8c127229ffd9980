"""The ``optimal`` draft-length policy (:mod:`specsim.schemes.optimal`): its DP optimum against a
brute force over every deterministic policy of the drafted path, its upper bound against the
other policies, its exact law against Monte Carlo of its vectorised round, and its refusals."""

from __future__ import annotations

import copy
import itertools

import mc
import numpy as np
import pytest
from conftest import SCHEMA

from specsim.config import validate_config
from specsim.errors import ConfigError
from specsim.exact import first_two_law, stationary, stationary_rates, target_joint, tv
from specsim.grid import build_grid
from specsim.models.maths import blend, random_table
from specsim.schemes import SCHEMES, Scheme, optimal, schemes_of_study, tokenwise


def _tables(seed: int, size: int, sharp: float = 1.5) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.ones(size) / sharp, size)
    Q = rng.dirichlet(np.ones(size) / sharp, size)
    acc, rej = tokenwise.correct_tables(P, Q)
    return P, Q, acc, rej


def _path_round(P, Q, acc, rej, s0: int, stops: dict[tuple[int, ...], bool], gamma: int):
    """(E tokens, E drafted, next-context law) of one round from s0 under a deterministic
    policy of the drafted path (``stops[path]``: stop after drafting ``path``), enumerated
    path by path: rejection at position j emits j tokens (from reject of x_{j-1}); all g
    drafts accepted emits g + 1 (the bonus from P of x_g)."""
    size = P.shape[0]
    tokens = drafted = 0.0
    nxt = np.zeros(size)

    def walk(path: tuple[int, ...], mass: float, pi: float) -> None:
        nonlocal tokens, drafted
        last = path[-1] if path else s0
        d = len(path)
        if d == gamma or stops[path]:
            tokens += mass * pi * (d + 1)
            nxt[:] += mass * pi * P[last]
            drafted += mass * d
            return
        for x in range(size):
            if Q[last, x] == 0:
                continue
            a = acc[last, x]
            tokens += mass * Q[last, x] * pi * (1 - a) * (d + 1)
            nxt[:] += mass * Q[last, x] * pi * (1 - a) * rej[last]
            walk((*path, x), mass * Q[last, x], pi * a)

    walk((), 1.0, 1.0)
    return tokens, drafted, nxt


def _brute_force(P, Q, acc, rej, gamma: int, c: float) -> float:
    """The best long-run tokens per unit cost over every deterministic policy mapping each
    start's drafted path to stop / go on (stationary across rounds)."""
    size = P.shape[0]
    nodes = [p for d in range(gamma) for p in itertools.product(range(size), repeat=d)]
    per_start = []
    for s0 in range(size):
        rounds = []
        for bits in itertools.product((False, True), repeat=len(nodes)):
            rounds.append(_path_round(P, Q, acc, rej, s0, dict(zip(nodes, bits, strict=True)),
                                      gamma))
        per_start.append(rounds)
    best = -np.inf
    for combo in itertools.product(*[range(len(r)) for r in per_start]):
        rows = [per_start[s][i] for s, i in enumerate(combo)]
        K = np.array([r[2] for r in rows])
        w = stationary(K)
        ratio = sum(w[s] * rows[s][0] for s in range(size)) / sum(
            w[s] * (1 + c * rows[s][1]) for s in range(size))
        best = max(best, ratio)
    return float(best)


@pytest.mark.parametrize(("seed", "size", "gamma", "c"),
                         [(1, 2, 3, 0.1), (2, 2, 2, 0.3), (3, 3, 2, 0.05), (4, 2, 3, 0.6)])
def test_dp_optimum_equals_brute_force(seed: int, size: int, gamma: int, c: float) -> None:
    P, Q, acc, rej = _tables(seed, size)
    sol = optimal.solve(P, Q, acc, rej, gamma, c)
    brute = _brute_force(P, Q, acc, rej, gamma, c)
    assert sol.gain == pytest.approx(brute, rel=1e-10)
    assert sol.gain <= sol.upper <= sol.gain * (1 + 1e-10)
    law = Scheme.build("correct", {}, "optimal", {"c": c}).law(P, Q, gamma)
    r = stationary_rates(law)
    assert r.tokens_per_round / (1 + c * r.drafted_per_round) == pytest.approx(sol.gain,
                                                                                rel=1e-12)


@pytest.mark.parametrize(("rule", "knobs"), [("lenient", {"lenience": 0.5}),
                                              ("typical", {"epsilon": 0.3, "delta": 0.3})])
def test_any_tokenwise_rule_dp_optimum_equals_brute_force(rule: str, knobs: dict) -> None:
    P, Q, _, _ = _tables(21, 2)
    tables = SCHEMES[rule].tables(P, Q, knobs)
    assert tables is not None
    acc, rej = tables
    sol = optimal.solve(P, Q, acc, rej, 3, 0.1)
    assert sol.gain == pytest.approx(_brute_force(P, Q, acc, rej, 3, 0.1), rel=1e-10)
    law = Scheme.build(rule, knobs, "optimal", {"c": 0.1}).law(P, Q, 3)
    r = stationary_rates(law)
    assert r.tokens_per_round / (1 + 0.1 * r.drafted_per_round) == pytest.approx(sol.gain,
                                                                                  rel=1e-12)


def _speedup(scheme: Scheme, P, Q, gamma: int, c: float) -> float:
    r = stationary_rates(scheme.law(P, Q, gamma))
    return r.tokens_per_round / (1 + c * r.drafted_per_round)


@pytest.mark.parametrize("seed", range(5))
def test_upper_bound_of_every_policy(seed: int) -> None:
    """On random tables no fixed γ <= cap, confidence threshold or heuristic schedule (cap <=
    the optimal's γ) beats the optimum; the optimum is at least the best fixed γ."""
    size, cap = 3 + seed % 2, 4
    P, Q, acc, rej = _tables(10 + seed, size)
    for c in (0.02, 0.2):
        sol = optimal.solve(P, Q, acc, rej, cap, c)
        tol = 1e-12 * sol.upper
        others = [(Scheme.build("correct"), g) for g in range(1, cap + 1)]
        others += [(Scheme.build("correct", {}, "confidence", {"threshold": t}), g)
                   for t in (0.1, 0.3, 0.5, 0.8) for g in (2, cap)]
        others += [(Scheme.build("correct", {}, "heuristic", {"cap": cap}), g)
                   for g in range(1, cap + 1)]
        values = [_speedup(s, P, Q, g, c) for s, g in others]
        assert max(values) <= sol.upper + tol
        assert sol.gain >= max(values[:cap]) - tol  # at least the best fixed γ


def test_optimal_beats_best_fixed_on_seed_med() -> None:
    """On the program's tables the optimum is strictly above the best fixed γ <= 5."""
    P = random_table(1, 2.5, 6)
    Q = blend(P, random_table(2, 2.5, 6), 0.55)
    c = 0.05
    best = max(_speedup(Scheme.build("correct"), P, Q, g, c) for g in range(1, 6))
    opt = _speedup(Scheme.build("correct", {}, "optimal", {"c": c}), P, Q, 5, c)
    assert opt > best * 1.02


def test_play_matches_law_and_lossless() -> None:
    P, Q, _, _ = _tables(7, 3)
    gamma, c = 4, 0.1
    scheme = Scheme.build("correct", {}, "optimal", {"c": c})
    law = scheme.law(P, Q, gamma)
    assert tv(first_two_law(law, 0), target_joint(P, 0, 2)) < 1e-12
    assert np.allclose(law.tokens.sum(axis=1), 1) and np.allclose(law.next_state.sum(axis=1), 1)
    rng = np.random.default_rng(5)
    n = 200_000
    for s in range(3):
        out = scheme.play(P, Q, np.full(n, s), gamma, rng)
        hist = np.bincount(out.n_emitted, minlength=gamma + 2) / n
        se = np.sqrt(law.tokens[s] * (1 - law.tokens[s]) / n) + 1e-12
        # 3 x (6 + 3 + 1) comparisons at mc.FAIL_PROB: ~5.9 SE each; a bias of 8.3 SE fails
        mc.assert_close(hist, se, law.tokens[s], assertions=30, slack=1e-9)
        nxt = np.bincount(out.next_state, minlength=3) / n
        se = np.sqrt(law.next_state[s] * (1 - law.next_state[s]) / n) + 1e-12
        mc.assert_close(nxt, se, law.next_state[s], assertions=30, slack=1e-9)
        d = out.drafted.astype(float)
        mc.assert_close(d.mean(), d.std() / np.sqrt(n), law.drafted[s], assertions=30,
                        slack=1e-9)
        # the tokens of a round are its drafts then its final token
        rows = np.arange(n)
        assert np.all(out.tokens[rows, out.n_emitted - 1] == out.next_state)


def test_knobs_and_refusals() -> None:
    with pytest.raises(ValueError, match="outside the domain of c"):
        Scheme.build("correct", {}, "optimal", {"c": 0.0})
    with pytest.raises(ValueError, match=r"gamma=12.*draft paths"):
        optimal.check({"c": 0.1}, 12, 6)
    with pytest.raises(ValueError, match="needs a token-wise rule"):
        Scheme.build("block", {}, "optimal", {"c": 0.1})
    found = schemes_of_study(["correct"], ["optimal"], {}, "studies.x", [0.05, 0.2])
    assert [dict(s.policy_knobs) for s in found] == [{"c": 0.05}, {"c": 0.2}]
    found = schemes_of_study(["correct"], ["optimal"], {"c": [0.1]}, "studies.x", [0.05])
    assert [dict(s.policy_knobs) for s in found] == [{"c": 0.1}]
    size = Scheme.build("correct", {}, "optimal", {"c": 0.1}).footprint(6, 6, 5, 1024)
    assert size.law is not None and size.states == 6


def test_a_cap_too_large_to_solve_is_refused_before_any_job(tiny_config: dict) -> None:
    cfg = copy.deepcopy(tiny_config)
    cfg["studies"] = {"p": {"analysis": "schemes", "models": ["seed_good"], "gamma": [12],
                            "rule": ["correct"], "policy": ["optimal"], "c": [0.1]}}
    with pytest.raises(ConfigError) as err:
        build_grid(validate_config(cfg, SCHEMA))
    msg = str(err.value)
    assert msg.startswith("studies.p.gamma: gamma=12") and "draft paths" in msg and "\n" not in msg
    cfg["studies"]["p"]["gamma"] = [3]
    (point,) = build_grid(validate_config(cfg, SCHEMA)).points
    assert point.path.count("policy~optimal+c=0.1") == 1


@pytest.mark.parametrize("seed", range(3))
def test_the_certified_bound_holds_beyond_the_solved_cap(seed: int) -> None:
    """optimal.bound from the cap-2 optimum bounds the exact cap-5 optimum and every policy
    drafting at most 5 tokens; at the solved cap it is the optimum itself."""
    P, Q, acc, rej = _tables(30 + seed, 3)
    c = 0.05
    at_cap, top = optimal.bound(P, Q, acc, rej, 2, c, [2, 5])
    assert at_cap == pytest.approx(optimal.solve(P, Q, acc, rej, 2, c).gain, rel=1e-12)
    assert optimal.bound(P, Q, acc, rej, 2, c, [5]) == [top]  # one DP serves every cap
    assert optimal.solve(P, Q, acc, rej, 5, c).gain <= top * (1 + 1e-12)
    heuristic = Scheme.build("correct", {}, "heuristic", {"cap": 5})
    assert max(_speedup(heuristic, P, Q, g, c) for g in range(1, 6)) <= top * (1 + 1e-12)
