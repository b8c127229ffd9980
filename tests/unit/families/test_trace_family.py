"""The ``trace`` model family: config, identity, the positional DP against brute force, Monte
Carlo against exact, schemes and policies on traces, and the tables of trace models."""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path
from typing import Any

import mc
import numpy as np
import pytest
from conftest import SCHEMA
from trace_files import grid_of, make_trace, refusal

from specsim import exact
from specsim.errors import ConfigError
from specsim.families import family_of, model_identity
from specsim.job import describe
from specsim.measures import measure_of
from specsim.schemes import Scheme
from specsim.schemes.heuristic import next_length
from specsim.traces import positional
from specsim.traces import schemes as ts
from specsim.traces.format import write_trace
from specsim.traces.frozen import chain_of_rows, dense_rows, window_chain


# ------------------------------------------------------------------ the DP against brute force
def brute_force(go: np.ndarray, halt: np.ndarray, cont: np.ndarray, gamma: int,
                cap: int = 0) -> tuple[float, float, float]:
    """(E[calls], E[drafts], E[rounds]) to traverse one document by enumerating every outcome
    of every position (accepted or not, drafting stops after it or not): a position is drafted
    in one round only, so the traversal is a deterministic function of the outcomes."""
    T = go.size
    law = (go, halt, cont - go, 1.0 - cont - halt)  # (accept, stop): (1,0) (1,1) (0,0) (0,1)
    e_calls = e_drafts = 0.0
    for outcome in itertools.product(range(4), repeat=T):
        prob = np.prod([law[o][s] for s, o in enumerate(outcome)])
        if prob == 0:
            continue
        t, g, calls, drafts = 0, gamma, 0, 0
        while t < T:
            calls += 1
            accepted, leading = 0, True
            for i in range(1, g + 1):
                s = t + i - 1
                if s >= T:
                    break
                drafts += 1
                leading = leading and outcome[s] in (0, 1)
                accepted += leading
                if outcome[s] in (1, 3):  # drafting stops after this draft
                    break
            emitted = min(accepted + 1, T - t)
            if cap:
                g = min(g + 2, cap) if accepted == g else max(g - 1, 1)
            t += emitted
        e_calls += prob * calls
        e_drafts += prob * drafts
    return e_calls, e_drafts, e_calls


@pytest.mark.parametrize("gamma,cap,stop", [(1, 0, False), (3, 0, False), (2, 0, True),
                                            (3, 0, True), (2, 4, False), (1, 3, False)])
def test_traversal_dp_matches_brute_force_enumeration(gamma: int, cap: int, stop: bool) -> None:
    rng = np.random.default_rng(gamma * 10 + cap)
    T = 7
    accept = rng.uniform(0.2, 0.9, T)
    if stop:  # P(stop | accepted), P(stop | rejected)
        s_acc, s_rej = rng.uniform(0.0, 0.5, T), rng.uniform(0.0, 0.5, T)
    else:
        s_acc = s_rej = np.zeros(T)
    go, halt = accept * (1 - s_acc), accept * s_acc
    cont = go + (1 - accept) * (1 - s_rej)
    doc_start = np.array([0, T])
    gammas = tuple(range(1, cap + 1)) if cap else (gamma,)
    laws = [ts.tokenwise_laws(go, halt, doc_start, g, cont) for g in gammas]
    step = (lambda g, full: next_length(g, full, cap)) if cap else None
    sched = ts.ScheduleLaws(gammas, tuple(e for e, _ in laws), np.stack([d for _, d in laws]),
                            gamma - 1 if cap else 0, step, None)
    r = ts.rates(sched, doc_start)
    calls, drafts, _ = brute_force(go, halt, cont, gamma, cap)
    assert r.calls[0] == pytest.approx(calls, rel=1e-12)
    assert r.drafted_per_round * r.calls.sum() == pytest.approx(drafts, rel=1e-12)
    assert r.tokens_per_call == pytest.approx(T / calls, rel=1e-12)
    if not cap and not stop:  # the foundation's DP for token-wise rules gives the same
        law = positional.positional_law(go, doc_start, gamma)
        assert law.calls[0] == pytest.approx(calls, rel=1e-12)


