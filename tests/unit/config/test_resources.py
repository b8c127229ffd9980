"""Every exact law and simulation states its memory and work before it runs
(:mod:`specsim.resources`): the estimate bounds what a point job really uses (within a
factor), grows with what drives it, is what the job declares, and a config whose point would
need more than a point job may declare is refused naming the point and the estimate."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conftest import SCHEMA

from specsim import job, work
from specsim.config import load_grid
from specsim.errors import ConfigError
from specsim.resources import measure_job
from specsim.schemes import POLICIES, SCHEME_RULES, SCHEMES, Scheme

BUDGET = {"chains": 1024, "rounds": 16, "burn_in": 4, "batches": 16,
          "equivalence_trials": 20000, "scheme_trials": 20000, "quadrature_pairs": 65536}


def markov(vocab: int) -> dict[str, Any]:
    return {"family": "markov", "vocab": vocab, "target": {"seed": 1, "sharpness": 2.5},
            "draft": {"kind": "blend", "weight": 0.55, "other": {"seed": 2, "sharpness": 2.5}}}


def one_study(model: dict[str, Any], **study: Any) -> dict[str, Any]:
    return {"seed": 1, "budget": BUDGET, "models": {"m": model},
            "studies": {"s": {"models": ["m"], "gamma": [4]} | study}}


FLAT = BUDGET | {"chains": 64, "rounds": 2, "burn_in": 1, "batches": 2, "scheme_trials": 4096}
IID = {"family": "iid", "vocab": 64, "sigma": 1.0, "noise": 0.3, "share": "round", "seed": 7,
       "draft": {"kind": "noise"}}
# Small cases whose arrays are a sizeable part of the peak (the interpreter is ~130 MB): the
# Markov engine's samplers, the enumerated law, the token-wise law's (S, S, S) pieces, the
# heuristic's (S cap, S cap) tables and stationary solve, the quadrature's pairs.
CASES = {
    "long_run": one_study(markov(256), analysis="accept_curve"),
    "equivalence": one_study(markov(64), analysis="equivalence", rule=["continue"]),
    "tokenwise": one_study(markov(160), analysis="schemes", rule=["correct"]),
    "heuristic": one_study(markov(16), analysis="schemes", rule=["correct"],
                           policy=["heuristic"], knobs={"cap": [64]}),
    "iid": one_study(IID, analysis="accept_curve"),
    "tree": one_study(markov(160), analysis="schemes", rule=["tree"], gamma=[3],
                      knobs={"branches": ["4x2x1"]}),
    "traversal": one_study(markov(48), analysis="schemes", rule=["traversal"], gamma=[2],
                           knobs={"branches": ["2x2"]}),
    "spectr": one_study(markov(96), analysis="schemes", rule=["spectr"], knobs={"drafts": [3]}),
    "multi_draft_optimal": one_study(markov(8), analysis="schemes", rule=["multi_draft_optimal"],
                                     knobs={"drafts": [4]}),
    # a flat tree's drafts dominate: ~7 (n, N) arrays while they are drawn and the (N, N)
    # children table twice (3 n N alone would estimate ~500 MB of a ~600 MB peak)
    "tree_flat": one_study(markov(6), analysis="schemes", rule=["tree"], gamma=[1],
                           knobs={"branches": ["2048"]}) | {"budget": FLAT},
    "traversal_flat": one_study(markov(6), analysis="schemes", rule=["traversal"], gamma=[1],
                                knobs={"branches": ["2048"]}) | {"budget": FLAT},
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_estimate_bounds_the_measured_peak_within_a_factor(case: str) -> None:
    grid = load_grid(copy.deepcopy(CASES[case]), SCHEMA)
    (point,) = grid.points
    estimate = work.footprint(grid, point).bytes
    rss, _ = measure_job(job.describe(grid, point))
    # at most 3x: a small traversal tree's estimate (the widest level's arrays counted 7 times
    # over, as a 4096-node one needs) is 2.2x its peak here, 2.55x with numpy's SIMD dispatch
    # off (make test-portability), where a job's resident baseline is ~25 MB lower
    assert rss <= estimate <= 3 * rss, (case, estimate / 1e6, rss / 1e6)


@pytest.mark.parametrize("rule", SCHEME_RULES)
@pytest.mark.parametrize("policy", list(POLICIES))
def test_every_rule_and_policy_estimates_its_law_and_its_rounds(rule: str, policy: str) -> None:
    if policy != "fixed" and not SCHEMES[rule].tokenwise:
        pytest.skip("whole-draft rules run at a fixed draft length only")
    knobs = {"threshold": 0.4} if policy == "confidence" else {}
    scheme = Scheme.build(rule, {}, policy, knobs)
    small, large = (scheme.footprint(s, s, 3, 4096) for s in (8, 32))
    assert small.law is not None and large.law is not None
    assert 0 < small.law.cells < large.law.cells and 0 < small.law.flops < large.law.flops
    assert 0 < small.play.cells < large.play.cells and small.states <= large.states
    more = scheme.footprint(8, 8, 3, 16384)
    assert more.play.cells > small.play.cells  # a chunk of more chains holds more


def test_the_heuristic_law_grows_like_vocab_times_cap_squared() -> None:
    def law(vocab: int, cap: int) -> Any:
        out = Scheme.build("correct", {}, "heuristic", {"cap": cap}).footprint(vocab, vocab, 2, 1)
        return out.law
    base, double = law(16, 64), law(16, 128)
    assert double.cells > 3.5 * base.cells  # two (S cap)^2 tables dominate
    assert law(48, 160).cells * 8 > 1e9  # vocab 48, cap 160: 2.03 GB measured, beyond 1 GB


def test_a_point_beyond_what_a_job_may_declare_is_refused_naming_it(
        tiny_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = copy.deepcopy(tiny_config)
    cfg["models"]["big"] = markov(1024)
    cfg["studies"]["x"] = {"analysis": "schemes", "models": ["big"], "gamma": [4],
                           "rule": ["correct"], "c": [0.1]}
    with pytest.raises(ConfigError) as err:
        load_grid(cfg, SCHEMA)
    msg = str(err.value)
    assert msg.startswith("studies.x: model 'big' (vocab 1024), rule correct, policy fixed")
    assert "exact round law (1024 states) needs ~" in msg and "GB, more than the 16 GB" in msg
    # the heuristic's law at vocab 48, cap 160, against a lower ceiling
    monkeypatch.setattr(work, "MAX_POINT_MB", 1000)
    cfg = copy.deepcopy(tiny_config)
    cfg["models"]["mid"] = markov(48)
    cfg["studies"]["policies"] |= {"models": ["mid"], "policy": ["heuristic"],
                                   "knobs": {"cap": [160]}}
    with pytest.raises(ConfigError, match=r"^studies\.policies: model 'mid' \(vocab 48\), rule "
                       r"correct, policy heuristic, cap=160, gamma 3: the heuristic exact law "
                       r"\(7680 states: vocab 48 x cap 160\) needs ~[0-9.]+ GB, more than the "
                       r"1 GB a point job may declare"):
        load_grid(cfg, SCHEMA)


def test_a_point_job_declares_its_estimate_at_least_the_floor(
        tiny_config: dict[str, Any]) -> None:
    cfg = copy.deepcopy(tiny_config)
    cfg["models"]["mid"] = markov(48)
    cfg["studies"]["policies"] |= {"models": ["mid"], "policy": ["heuristic"],
                                   "knobs": {"cap": [160]}}
    grid = load_grid(cfg, SCHEMA)
    declared = {p.model: work.declared_mb(grid, p) for p in grid.points}
    assert declared["seed_good"] == work.POINT_MB  # tiny points: the floor
    (big,) = [p for p in grid.points if p.model == "mid"]
    assert declared["mid"] == -(-int(work.footprint(grid, big).bytes) // 10**6) > 2000
    minutes = {p.model: work.declared_minutes(grid, p) for p in grid.points}
    assert minutes["seed_good"] == work.POINT_MINUTES  # and the runtime, the same way
    assert minutes["mid"] >= 2 * work.footprint(grid, big).seconds / 60 > work.POINT_MINUTES


def test_the_exact_stage_counts_against_max_work(tiny_config: dict[str, Any]) -> None:
    cfg = copy.deepcopy(tiny_config)
    cfg["models"]["mid"] = markov(48)
    cfg["studies"]["policies"] |= {"models": ["mid"], "policy": ["heuristic"],
                                   "knobs": {"cap": [160]}}
    grid = load_grid(copy.deepcopy(cfg), SCHEMA)
    rounds = work.estimate(grid)
    assert work.core_seconds(grid) * work.ROUNDS_PER_CORE_SECOND > 100 * rounds  # the law's
    cfg["max_work"] = 10 * rounds  # the simulated rounds alone fit
    with pytest.raises(ConfigError, match=r"^max_work: .* exact stage's arithmetic, about "
                                          r"[0-9.]+ core-(minutes|hours)"):
        load_grid(cfg, SCHEMA)


def test_every_point_of_every_family_measure_and_rule_has_an_estimate(
        tiny_config: dict[str, Any]) -> None:
    grid = load_grid(tiny_config, SCHEMA)
    kinds = {(p.spec.family, p.measure, p.rule, p.policy) for p in grid.points}
    assert {"markov", "iid"} <= {k[0] for k in kinds}
    assert {"correct", "greedy", "no_resample", "continue"} <= {k[2] for k in kinds}
    for point in grid.points:
        fp = work.footprint(grid, point)
        assert fp.cells > 0 and fp.seconds > 0 and fp.what, point.path
    # the classic rules' DP: `continue` carries γ more (S, S) tables than `correct`
    from specsim.exact.footprints import round_dp_footprint
    assert round_dp_footprint(64, 8, keep_drafts=True).cells == \
        round_dp_footprint(64, 8).cells + 8 * 64**2
