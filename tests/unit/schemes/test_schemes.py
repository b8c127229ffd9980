"""The schemes of the literature on the rule and policy registries: knobs refused before any
job, the token-wise tables of lenience and typical acceptance, point paths and identities, and
one schemes point run end to end against its exact law.

The per-scheme algorithms have their own tests (test_scheme_block.py, test_scheme_multi_draft.py,
test_scheme_policies.py), each with an independent rational-arithmetic reference of one round.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from specsim import exact
from specsim.config import load_grid
from specsim.errors import ConfigError
from specsim.exact import first_two_law, stationary_rates
from specsim.job import describe, point_from
from specsim.models.maths import blend, random_table
from specsim.schemes import POLICIES, SCHEME_RULES, SCHEMES, Scheme, schemes_of_study
from specsim.schemes.lenient import tables as lenient_tables
from specsim.schemes.typical import tables as typical_tables
from specsim.schemes.typical import threshold as typical_threshold
from specsim.verify import CLASSIC_RULES, RULES, acceptance_probability, residual

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
P = random_table(1, 2.5)
Q = blend(P, random_table(2, 2.5), 0.55)


def _study(**over: Any) -> dict[str, Any]:
    return {"analysis": "schemes", "models": ["seed_good"], "gamma": [2],
            "rule": ["correct"], "c": [0.1]} | over


def _grid_with(config: dict[str, Any], study: dict[str, Any]) -> Any:
    cfg = copy.deepcopy(config)
    cfg["studies"] = {"s": study}
    return load_grid(cfg, SCHEMA)


# ---------------------------------------------------------------------------------------------
# 1. registries
# ---------------------------------------------------------------------------------------------
def test_every_scheme_rule_is_registered_with_its_module_and_source() -> None:
    schemes = [n for n, s in RULES.items() if s.accept == "scheme"]
    assert schemes == ["block", "multi_draft", "lenient", "typical", "tree", "spectr",
                       "multi_draft_optimal", "multi_draft_wor", "traversal"]
    assert sorted(SCHEME_RULES) == sorted(["correct", *schemes])
    for name in SCHEME_RULES:
        spec = RULES[name]  # type: ignore[index]
        assert spec.scheme is not None and SCHEMES[spec.scheme].name == spec.scheme
        assert name == "correct" or (spec.source and "arXiv" in spec.source), name
    assert set(CLASSIC_RULES) == {"correct", "greedy", "no_resample", "continue"}
    assert [RULES[n].lossless for n in schemes] == [  # type: ignore[index]
        True, True, False, False, True, True, True, True, True]
    assert [n for n in schemes if RULES[n].multi_draft] == [  # type: ignore[index]
        "multi_draft", "spectr", "multi_draft_optimal"]
    assert [n for n in schemes if RULES[n].bound] == ["multi_draft_optimal"]  # type: ignore[index]
    assert list(POLICIES) == ["fixed", "confidence", "heuristic", "optimal"]


def test_verify_refuses_scheme_rules_with_a_pointer() -> None:
    import specsim

    with pytest.raises(ValueError, match=r"specsim\.schemes\.block"):
        specsim.verify(P[:3][None], Q[:2][None], np.array([[0, 1]]), "block", rng=0)


# ---------------------------------------------------------------------------------------------
# 2. bad knobs: refused before any job runs, naming key and value
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("over", "fragments"), [
    ({"rule": ["multi_draft"], "knobs": {"drafts": [0]}}, ["studies.s.knobs.drafts", "0",
                                                           "integer [1, 64]"]),
    ({"rule": ["multi_draft"], "knobs": {"drafts": [2.5]}}, ["studies.s.knobs.drafts", "2.5"]),
    ({"rule": ["spectr"], "knobs": {"drafts": [65]}}, ["studies.s.knobs.drafts", "65"]),
    ({"models": ["stub"], "rule": ["multi_draft_wor"], "knobs": {"drafts": [5]}},
     ["studies.s.knobs.drafts", "drafts=5", "vocab 20", "1860480"]),
    ({"rule": ["multi_draft_optimal"], "knobs": {"drafts": [11]}},
     ["studies.s.knobs.drafts", "drafts=11", "vocab 6", "C(6+11-1, 11) = 4368", "3003"]),
    ({"rule": ["lenient"], "knobs": {"lenience": [1.5]}}, ["studies.s.knobs.lenience", "1.5",
                                                           "[0, 1]"]),
    ({"rule": ["lenient"], "knobs": {"lenience": [-0.1]}}, ["studies.s.knobs.lenience"]),
    ({"rule": ["typical"], "knobs": {"epsilon": [2.0]}}, ["studies.s.knobs.epsilon", "2.0"]),
    ({"policy": ["confidence"], "knobs": {"threshold": [1.2]}},
     ["studies.s.knobs.threshold", "1.2"]),
    ({"policy": ["heuristic"], "knobs": {"cap": [0]}}, ["studies.s.knobs.cap", "0"]),
    ({"rule": ["block"], "knobs": {"drafts": [2]}}, ["studies.s.knobs.drafts",
                                                     "no rule or policy of this study"]),
    ({"rule": ["correct"], "knobs": {"lenience": [0.5]}}, ["studies.s.knobs.lenience"]),
    ({"rule": ["block"], "policy": ["heuristic"]}, ["studies.s.policy", "no (rule, policy)"]),
    ({"rule": ["greedy"]}, ["studies.s.rule", "'greedy'", "not a scheme rule"]),
    ({"policy": ["heuristic"], "knobs": {"cap": [4]}, "gamma": [8]},
     ["studies.s.gamma", "gamma=8", "cap=4"]),
    ({"models": ["stub"], "policy": ["confidence"]}, ["studies.s.policy", "table models"]),
])
def test_bad_knobs_are_refused_naming_key_and_value(tiny_config: dict[str, Any],
                                                    over: dict[str, Any],
                                                    fragments: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        _grid_with(tiny_config, _study(**over))
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


@pytest.mark.parametrize(("study", "fragment"), [
    ({"analysis": "accept_curve", "models": ["seed_good"], "gamma": [2], "rule": ["block"]},
     "runs in a study with analysis: schemes"),
    ({"analysis": "accept_curve", "models": ["seed_good"], "gamma": [2],
      "knobs": {"drafts": [2]}}, "only a 'schemes' study"),
    ({"analysis": "accept_curve", "models": ["seed_good"], "gamma": [2],
      "policy": ["heuristic"]}, "only a 'schemes' study"),
])
def test_schemes_stay_in_schemes_studies(tiny_config: dict[str, Any], study: dict[str, Any],
                                         fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        _grid_with(tiny_config, study)


def test_a_study_runs_each_rule_at_its_own_knob_combinations() -> None:
    found = schemes_of_study(["correct", "block", "multi_draft", "typical"],
                             ["fixed", "confidence"],
                             {"drafts": [2, 3], "epsilon": [0.1, 0.2], "threshold": [0.3]}, "s")
    segs = [(s.rule_segment, s.policy_segment) for s in found]
    assert ("multi_draft+drafts=3", "fixed") in segs
    assert ("typical+epsilon=0.2+delta=0.3", "confidence+threshold=0.3") in segs
    assert ("block", "fixed") in segs and ("block", "confidence+threshold=0.3") not in segs
    assert len(segs) == 2 + 1 + 2 + 4  # correct x 2 policies, block, multi_draft x 2, typical x 4


def test_old_points_keep_their_identity_and_scheme_points_name_their_knobs(
        tiny_config: dict[str, Any]) -> None:
    grid = _grid_with(tiny_config, _study(rule=["correct", "multi_draft"],
                                          knobs={"drafts": [3]}))
    paths = sorted(p.path for p in grid.points)
    assert paths[1].endswith("rule~multi_draft+drafts=3/policy~fixed/measure~scheme"), paths
    for p in grid.points:
        assert grid.point_at(p.path) is p
        again = point_from(describe(grid, p))  # the job rebuilds the same point
        assert again.point_id == p.point_id and again.path == p.path
    plain = load_grid(copy.deepcopy(tiny_config), SCHEMA)
    assert all("/policy~fixed/" in p.path and "policy" not in p.identity()
               for p in plain.points if p.measure != "scheme")


# ---------------------------------------------------------------------------------------------
# 3. token-wise tables of the lossy rules
# ---------------------------------------------------------------------------------------------
def test_lenience_one_is_algorithm_1_and_zero_accepts_what_p_allows() -> None:
    acc, rej = lenient_tables(P, Q, {"lenience": 1.0})
    # identity is the claim: 1.0 * Q is Q bit for bit, then the same functions on the same input
    assert np.array_equal(acc, acceptance_probability(P, Q)) and np.array_equal(rej,
                                                                                residual(P, Q))
    acc0, rej0 = lenient_tables(P, Q, {"lenience": 0.0})
    assert np.array_equal(acc0, (P > 0).astype(float)) and np.allclose(rej0, P)
    acc5, _ = lenient_tables(P, Q, {"lenience": 0.5})
    assert np.allclose(acc5, np.minimum(1.0, P / (0.5 * Q))) and (acc5 >= acc).all()


def test_typical_acceptance_thresholds_by_entropy() -> None:
    p = np.array([[0.5, 0.3, 0.2], [1.0, 0.0, 0.0]])
    h = -(p[0] * np.log(p[0])).sum()
    assert np.allclose(typical_threshold(p, 0.09, 0.3), [min(0.09, 0.3 * np.exp(-h)), 0.09])
    acc, rej = typical_tables(p, p[::-1], {"epsilon": 0.25, "delta": 0.9})
    assert acc.tolist() == [[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]] and np.array_equal(rej, p)


# ---------------------------------------------------------------------------------------------
# 4. every scheme: exact law lossless where the registry says so, lossy otherwise
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("rule", "knobs", "policy", "pknobs"), [
    ("correct", {}, "fixed", {}),
    ("block", {}, "fixed", {}),
    ("multi_draft", {"drafts": 3}, "fixed", {}),
    ("lenient", {"lenience": 1.0}, "fixed", {}),
    ("lenient", {"lenience": 0.5}, "fixed", {}),
    ("typical", {}, "fixed", {}),
    ("correct", {}, "confidence", {"threshold": 0.4}),
    ("correct", {}, "heuristic", {"cap": 8}),
])
def test_exact_first_two_tokens_follow_the_registry(rule: str, knobs: dict[str, Any],
                                                    policy: str,
                                                    pknobs: dict[str, Any]) -> None:
    scheme = Scheme.build(rule, knobs, policy, pknobs)
    law = scheme.law(P, Q, 3)
    joint = first_two_law(law, scheme.start(0, 3, P.shape[0]))
    tv = exact.tv(joint, exact.target_joint(P, 0, 2))
    if scheme.lossless or knobs == {"lenience": 1.0}:
        assert tv < 1e-12, (rule, tv)
    else:
        assert tv > 1e-3, (rule, tv)
    rates = stationary_rates(law)
    tokens, drafted = rates.tokens_per_round, rates.drafted_per_round
    assert 1.0 <= tokens <= (8 if policy == "heuristic" else 3) + 1
    assert drafted <= (8 if policy == "heuristic" else 3) * dict(knobs).get("drafts", 1) + 1e-9


# ---------------------------------------------------------------------------------------------
# 5. lenience and typical acceptance against a scalar round written from the papers
# ---------------------------------------------------------------------------------------------
def _lenient_accept(p: np.ndarray, q: np.ndarray, x: int, lenience: float) -> float:
    """Leviathan et al. App. A.5: accept x ~ q w.p. min(1, p(x) / (l q(x)))."""
    return 1.0 if lenience * q[x] == 0 else min(1.0, p[x] / (lenience * q[x]))


def _lenient_reject(p: np.ndarray, q: np.ndarray, lenience: float) -> np.ndarray:
    r = np.array([max(p[y] - lenience * q[y], 0.0) for y in range(len(p))])
    return r / r.sum() if r.sum() > 0 else p


def _typical_accept(p: np.ndarray, x: int, eps: float, delta: float) -> float:
    """Medusa Sec. 2.3.1: accept x iff p(x) > min(eps, delta exp(-H(p)))."""
    h = -sum(v * np.log(v) for v in p if v > 0)
    return 1.0 if p[x] > min(eps, delta * np.exp(-h)) else 0.0


def _scalar_round(P: np.ndarray, Q: np.ndarray, ctx: int, gamma: int, accept, reject
                  ) -> dict[tuple[int, ...], float]:
    """Law of the emitted sequence of one round, by recursion over drafts: draft x ~ Q[c];
    accept w.p. accept(P[c], Q[c], x) and continue from x; else emit one token of
    reject(P[c], Q[c]) and stop; after gamma acceptances a bonus token from P[last]."""
    out: dict[tuple[int, ...], float] = {}

    def go(c: int, depth: int, prefix: tuple[int, ...], mass: float) -> None:
        if depth == gamma:
            for y, py in enumerate(P[c]):
                out[(*prefix, y)] = out.get((*prefix, y), 0.0) + mass * py
            return
        for x, qx in enumerate(Q[c]):
            if qx == 0:
                continue
            a = accept(P[c], Q[c], x)
            if a > 0:
                go(x, depth + 1, (*prefix, x), mass * qx * a)
            if a < 1:
                for y, ry in enumerate(reject(P[c], Q[c])):
                    key = (*prefix, y)
                    out[key] = out.get(key, 0.0) + mass * qx * (1 - a) * ry
    go(ctx, 0, (), 1.0)
    return out


@pytest.mark.parametrize(("rule", "knobs"), [
    ("lenient", {"lenience": 0.5}), ("lenient", {"lenience": 0.0}),
    ("typical", {"epsilon": 0.09, "delta": 0.3}), ("typical", {"epsilon": 0.3, "delta": 0.9}),
])
def test_lossy_rules_match_a_scalar_round_from_the_papers(rule: str,
                                                          knobs: dict[str, float]) -> None:
    if rule == "lenient":
        lenience = knobs["lenience"]

        def acc(p: np.ndarray, q: np.ndarray, x: int) -> float:
            if lenience == 0:  # the limit: every draft the target allows
                return 1.0 if p[x] > 0 else 0.0
            return _lenient_accept(p, q, x, lenience)

        def rej(p: np.ndarray, q: np.ndarray) -> np.ndarray:
            return _lenient_reject(p, q, lenience)
    else:
        def acc(p: np.ndarray, q: np.ndarray, x: int) -> float:
            return _typical_accept(p, x, knobs["epsilon"], knobs["delta"])

        def rej(p: np.ndarray, q: np.ndarray) -> np.ndarray:
            return p
    gamma = 3
    law = Scheme.build(rule, knobs).law(P, Q, gamma)
    for ctx in range(P.shape[0]):
        seqs = _scalar_round(P, Q, ctx, gamma, acc, rej)
        assert abs(sum(seqs.values()) - 1) < 1e-12
        tokens = np.zeros(gamma + 2)
        nxt = np.zeros(P.shape[0])
        for seq, m in seqs.items():
            tokens[len(seq)] += m
            nxt[seq[-1]] += m
        np.testing.assert_allclose(law.tokens[ctx], tokens, atol=1e-12)
        np.testing.assert_allclose(law.next_state[ctx], nxt, atol=1e-12)
        pair = np.zeros((P.shape[0],) * 2)
        for seq, m in seqs.items():
            if len(seq) >= 2:
                pair[seq[0], seq[1]] += m
        np.testing.assert_allclose(law.pair[ctx], pair, atol=1e-12)


@pytest.mark.parametrize(("rule", "knobs", "gamma"), [
    ("multi_draft", {"drafts": 3}, 3), ("spectr", {"drafts": 2}, 2),
    ("multi_draft_wor", {"drafts": 2}, 2), ("tree", {"branches": "3x1x2"}, 3),
    ("traversal", {"branches": "2x2"}, 2), ("block", {}, 2)])
def test_window_law_on_rows_met_by_index_is_the_law_on_the_gathered_windows(
        rule: str, knobs: dict[str, Any], gamma: int) -> None:
    """Rows given once each with ``at`` (a trace's windows overlap: start t meets rows
    t..t+γ, the last repeated at the end) give every rule's window law bit for bit as the
    gathered (n, γ+1, V) windows do; an index out of range or of the wrong shape is refused."""
    rng = np.random.default_rng(len(rule) + gamma)
    a = rng.random((2, 9, 5)) ** 3
    a[a < 0.15] = 0.0
    a[..., 0] += 1e-3  # every row has mass
    p, q = a / a.sum(axis=-1, keepdims=True)
    at = np.minimum(np.arange(7)[:, None] + np.arange(gamma + 1), 8)
    scheme = Scheme.build(rule, knobs)
    got, drafted = scheme.window_law(p, q, gamma, at)
    want, want_drafted = scheme.window_law(p[at], q[at], gamma)
    assert got.shape == (7, gamma + 2)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(drafted, want_drafted)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    for bad in (at + 1, at[:, :-1]):
        with pytest.raises(ValueError, match="at must be"):
            scheme.window_law(p, q, gamma, bad)