def test_one_draft_length_schedule_is_the_positional_traverse() -> None:
    tr = make_trace([9, 14, 3, 20], top_k=10)
    beta = positional.acceptance(tr, "correct")
    for g in (1, 2, 5):
        law = positional.positional_law(beta, tr.doc_start, g)
        e, d = ts.tokenwise_laws(beta, np.zeros_like(beta), tr.doc_start, g)
        sched = ts.ScheduleLaws((g,), (e,), d[None, :], 0, None, None)
        calls, visits = ts.traverse_schedule(sched, tr.doc_start)
        np.testing.assert_allclose(e, law.emitted, atol=1e-15)
        np.testing.assert_allclose(calls, law.calls, rtol=1e-13)
        np.testing.assert_allclose(visits[0], law.visits, rtol=1e-12, atol=1e-15)


# ------------------------------------------------------------------ schemes on windows
@pytest.mark.parametrize("scheme", [
    Scheme.build("correct"), Scheme.build("lenient", {"lenience": 0.4}),
    Scheme.build("typical"), Scheme.build("correct", policy="confidence",
                                          policy_knobs={"threshold": 0.3})])
def test_tokenwise_start_laws_are_the_schemes_law_on_each_window(scheme: Scheme) -> None:
    tr = make_trace([6, 11], vocab=8, top_k=3, seed=3)
    g = 3
    laws = ts.schedule_laws(tr, scheme, g)
    for t in range(tr.n_positions):
        P, Q, first = window_chain(tr, t, g + 1)
        want = scheme.law(P, Q, g)
        remaining = int(tr.doc_start[1 if t < 6 else 2]) - t
        cut = want.tokens[first].copy()  # a round emits at most the tokens left
        if remaining <= g:
            cut[remaining] += cut[remaining + 1 :].sum()
            cut[remaining + 1 :] = 0.0
        np.testing.assert_allclose(laws.emitted[0][t], cut, atol=1e-12)
        if remaining > g:
            assert laws.drafted[0, t] == pytest.approx(want.drafted[first], abs=1e-12)


WHOLE_DRAFT_ON_TRACES = [
    Scheme.build("block"), Scheme.build("multi_draft", {"drafts": 2}),
    Scheme.build("multi_draft", {"drafts": 3}), Scheme.build("spectr", {"drafts": 3}),
    Scheme.build("multi_draft_wor", {"drafts": 2}),
    Scheme.build("multi_draft_optimal", {"drafts": 2}),
    Scheme.build("tree", {"branches": "2x2"}), Scheme.build("tree", {"branches": "3x1"}),
    Scheme.build("traversal", {"branches": "2x2"}),
    Scheme.build("traversal", {"branches": "1x1"})]


