"""Argmax drafting: the draft proposes its argmax, verified as a one-hot q.

Its tie rule; its exact law against an independent brute force on a tiny table; Monte Carlo
inside a CI of the exact value with failure probability <= 1e-6; losslessness (exact TV ~ 0);
the trace's argmax rows; identities, paths and config refusals.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps
from trace_files import grid_of, make_trace, refusal, rows

from specsim import exact
from specsim.families import markov_pair, model_identity
from specsim.job import describe
from specsim.models.maths import ARGMAX_TIE_TOL, argmax_draft, temper
from specsim.realtext_settings import (
    Settings,
    step_settings,
    tempered_trace_path,
    trace_settings,
)
from specsim.traces import positional
from specsim.traces.drafting import argmax_drafted
from specsim.traces.format import Trace, trace_meta, write_trace
from specsim.verify import acceptance_probability, residual

FAILURE = 1e-6  # the Monte Carlo checks fail on a correct engine with at most this probability
MARKOV = {"family": "markov", "vocab": 4, "target": {"seed": 5, "sharpness": 1.5},
          "draft": {"kind": "blend", "weight": 0.5, "other": {"seed": 6, "sharpness": 1.5}}}
BUDGET = {"chains": 4096, "rounds": 32, "burn_in": 8, "batches": 64,
          "equivalence_trials": 2000, "scheme_trials": 2000}


def config(model: dict[str, Any], **study: Any) -> dict[str, Any]:
    return {"seed": 11, "budget": dict(BUDGET), "models": {"m": model},
            "studies": {"s": {"analysis": "drafting", "models": ["m"], "gamma": [3],
                              "drafting": ["sample", "argmax"], **study}}}


# ------------------------------------------------------------------ the tie rule
def test_argmax_draft_is_one_hot_on_the_lowest_index_within_the_tie_tolerance() -> None:
    q = np.array([[0.2, 0.4, 0.4 - 1e-14, 0.0],  # a tie by the last bits: the lower index
                  [0.2, 0.4 - 1e-14, 0.4, 0.0],  # ... even when the later one is larger
                  [0.2, 0.4 - 1e-9, 0.4, 0.0],  # a real difference: the larger
                  [0.25, 0.25, 0.25, 0.25]])  # exact ties: the first
    out = argmax_draft(q)
    assert np.array_equal(out.argmax(axis=1), [1, 1, 2, 0])
    assert np.array_equal(out.sum(axis=1), np.ones(4)) and set(np.unique(out)) == {0.0, 1.0}
    assert 1e-14 < ARGMAX_TIE_TOL < 1e-9
    assert np.array_equal(argmax_draft(out), out)  # idempotent
    greedy = temper(rows(np.random.default_rng(1), 5, 6), 0.0)  # T = 0 is argmax already
    assert np.array_equal(argmax_draft(greedy), greedy)


# ------------------------------------------------------------------ exact law vs brute force
def brute_force_tokens(P: np.ndarray, Q: np.ndarray, gamma: int) -> float:
    """Stationary tokens per target call of argmax drafting, by hand: the drafts from context
    c are the deterministic chain x_i = argmax Q[x_{i-1}] (lowest index on ties), x_i accepted
    with P[x_{i-1}, x_i], a rejection resampled from P[x_{i-1}] without x_i renormalised, the
    bonus from P[x_γ]; the next round starts at the last emitted token."""
    v = P.shape[0]
    top = np.array([int(np.flatnonzero(Q[c] >= Q[c].max() - ARGMAX_TIE_TOL)[0])
                    for c in range(v)])
    K = np.zeros((v, v))  # round-start transitions
    R = np.zeros(v)  # expected tokens of a round from c
    for c in range(v):
        reach, ctx = 1.0, c
        for i in range(1, gamma + 1):
            x = top[ctx]
            acc = P[ctx, x]
            if acc < 1.0:
                res = P[ctx].copy()
                res[x] = 0.0
                K[c] += reach * (1.0 - acc) * res / res.sum()
                R[c] += reach * (1.0 - acc) * i
            reach *= acc
            ctx = x
        K[c] += reach * P[ctx]
        R[c] += reach * (gamma + 1)
    w, vecs = np.linalg.eig(K.T)
    pi = np.real(vecs[:, np.argmin(np.abs(w - 1.0))])
    pi = pi / pi.sum()
    return float(pi @ R)


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("gamma", [1, 3])
def test_exact_law_matches_a_brute_force_and_stays_lossless(temperature: float,
                                                           gamma: int) -> None:
    g = grid_of(config(MARKOV, temperature=[temperature], gamma=[gamma]))
    by_mode = {p.spec.drafting: p for p in g.points}
    sample, argmax = by_mode["sample"], by_mode["argmax"]
    P, Q = markov_pair(sample.spec, temperature, None)
    Pa, Qa = markov_pair(argmax.spec, temperature, None)
    assert np.array_equal(P, Pa) and np.array_equal(Qa, argmax_draft(Q))
    tokens = exact.long_run(Pa, Qa, gamma, "correct").tokens_per_round
    assert tokens == pytest.approx(brute_force_tokens(P, Q, gamma), rel=1e-10)
    # per context: acceptance p(argmax q) against Σ min(p, q)
    lr = exact.long_run(Pa, Qa, gamma, "correct")
    beta = P[np.arange(4), Q.argmax(axis=1)]
    assert np.all((beta >= 0) & (beta <= 1)) and 0 < lr.alpha_bar <= 1
    # lossless: the exact law of the first two emitted tokens is the target's
    law = exact.first_tokens_distribution(Pa, Qa, 0, gamma, "correct", n=2)
    assert exact.tv(law, exact.target_joint(P, 0, 2)) < 1e-12
    # Alg. 1's pieces on a one-hot row: accept with p(x), resample from p without x
    p, x = P[0], int(Q[0].argmax())
    assert acceptance_probability(p, Qa[0])[x] == pytest.approx(p[x], rel=1e-15)
    without = np.where(np.arange(4) == x, 0.0, p)
    assert np.allclose(residual(p, Qa[0]), without / without.sum(), atol=1e-15)


def interval(batch_tokens: np.ndarray) -> tuple[float, float]:
    """An interval for the mean with failure probability FAILURE: batch means, Student t."""
    n = batch_tokens.size
    half = sps.t.ppf(1.0 - FAILURE / 2, n - 1) * batch_tokens.std(ddof=1) / np.sqrt(n)
    m = float(batch_tokens.mean())
    return m - half, m + half


def simulated_interval(point: Any, g: Any) -> tuple[float, float, float]:
    budget = g.config["budget"]
    hist, _ = point.family.simulate_long_run(point, point.seed(int(g.config["seed"])), budget)
    k = np.arange(hist.shape[1]) + 1  # column k: k accepted drafts, k + 1 tokens
    per_batch = (hist * k).sum(axis=1) / hist.sum(axis=1)
    lo, hi = interval(per_batch)
    ref = point.family.exact_long_run(point, int(g.config["seed"]), budget)["tokens_exact"]
    return lo, hi, float(ref)


@pytest.mark.parametrize("temperature", [0.5, 1.5])
def test_markov_simulation_covers_the_exact_tokens_per_call(temperature: float) -> None:
    g = grid_of(config(MARKOV, temperature=[temperature], gamma=[4]))
    (point,) = [p for p in g.points if p.spec.drafting == "argmax"]
    lo, hi, ref = simulated_interval(point, g)
    assert lo <= ref <= hi, (lo, ref, hi)
    assert hi - lo < 0.05  # an interval narrow enough to mean something


def test_iid_stub_drafts_its_argmax() -> None:
    stub = {"family": "iid", "vocab": 8, "sigma": 1.0, "noise": 0.5, "share": "position",
            "seed": 3, "draft": {"kind": "noise"}}
    g = grid_of(config(stub, gamma=[2]))
    (point,) = [p for p in g.points if p.spec.drafting == "argmax"]
    _, q = point.family.example_rows(point.spec, 1.0, None, 0)
    assert np.array_equal(q, argmax_draft(q)) and q.sum() == 1.0
    lo, hi, ref = simulated_interval(point, g)  # the quadrature's own error is far smaller
    assert lo <= ref <= hi, (lo, ref, hi)


# ------------------------------------------------------------------ traces
def kept_top(lengths: list[int], seed: int, **kw: Any) -> Any:
    """make_trace's trace naming the top_k it keeps (of p and of q), as specsim records it."""
    trace = make_trace(lengths, seed=seed, **kw)
    trace.meta["top_k"] = kw.get("top_k", 4)
    return trace


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "traces").mkdir()
    write_trace(tmp_path / "traces" / "t.parquet", kept_top([40, 25, 60], seed=4))
    return tmp_path