@pytest.mark.parametrize("scheme", WHOLE_DRAFT_ON_TRACES, ids=lambda s: s.rule_segment)
def test_whole_draft_start_laws_are_the_schemes_law_from_every_state(
        scheme: Scheme, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rule's window law (lumped survivors, a tree's DP over nodes, traversal's merged
    recursion, block's paths) is its own exact law on each start's window chain, computed the
    Markov way, at every start -- windows running past a document's end included (cut to the
    tokens left) -- and does not depend on how starts and kernel rows are chunked."""
    from specsim.schemes import survivors

    tr = make_trace([5, 4, 1, 3], vocab=6, top_k=2, seed=4)
    g = 2
    laws = ts.schedule_laws(tr, scheme, g)
    doc_end = np.repeat(tr.doc_start[1:], np.diff(tr.doc_start))
    for t in range(tr.n_positions):
        P, Q, first = window_chain(tr, t, g + 1)
        want = scheme.law(P, Q, g)
        cut = want.tokens[first].copy()
        left = int(doc_end[t]) - t
        if left <= g:  # a round emits at most the tokens left
            cut[left] += cut[left + 1:].sum()
            cut[left + 1:] = 0.0
        np.testing.assert_allclose(laws.emitted[0][t], cut, atol=1e-13)
        if left > g:
            assert laws.drafted[0, t] == pytest.approx(want.drafted[first], abs=1e-12)
    monkeypatch.setattr(ts, "WINDOW_CHUNK", 3)
    monkeypatch.setattr(survivors, "BUDGET", 1)  # one kernel row at a time
    again = ts.schedule_laws(tr, scheme, g)
    assert np.array_equal(again.emitted[0], laws.emitted[0])
    assert np.array_equal(again.drafted, laws.drafted)


@pytest.mark.parametrize("scheme,by_depth", [
    (Scheme.build("multi_draft", {"drafts": 3}), [0, 3, 6, 9]),
    (Scheme.build("tree", {"branches": "2x2x1"}), [0, 2, 6, 10]),
    (Scheme.build("block"), [0, 1, 2, 3])], ids=lambda x: getattr(x, "rule", ""))
def test_whole_draft_rounds_near_a_documents_end_draft_only_the_depths_left(
        scheme: Scheme, by_depth: list[int]) -> None:
    tr = make_trace([7, 3], vocab=5, top_k=2, seed=8)
    laws = ts.schedule_laws(tr, scheme, 3)
    rem = np.array([7, 6, 5, 4, 3, 2, 1, 3, 2, 1])
    np.testing.assert_array_equal(laws.drafted[0], np.array(by_depth)[np.minimum(rem, 3)])
    for t, r in enumerate(rem):  # a round emits at most the tokens left
        assert (laws.emitted[0][t, r + 1:] == 0.0).all()
        assert laws.emitted[0][t].sum() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("scheme,gamma,why", [
    (Scheme.build("multi_draft_optimal", {"drafts": 2}), 1, "~[0-9]+ s, more than 90 s"),
    (Scheme.build("multi_draft_wor", {"drafts": 4}), 1, "~[0-9]+ s, more than 90 s"),
    (Scheme.build("block"), 3, "block at gamma=3 .* ~[0-9]+ s, more than 90 s")])
def test_window_laws_beyond_their_time_are_refused(scheme: Scheme, gamma: int, why: str) -> None:
    """The default DAG's recorded traces (32768 positions, W = 32) by each rule's estimate."""
    ts.check_work(32768, 32, Scheme.build("multi_draft", {"drafts": 4}), 4)  # ~seconds
    ts.check_work(32768, 32, Scheme.build("tree", {"branches": "4x2x1"}), 3)
    ts.check_work(32768, 32, Scheme.build("block"), 2)
    with pytest.raises(ValueError, match=why):
        ts.check_work(32768, 32, scheme, gamma)


def test_correct_scheme_on_a_full_support_trace_is_the_tokenwise_positional_law() -> None:
    tr = make_trace([40, 25, 60], vocab=8, top_k=8, seed=5)  # top_k = vocab: no tail
    assert tr.p_tail.max() < 1e-15 and tr.q_tail.max() < 1e-15
    for g in (1, 3):
        r = ts.rates(ts.schedule_laws(tr, Scheme.build("correct"), g), tr.doc_start)
        law = positional.positional_law(positional.acceptance(tr, "correct"), tr.doc_start, g)
        assert r.tokens_per_call == pytest.approx(law.tokens_per_call, rel=1e-12)
        assert r.tokens_per_call != pytest.approx(1.0)


def test_same_pair_everywhere_reproduces_the_iid_position_numbers() -> None:
    """A long document whose every position has the same pair is the stub's ``share:
    position``: Eq. 1 at that pair's α, up to the end of the document (relative O(1/T))."""
    tr = make_trace([20000], vocab=12, top_k=12, same=True, seed=6)
    a = float(tr.alpha[0])
    for g in (1, 4):
        law = positional.positional_law(positional.acceptance(tr, "correct"), tr.doc_start, g)
        want = float(exact.expected_tokens(a, g))
        assert law.tokens_per_call == pytest.approx(want, rel=5e-4)
        rate, std, _ = law.accept_by_position()
        np.testing.assert_allclose(rate, a, rtol=1e-9)
        np.testing.assert_allclose(std, 0.0, atol=1e-9)


@pytest.mark.parametrize("scheme", [
    Scheme.build("correct"), Scheme.build("correct", policy="heuristic",
                                          policy_knobs={"cap": 6}),
    Scheme.build("correct", policy="confidence", policy_knobs={"threshold": 0.3}),
    Scheme.build("block")])
def test_monte_carlo_covers_the_exact_scheme_rates(scheme: Scheme) -> None:
    tr = make_trace([30, 50, 20, 7], vocab=8, top_k=4, seed=7)
    laws = ts.schedule_laws(tr, scheme, 3)
    r = ts.rates(laws, tr.doc_start)
    width = (6 if scheme.policy == "heuristic" else 3) + 2
    hist, drafted = ts.simulate(tr, laws, r.visits, np.random.SeedSequence(11), 4096, 32, 32,
                                width)
    rounds = hist.sum(axis=1)
    # 32 batches: each bound is ~7 SE (mc.bound(2, 31)); a bias of ~9.5 SE fails 99% of the time
    mc.assert_batch_mean_close(hist @ np.arange(width), rounds, r.tokens_per_call, assertions=2)
    mc.assert_batch_mean_close(drafted, rounds, r.drafted_per_round, assertions=2)
    np.testing.assert_allclose(r.tokens_law.sum(), 1.0, rtol=1e-12)
    assert r.tokens_law @ np.arange(r.tokens_law.size) == pytest.approx(r.tokens_per_call)


# ------------------------------------------------------------------ config and identity
@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "traces").mkdir()
    write_trace(tmp_path / "traces" / "t.parquet", make_trace([12, 9, 15], seed=8))
    return tmp_path


def config(model: dict[str, Any], **study: Any) -> dict[str, Any]:
    return {"seed": 3,
            "budget": {"chains": 256, "rounds": 8, "burn_in": 0, "batches": 8,
                       "equivalence_trials": 2000, "scheme_trials": 2000},
            "models": {"tr": model},
            "studies": {"s": {"analysis": "accept_curve", "models": ["tr"], "gamma": [2],
                              **study}}}


def test_a_file_trace_model_builds_a_grid(in_tmp: Path) -> None:
    g = grid_of(config({"family": "trace", "file": "traces/t.parquet"}))
    (p,) = g.points
    assert p.spec.family == "trace" and p.spec.draft == "recorded" and p.spec.vocab == 16
    assert p.family.inputs(p.spec) == ()


def test_bad_trace_configs_are_refused_in_one_line_naming_the_key(in_tmp: Path) -> None:
    (in_tmp / "traces" / "bad.parquet").write_bytes(b"not parquet at all")
    msg = refusal(config({"family": "trace", "file": "traces/bad.parquet"}))
    assert msg.startswith("models.tr.file: traces/bad.parquet"), msg
    msg = refusal(config({"family": "trace", "file": "traces/none.parquet"}))
    assert "models.tr.file" in msg and "no such trace file" in msg
    msg = refusal(config({"family": "trace", "pair": "ngram_o2"}))
    assert msg.startswith("models.tr.pair: 'ngram_o2'") and "realtext" in msg
    cfg = config({"family": "trace", "pair": "ngram_o9"}) | {
        "realtext": {"model": {"draft_orders": [1, 2]}}}
    msg = refusal(cfg)
    assert msg.startswith("models.tr.pair: 'ngram_o9'") and "ngram_o2" in msg
    msg = refusal(config({"family": "trace", "file": "traces/t.parquet"}, temperature=[0.5]))
    assert msg.startswith("studies.s.temperature:") and "'tr'" in msg
    msg = refusal(config({"family": "trace", "file": "traces/t.parquet",
                          "draft": {"kind": "calibrated"}}))
    assert msg.startswith("models.tr.draft:") and "calibrated" in msg
    msg = refusal(config({"family": "trace", "file": "traces/t.parquet"}, rule=["continue"]))
    assert msg.startswith("studies.s.rule:")
    msg = refusal(config({"family": "trace", "file": "traces/t.parquet", "sigma": 1.0}))
    assert msg.startswith("models.tr.sigma:")
    msg = refusal(config({"family": "trace"}))
    assert msg.startswith("models.tr:") and "file" in msg and "pair" in msg