def test_trace_argmax_rows_accept_with_p_of_the_drafts_argmax(in_tmp: Path) -> None:
    trace = kept_top([40, 25, 60], seed=4)
    drafted = argmax_drafted(trace)
    # brute force from the full rows the trace was cut from (make_trace's construction)
    rng = np.random.default_rng(4)
    P = rows(rng, 125, 10)
    Q = 0.6 * P + 0.4 * rows(rng, 125, 10)
    assert np.allclose(drafted.alpha, P[np.arange(125), Q.argmax(axis=1)], atol=1e-15)
    assert np.array_equal(drafted.q_tail, np.zeros(125))
    assert np.all(drafted.alpha <= 1.0)
    # ties go to the smallest token id, whatever the stored order of the support
    one = Trace(trace_meta(pair="tie", vocab=8, documents=1, top_k=4), np.array([0, 1]),
                np.array([-1]), np.array([0, 4]), np.array([5, 2, 7, 1]),
                np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.3, 0.3 - 1e-15, 0.1, 0.3]),
                np.zeros(1), np.zeros(1), np.array([0.6]))
    tied = argmax_drafted(one)
    assert np.array_equal(tied.q, [0.0, 0.0, 0.0, 1.0]) and tied.alpha[0] == 0.4
    # a foreign trace that names no top_k and whose q tail could hold a larger entry: refused
    with pytest.raises(ValueError, match="argmax may lie outside the kept support"):
        argmax_drafted(make_trace([5], top_k=1, seed=2))