def test_a_pair_trace_model_is_a_recorded_file_input(in_tmp: Path) -> None:
    cfg = config({"family": "trace", "pair": "ngram_o2"}) | {"realtext": {}}
    (p,) = grid_of(cfg).points
    assert p.family.inputs(p.spec) == ("results/traces/ngram_o2.parquet",)
    ident = model_identity(p.spec)
    assert ident["trace"]["pair"] == "ngram_o2"
    assert set(ident["trace"]["realtext"]) == {"corpus", "model", "trace"}
    cfg2 = copy.deepcopy(cfg)
    cfg2["realtext"] = {"model": {"draft_orders": [2, 3]}}
    (p2,) = grid_of(cfg2).points
    assert p2.point_id != p.point_id  # the recording's settings are in the identity
    cfg3 = copy.deepcopy(cfg)
    cfg3["realtext"] = {"speculative": {"chains": 64, "batches": 8}}
    (p3,) = grid_of(cfg3).points
    assert p3.point_id == p.point_id  # a section the recording does not read is not


def test_identity_is_stable_and_follows_the_file(in_tmp: Path) -> None:
    cfg = config({"family": "trace", "file": "traces/t.parquet"})
    (a,) = grid_of(cfg).points
    (b,) = grid_of(cfg).points
    assert a.point_id == b.point_id
    assert describe(grid_of(cfg), a) == describe(grid_of(cfg), b)
    ident = model_identity(a.spec)
    assert ident == {"family": "trace", "vocab": 16, "draft": {"kind": "recorded"},
                     "trace": {"file": "traces/t.parquet", "sha256": ident["trace"]["sha256"]}}
    write_trace(in_tmp / "traces" / "t.parquet", make_trace([12, 9, 15], seed=9))
    (c,) = grid_of(cfg).points
    assert c.point_id != a.point_id


def test_job_description_of_other_models_has_no_trace_fields(tiny_config: dict) -> None:
    grid = grid_of(tiny_config)
    desc = describe(grid, grid.points[0])
    assert not any(k.startswith("trace_") for k in desc["point"]["spec"])


# ------------------------------------------------------------------ the measures on a point
def _point(g: Any, measure: str) -> Any:
    return next(p for p in g.points if p.measure == measure)


@pytest.mark.parametrize("analysis,extra", [
    ("accept_curve", {}), ("accept_curve", {"rule": ["greedy"]}),
    ("equivalence", {"rule": ["correct"]}),
    ("schemes", {"rule": ["correct"], "policy": ["heuristic"], "knobs": {"cap": [4]}}),
    ("schemes", {"rule": ["multi_draft"]}),
    ("schemes", {"rule": ["tree"], "knobs": {"branches": ["2x2"]}, "gamma": [2]})])
def test_each_measure_runs_on_a_trace_point_and_covers(in_tmp: Path, analysis: str,
                                                       extra: dict) -> None:
    cfg = config({"family": "trace", "file": "traces/t.parquet", "vocab": 5})
    cfg["studies"]["s"] |= {"analysis": analysis, **extra}
    cfg["budget"] |= {"chains": 2048, "rounds": 16, "batches": 64}
    g = grid_of(cfg)
    (p,) = g.points
    m = measure_of(p.measure)
    budget = describe(g, p)["budget"]
    sim, ref = m.simulate(p, budget, 3), m.exact(p, budget, 3)
    row = {**p.to_record(), **sim, **ref}
    est = m.estimate(row, 1e-3)
    if analysis == "equivalence":
        assert ref["tv_exact"] < 1e-12 and est["p_value"] > mc.p_floor()
        return
    # not the 95% columns (a 5% coin flip per CPU: tests/mc.py) but the SE behind them, at
    # mc.FAIL_PROB over the test's two comparisons: 64 batches, ~6 SE; a 8.5 SE bias fails
    dof = int(row["batches"]) - 1
    mc.assert_close(est["tokens_per_round"], est["tokens_se"], ref["tokens_exact"], dof=dof,
                    assertions=2, what="tokens")
    assert ref["exact_method"].startswith("positional_dp")
    second = "accept" if analysis == "accept_curve" else "drafted"
    se = mc.se_of_interval(est[f"{second}_ci_low"], est[f"{second}_ci_high"], dof)
    exact_second = ref["accept_rate_exact" if second == "accept" else "drafted_exact"]
    mc.assert_close(est["accept_rate" if second == "accept" else "drafted_per_round"], se,
                    exact_second, dof=dof, assertions=2, what=second)
    if analysis != "accept_curve":
        assert ref["tv_exact"] < 1e-12  # every rule here is lossless on the frozen pairs


def test_example_rows_pool_the_support_into_vocab_tokens(in_tmp: Path) -> None:
    g = grid_of(config({"family": "trace", "file": "traces/t.parquet", "vocab": 3}))
    spec = g.points[0].spec
    p, q = family_of(spec).example_rows(spec, 1.0, None, 4)
    assert p.shape == q.shape == (3,)
    assert p.sum() == pytest.approx(1.0) and q.sum() == pytest.approx(1.0)
    assert p[0] >= p[1]  # the most likely support token first
    json.dumps(model_identity(spec))


# ------------------------------------------------------------------ the DAG on a trace model


def test_a_whole_draft_rule_too_costly_on_a_trace_file_is_refused(in_tmp: Path) -> None:
    cfg = config({"family": "trace", "file": "traces/t.parquet"}, analysis="schemes",
                 rule=["block"], gamma=[12])
    msg = refusal(cfg)
    assert msg.startswith("studies.s.rule: trace model 'tr': block at gamma=12"), msg
    cfg["studies"]["s"]["gamma"] = [2]
    assert len(grid_of(cfg).points) == 1


def test_a_lossless_check_too_large_to_enumerate_keeps_the_exact_long_run(
        in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def too_large(*args: Any) -> None:
        raise ValueError("block needs more than max_paths draft paths")

    monkeypatch.setattr(Scheme, "law", too_large)  # the equivalence chain's law only
    cfg = config({"family": "trace", "file": "traces/t.parquet"}, analysis="schemes",
                 rule=["correct"], gamma=[3])
    g = grid_of(cfg)
    (p,) = g.points
    ref = measure_of(p.measure).exact(p, describe(g, p)["budget"], 3)
    assert "lossless mc_only" in ref["exact_method"] and np.isnan(ref["tv_exact"])
    assert 1.0 < ref["tokens_exact"] < 4.0 and ref["joint_exact"] == []


def test_optimal_policy_runs_on_a_trace_and_is_refused_where_its_check_cannot(in_tmp: Path
                                                                              ) -> None:
    """The optimal policy builds on a trace file; a cap whose lossless check (the Markov
    solution on the equivalence chain) would not fit is refused before any job."""
    model = {"family": "trace", "file": "traces/t.parquet"}
    g = grid_of(config(model, analysis="schemes", rule=["correct"], policy=["optimal"],
                       c=[0.1]))
    assert [p.scheme.policy for p in g.points] == ["optimal"]
    msg = refusal(config(model, analysis="schemes", rule=["correct"], policy=["optimal"],
                         c=[0.1], gamma=[6]))
    assert msg.startswith("studies.s.gamma: trace model 'tr'") and "gamma=6" in msg, msg


# ------------------------------------------------------------------ schemes_trees on a trace
def test_trace_rates_agree_with_the_token_wise_and_scheme_laws() -> None:
    """A trace's exact rates for schemes_trees: a chain tree is Algorithm 1 (the token-wise
    positional law), a shape's tree is the tree rule's point value, Sequoia's acceptance
    vector starts at the mean acceptance of the dense rows."""
    from specsim.schemes.multi_draft import rrs
    from specsim.schemes.tree import parents_of, tree_law
    from specsim.tables.schemes_trees import _row
    from specsim.traces.rates import TraceRates

    tr = make_trace([30, 50, 20, 7], vocab=8, top_k=4, seed=7)
    rates = TraceRates(tr)
    for g in (1, 3):
        assert rates.tree(parents_of((1,) * g)) == pytest.approx(
            rates.scheme(Scheme.build("correct"), g), rel=1e-12)
    # an irregular, depth-first tree: the DP over nodes against tree_law on every window chain
    par = np.array([-1, 0, 1, 0, -1, 4])
    per_start = ts.window_laws(tr, 3, lambda p, q, at: (np.array(
        [tree_law(*chain_of_rows(p[at[i]], q[at[i]])[:2], par).tokens[-1]
         for i in range(at.shape[0])]),
        np.array([0.0, 2.0, 5.0, 6.0])))  # levels of 2, 3 and 1 nodes
    want = ts.rates(ts.ScheduleLaws((3,), (per_start[0],), per_start[1][None, :], 0, None, None),
                    tr.doc_start).tokens_per_call
    assert rates.tree(par) == pytest.approx(want, rel=1e-12)
    # Sequoia's vector: each position's RRS acceptance after j rejections, by multi_draft.rrs
    p, q = dense_rows(tr, np.arange(tr.n_positions))
    _, acc, reach = rrs(p, q, 3)
    brute = (reach[:3] * acc.sum(axis=-1)).mean(axis=1) / reach[:3].mean(axis=1)
    np.testing.assert_allclose(rates.acceptance(3), brute, rtol=1e-12)
    row = _row(rates, "2x2")
    ks = {k: rates.scheme(Scheme.build("multi_draft", {"drafts": k}), 6 // k) for k in (2, 3, 6)}
    assert row["best_k"] == max(ks, key=ks.__getitem__)
    assert row["k_draft_tokens_exact"] == max(ks.values())
    assert row["chain_tokens_exact"] == rates.scheme(Scheme.build("correct"), 6)


def test_traversal_on_a_trace_is_timed_from_the_traces_own_windows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Traversal's time depends on how many cells merge: without the trace no estimate (a
    recorded trace is checked in its point job), with it the sampled windows' cost, refused
    above the cap."""
    tr = make_trace([30, 50, 20, 7], vocab=8, top_k=4, seed=7)
    scheme = Scheme.build("traversal", {"branches": "2x2"})
    ts.check_work(10**9, tr.width, scheme, 2)  # no rows: nothing to refuse on
    ts.check_work(tr.n_positions, tr.width, scheme, 2, tr)
    monkeypatch.setattr(ts, "MAX_WINDOW_SECONDS", 1e-9)
    with pytest.raises(ValueError, match=r"traversal\+branches=2x2 at gamma=2 .* more than"):
        ts.check_work(tr.n_positions, tr.width, scheme, 2, tr)
    ts.check_work(10**9, tr.width, scheme, 2)


def test_an_equivalence_chain_too_large_to_enumerate_is_refused_at_config_time(
        in_tmp: Path) -> None:
    """The frozen window's states (chain_size) are the job's p.shape[0]; past
    budget.max_enumeration the config refuses what the job would leave Monte Carlo only."""
    from specsim.config import load_grid

    cfg = config({"family": "trace", "file": "traces/t.parquet"}, analysis="equivalence",
                 rule=["correct"])
    g = grid_of(cfg)
    (p,) = g.points
    s = p.family.chain_size(p)[0]
    assert p.family.equivalence_model(p)[0].shape[0] == s
    load_grid(copy.deepcopy(cfg), SCHEMA)
    cfg["budget"]["max_enumeration"] = s**3 - 1
    with pytest.raises(ConfigError) as err:
        load_grid(copy.deepcopy(cfg), SCHEMA)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("studies.s: model 'tr'")
    assert f"lower the vocab or gamma (a chain of {s} states)" in msg
    ref = measure_of(p.measure).exact(p, describe(grid_of(cfg), p)["budget"], 3)
    assert ref["exact_method"].startswith("mc_only (") and ref["exact_method"][9:-1] in msg