def test_trace_simulation_covers_exact_and_argmax_is_lossless(in_tmp: Path) -> None:
    model = {"family": "trace", "file": "traces/t.parquet"}
    g = grid_of(config(model, gamma=[3]))
    points = {p.spec.drafting: p for p in g.points}
    a = points["argmax"]
    lo, hi, ref = simulated_interval(a, g)
    assert lo <= ref <= hi, (lo, ref, hi)
    law = a.family._law(a)  # the family's own positional law
    beta = argmax_drafted(kept_top([40, 25, 60], seed=4)).alpha
    assert law.tokens_per_call == pytest.approx(
        positional.positional_law(beta, law.doc_start, 3).tokens_per_call, rel=1e-12)
    # the lossless check on the frozen pairs, exactly
    eq = grid_of({**config(model, gamma=[2], rule=["correct"]),
                  "studies": {"e": {"analysis": "equivalence", "models": ["m"], "gamma": [2],
                                    "drafting": ["argmax"], "rule": ["correct"]}}})
    (e,) = eq.points
    chain = e.family.equivalence_model(e)
    law2 = exact.first_tokens_distribution(chain.p, chain.q, chain.start, 2, "correct", n=2)
    assert exact.tv(law2, exact.target_joint(chain.p, chain.start, 2)) < 1e-12
    assert np.all(np.isin(chain.q, [0.0, 1.0]))  # every draft row one-hot


# ------------------------------------------------------------------ identities and config
def test_sampled_drafting_keeps_every_identity_and_argmax_is_its_own_point() -> None:
    plain = grid_of({**config(MARKOV), "studies": {"s": {"analysis": "accept_curve",
                                                         "models": ["m"], "gamma": [3]}}})
    both = grid_of(config(MARKOV))
    (p0,) = plain.points
    by_mode = {p.spec.drafting: p for p in both.points}
    assert by_mode["sample"].identity() == p0.identity()  # a drafting study runs the long run
    assert by_mode["sample"].path == p0.path and '"mode"' not in json.dumps(p0.identity())
    assert "drafting" not in describe(plain, p0)["point"]["spec"]
    a = by_mode["argmax"]
    assert model_identity(a.spec)["draft"]["mode"] == "argmax"
    assert "/draft~0.5+argmax/" in a.path and a.point_id != by_mode["sample"].point_id
    assert a.to_record()["draft"] == "blend+argmax"


def test_bad_drafting_settings_are_refused_naming_the_key(in_tmp: Path) -> None:
    calibrated = dict(MARKOV, draft={"kind": "calibrated", "other": "far"})
    assert "studies.s.drafting" in refusal(config(calibrated, alpha=[0.7]))
    assert "drafting" in refusal(config(MARKOV, drafting=["beam"]))
    msg = refusal(config({"family": "trace", "file": "traces/t.parquet"}, temperature=[0.5]))
    assert msg.startswith("studies.s.temperature") and "1.0" in msg


def test_trace_temperatures_enter_no_identity_and_no_step_settings() -> None:
    section = {"model": {"target_order": 3, "draft_orders": [1, 2]},
               "trace": {"documents": 8, "length": 8, "top_k": 4}}
    tempered = copy.deepcopy(section)
    tempered["trace"]["temperatures"] = [0.0, 0.5]
    assert trace_settings(tempered) == trace_settings(section)
    assert step_settings(tempered) == step_settings(section)
    assert tempered_trace_path("ngram_o2", 1.0) == "results/traces/ngram_o2.parquet"
    assert tempered_trace_path("ngram_o2", 0.5) == "results/traces/ngram_o2_T0.5.parquet"
    with pytest.raises(ValueError, match="temperatures"):
        Settings.from_dict({"trace": {"temperatures": [1.0]}})
