"""specsim.acceptance: counters -> tokens per call, latency profiles, the schedule, snippets,
the shortcut's error on a trace."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from specsim.acceptance.counts import AcceptanceCounts
from specsim.acceptance.latency import LatencyError, LatencyProfile
from specsim.acceptance.schedule import best_by_batch, schedule
from specsim.acceptance.shortcut import expected_counters, shortcut_table
from specsim.acceptance.snippets import render, snippets
from specsim.acceptance.tail import tail_mean
from specsim.exact import expected_tokens

PROFILE = """role,batch,tokens,seconds,seconds_low,seconds_high
target,1,1,0.020,0.019,0.021
target,1,5,0.022,0.021,0.023
target,1,9,0.025,,
target,16,1,0.030,,
target,16,5,0.060,,
target,16,9,0.100,,
draft,1,1,0.003,,
draft,16,1,0.006,,
"""


def geometric(alpha: float, K: int, rounds: int = 10**6) -> AcceptanceCounts:
    """Counters of i.i.d. acceptance alpha in expectation: a_i = N alpha^i (rounded)."""
    return AcceptanceCounts(rounds, tuple(round(rounds * alpha**i) for i in range(1, K + 1)))


@pytest.fixture
def profile(tmp_path: Path) -> LatencyProfile:
    (tmp_path / "lat.csv").write_text(PROFILE)
    return LatencyProfile.read(tmp_path / "lat.csv")


# ------------------------------------------------------------------ counts
def test_counts_are_the_histogram_of_accepted_drafts() -> None:
    h = [30, 20, 25, 25]
    c = AcceptanceCounts.from_histogram(h)
    assert c.rounds == 100 and c.accepted == (70, 50, 25) and c.histogram.tolist() == h
    J = np.repeat(np.arange(4), h)  # the 100 rounds, one by one
    for g in range(0, 6):
        want = 1 + np.minimum(J, g).mean() if g <= 3 else None
        got = c.tokens_per_call(g)
        if want is not None:
            assert got.mean == pytest.approx(want, rel=1e-15) and not got.extrapolated
        else:
            assert got.extrapolated
    assert c.mean_acceptance_length == pytest.approx(2.45)
    assert (c + c).tokens_per_call(3).mean == pytest.approx(2.45)


@pytest.mark.parametrize("alpha", [0.3, 0.6, 0.9])
def test_tokens_per_call_is_leviathan_eq1_and_the_tail_model_is_exact_for_constant_alpha(
        alpha: float) -> None:
    c = geometric(alpha, 4)
    for g in range(0, 9):
        t = c.tokens_per_call(g)
        assert t.mean == pytest.approx(float(expected_tokens(alpha, g)), rel=2e-6), g
        assert t.low <= t.mean <= t.high and t.extrapolated == (g > 4)
    # beyond K the interval is wider than at K
    k, x = c.tokens_per_call(4), c.tokens_per_call(8)
    assert x.high - x.low > k.high - k.low


def test_tail_mean_is_the_counts_extrapolation() -> None:
    c = AcceptanceCounts(1000, (700, 450, 260))
    for g in range(1, 9):
        assert tail_mean(c.per_position, g) == pytest.approx(c.tokens_per_call(g).mean,
                                                             rel=1e-15)


def test_interval_coverage_over_many_seeds() -> None:
    """The 95% interval of T(K') covers the truth in a binomial share of 400 independent runs:
    more than 45 misses has probability < 1e-6 at 5% (and fewer than 3 too)."""
    alpha, K, n, runs = 0.7, 4, 400, 400
    hi_miss = 45
    assert stats.binom.sf(hi_miss, runs, 0.05) < 1e-6  # the threshold's own failure rate
    assert stats.binom.cdf(2, runs, 0.05) < 1e-6
    rng = np.random.default_rng(2211)  # integers only: the same stream on every CPU
    probs = [alpha**j * (1 - alpha) for j in range(K)] + [alpha**K]
    misses = {g: 0 for g in (1, 2, 4)}
    for _ in range(runs):
        c = AcceptanceCounts.from_histogram(rng.multinomial(n, probs))
        for g in misses:
            t = c.tokens_per_call(g)
            misses[g] += not t.low <= float(expected_tokens(alpha, g)) <= t.high
    for g, m in misses.items():
        assert 2 < m <= hi_miss, (g, m)


@pytest.mark.parametrize(("rounds", "accepted", "message"), [
    (10, (11, 3), "position 1: 11 accepted exceeds rounds"),
    (10, (5, 6), "position 2: 6 accepted exceeds position 1's 5"),
    (10, (5, -1), "position 2: negative count -1"),
    (0, (0,), "0 drafting rounds"),
    (10, (), "no draft position"),
])
def test_counts_refuse_what_prefix_acceptance_cannot_give(rounds: int, accepted: tuple,
                                                          message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        AcceptanceCounts(rounds, accepted, "m.prom")


# ------------------------------------------------------------------ latency
def test_latency_interpolates_in_tokens_then_batch(profile: LatencyProfile) -> None:
    assert profile.target(1, 1).median == 0.020
    assert profile.target(1, 3).median == pytest.approx(0.021)  # halfway 1..5
    assert profile.target(1, 3).low == pytest.approx(0.020)
    assert profile.target(16, 7).median == pytest.approx(0.080)
    # batch 6: a third of the way 1..16 at tokens 5: 0.022 + (0.060 - 0.022) / 3
    assert profile.target(6, 5).median == pytest.approx(0.022 + 0.038 / 3)
    assert profile.draft(16).median == 0.006 and profile.spread


@pytest.mark.parametrize(("call", "message"), [
    (lambda p: p.target(32, 1), "no target time at batch 32 .* never extrapolated"),
    (lambda p: p.target(1, 10), "no target time at batch 1, tokens 10: measured tokens there"),
    (lambda p: p.draft(17), "no draft time at batch 17"),
])
def test_latency_never_extrapolates(profile: LatencyProfile, call, message: str) -> None:
    with pytest.raises(LatencyError, match=message):
        call(profile)


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty latency profile"),
    ("role,batch,seconds\n", "line 1: missing column.s. tokens"),
    ("role,batch,tokens,seconds\ntarget,1,1,0.1\nverifier,1,1,0.1\n",
     "line 3: column role: 'verifier'"),
    ("role,batch,tokens,seconds\ntarget,0,1,0.1\ndraft,1,1,0.1\n",
     "line 2: column batch: '0' must be a whole number >= 1"),
    ("role,batch,tokens,seconds\ntarget,1,1,-1\ndraft,1,1,0.1\n", "line 2: column seconds"),
    ("role,batch,tokens,seconds\ntarget,1,1,x\n", "line 2: column seconds: 'x' is not a number"),
    ("role,batch,tokens,seconds\ntarget,1,1,0.1\ntarget,1,1,0.2\ndraft,1,1,0.1\n",
     "line 3: a second target row at batch 1, tokens 1"),
    ("role,batch,tokens,seconds\ntarget,1,1,0.1\n", "no draft rows"),
    ("role,batch,tokens,seconds,seconds_low\ntarget,1,1,0.1,0.2\ndraft,1,1,0.1,\n",
     "line 2: need seconds_low <= seconds"),
])
def test_latency_refuses_a_bad_file_in_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(LatencyError, match=message) as err:
        LatencyProfile.read(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_roofline_profile_is_an_alternative_source() -> None:
    p = LatencyProfile.from_roofline("Llama-2-70B", "Llama-2-7B", "H100-SXM", [1, 64], 9)
    assert p.target(1, 5).median < 1.2 * p.target(1, 1).median  # memory-bound: nearly free
    assert p.draft(1).median < p.target(1, 1).median
    with pytest.raises(LatencyError, match="'H9'"):
        LatencyProfile.from_roofline("Llama-2-70B", "Llama-2-7B", "H9", [1], 3)


# ------------------------------------------------------------------ schedule
def test_schedule_is_the_formula_with_one_best_per_batch(profile: LatencyProfile) -> None:
    c = AcceptanceCounts.from_histogram([300, 200, 250, 250])
    s = schedule(c, profile, [1, 2, 4, 8, 16], max_gamma=6)
    t = s.table
    assert len(t) == 5 * 7 and (t.groupby("batch")["best"].sum() == 1).all()
    plain = t[t["gamma"] == 0]
    assert (plain["speedup"] == 1).all() and (plain["speedup_ci_low"] == 1).all()
    for r in t[t["gamma"] > 0].itertuples():
        T = c.tokens_per_call(r.gamma).mean
        want = T * profile.target(r.batch, 1).median / (
            r.gamma * profile.draft(r.batch).median + profile.target(r.batch, r.gamma + 1).median)
        assert r.speedup == pytest.approx(want, rel=1e-12)
        assert r.speedup_ci_low <= r.speedup <= r.speedup_ci_high
        assert r.extrapolated == (r.gamma > 3)
    assert s.best_gamma() == {1: 2, 2: 2, 4: 2, 8: 2, 16: 1}
    assert s.stops_paying_at is None and "pays at every batch size" in s.summary()


def linear_profile(path: Path, tokens: int, slope_1: float, per_batch: float,
                   draft: float) -> LatencyProfile:
    """Batch sizes 1, 8, 64: the target's pass 0.01 s (1 + (n - 1) slope) for n tokens, slope
    ``slope_1`` at batch 1 and b / ``per_batch`` above; a draft step ``draft`` b seconds."""
    rows = ["role,batch,tokens,seconds"]
    for b in (1, 8, 64):
        slope = slope_1 if b == 1 else b / per_batch
        rows += [f"target,{b},{n},{0.01 * (1 + (n - 1) * slope)}" for n in range(1, tokens + 1)]
        rows.append(f"draft,{b},1,{draft * b}")
    path.write_text("\n".join(rows) + "\n")
    return LatencyProfile.read(path)


def test_speculation_stops_paying_where_verifying_costs_what_it_saves(tmp_path: Path) -> None:
    s = schedule(geometric(0.6, 4), linear_profile(tmp_path / "p.csv", 5, 0.02, 16, 0.001),
                 [1, 8, 64])
    best = s.best_gamma()
    assert best[1] >= 2 and best[64] == 0 and s.stops_paying_at in (8, 64)
    assert f"stops paying at batch {s.stops_paying_at}" in s.summary()


def test_schedule_names_what_the_profile_does_not_cover(profile: LatencyProfile) -> None:
    with pytest.raises(LatencyError, match="batch 32"):
        schedule(geometric(0.6, 4), profile, [1, 32])
    with pytest.raises(LatencyError, match="tokens 10"):
        schedule(geometric(0.6, 4), profile, [1], max_gamma=9)


def test_best_ties_go_to_the_shorter_draft(tmp_path: Path) -> None:
    # all-accepting counters and free drafts/verification: every K' >= 1 ties only if T(K')
    # is flat -- a draft that is never accepted beyond position 1
    (tmp_path / "p.csv").write_text("role,batch,tokens,seconds\ntarget,1,1,1\ntarget,1,2,1\n"
                                    "target,1,3,1\ndraft,1,1,0\n")
    c = AcceptanceCounts(10, (10, 0))
    s = schedule(c, LatencyProfile.read(tmp_path / "p.csv"), [1])
    assert s.best_gamma() == {1: 1}


def test_the_schedule_recommends_an_extrapolated_k_only_on_its_low_end(tmp_path: Path) -> None:
    """At every batch size, an extrapolated best K' has speedup_ci_low above every
    identified K''s speedup; otherwise the best is the identified maximum, held_back exactly
    when an extrapolated point estimate is larger."""
    profile = linear_profile(tmp_path / "p.csv", 8, 0.005, 64, 0.0002)
    chosen = set()
    for counts in (AcceptanceCounts(400, (330, 270)), AcceptanceCounts(10**6, (900000, 810000)),
                   AcceptanceCounts(2000, (1700,))):
        t = schedule(counts, profile, [1, 8, 64], max_gamma=7).table
        for _, g in t.groupby("batch"):
            best = g[g["best"]].iloc[0]
            top = g.loc[~g["extrapolated"], "speedup"].max()
            if best["extrapolated"]:
                assert best["speedup_ci_low"] > top and best["chosen_by"] == "low_bound"
            else:
                assert best["speedup"] == top
                assert (best["chosen_by"] == "held_back") == bool(
                    (g.loc[g["extrapolated"], "speedup"] > top * (1 + 1e-9)).any())
            assert (g.loc[~g["best"], "chosen_by"] == "").all()
            chosen.add(best["chosen_by"])
    assert chosen == {"identified", "held_back", "low_bound"}  # the cases all occur


# ------------------------------------------------------------------ snippets
def test_snippets_follow_each_engines_format(profile: LatencyProfile) -> None:
    """The schedule best_by_batch gives reaches each engine's snippet (the engines' own
    validation and lookup of them: tests/unit/acceptance/test_snippets.py)."""
    c = AcceptanceCounts.from_histogram([300, 200, 250, 250])
    ranges = best_by_batch(c, profile, 1, 16, 6)
    assert ranges[0][0] == 1 and ranges[-1][1] == 16
    assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(ranges))
    s = snippets(ranges, "eagle")
    vllm = json.loads(s["vllm"].code.split("--speculative-config '", 1)[1].split("'", 1)[0])
    assert vllm["num_speculative_tokens_per_batch_size"] == [list(r) for r in ranges]
    assert vllm["num_speculative_tokens"] == max(k for *_, k in ranges)
    assert f"    {ranges[0][1]}: {ranges[0][2]}" in s["tensorrt_llm"].code
    assert f"--speculative-num-steps {ranges[0][2]}" in s["sglang"].code
    assert f"--spec-draft-n-max {ranges[0][2]}" in s["llama_cpp"].code
    assert "## TensorRT-LLM" in render(ranges)


# ------------------------------------------------------------------ the shortcut on a trace
def _trace(lengths: list[int], seed: int):
    from specsim.traces.format import Trace, from_full_rows, trace_meta

    rng = np.random.default_rng(seed)
    n, vocab = sum(lengths), 8
    P = rng.dirichlet(np.full(vocab, 0.4), size=n)
    Q = 0.5 * P + 0.5 * rng.dirichlet(np.full(vocab, 0.4), size=n)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    token = rng.integers(0, vocab, n)
    return Trace(trace_meta(pair="t", vocab=vocab, documents=len(lengths)), starts, token,
                 *from_full_rows(P, Q, 4))


def test_expected_counters_sum_to_the_documents_tokens() -> None:
    from specsim.traces.positional import acceptance, positional_law

    t = _trace([20, 35, 9], 1)
    beta = acceptance(t, "correct")
    c = expected_counters(beta, t.doc_start, 3)
    law = positional_law(beta, t.doc_start, 3)
    # every document's tokens: one per round plus the accepted drafts
    assert np.allclose(c[:, 0] + c[:, 1:].sum(axis=1), t.doc_lengths, rtol=1e-12)
    assert np.allclose(c[:, 0], law.calls, rtol=1e-15)


def test_shortcut_is_exact_at_the_engines_K_and_errs_elsewhere() -> None:
    from specsim.traces.positional import acceptance

    t = _trace([40, 60, 25, 50], 2)
    df = shortcut_table(t, "t", 3, 6, seed=5, resamples=200)
    at_k = df[df["gamma"] == 3].iloc[0]
    assert abs(at_k["error"]) < 1e-12 and not at_k["extrapolated"]
    assert df["extrapolated"].tolist() == [False] * 3 + [True] * 3
    assert (df["error_ci_low"] <= df["error"] + 1e-12).all()
    assert (df["error"] <= df["error_ci_high"] + 1e-12).all()
    assert df.loc[df["gamma"] != 3, "error"].abs().max() > 1e-6  # contexts matter
    assert (df["tokens_exact"] >= 1).all() and math.isfinite(df["relative_error"].sum())
    # the route's own interval holds its point; covered says whether it holds the truth
    assert (df["tokens_counters_ci_low"] <= df["tokens_counters"] + 1e-12).all()
    assert (df["tokens_counters"] <= df["tokens_counters_ci_high"] + 1e-12).all()
    inside = (df["tokens_counters_ci_low"] <= df["tokens_exact"]) & (
        df["tokens_exact"] <= df["tokens_counters_ci_high"])
    assert df["covered"].tolist() == inside.tolist()
    # identified K' are the same under both tails; beyond K the constant tail is r_K's
    ident = df[~df["extrapolated"]]
    assert np.allclose(ident["tokens_constant_tail"], ident["tokens_counters"], rtol=1e-15)
    n = expected_counters(acceptance(t, "correct"), t.doc_start, 3).sum(axis=0)
    p = n[1:] / n[0]
    r = p[2] / p[1]
    for row in df[df["extrapolated"]].itertuples():
        want = 1 + p.sum() + p[2] * sum(r**m for m in range(1, row.gamma - 2))
        assert row.tokens_constant_tail == pytest.approx(want, rel=1e-12)



def test_shortcut_on_laws_computed_once_is_the_same_table() -> None:
    """The engine step computes a trace's positional laws once for every K: the same table,
    exactly, as each K computing its own."""
    from specsim.acceptance.shortcut import shortcut_laws

    t = _trace([30, 45, 12], 3)
    laws = shortcut_laws(t, [1, 2, 3, 4, 5])
    for k in (1, 2, 4):
        own = shortcut_table(t, "t", k, 5, seed=k, resamples=300, replicas=2)
        shared = shortcut_table(t, "t", k, 5, seed=k, resamples=300, replicas=2, laws=laws)
        pd.testing.assert_frame_equal(own, shared, check_exact=True)
    partial = shortcut_table(t, "t", 4, 5, seed=9, resamples=50, laws={1: laws[1]})
    pd.testing.assert_frame_equal(partial, shortcut_table(t, "t", 4, 5, seed=9, resamples=50),
                                  check_exact=True)


# ------------------------------------------------------------------ specsim advise
DATA = Path(__file__).resolve().parents[2] / "data" / "engine"


def test_advise_writes_the_schedule_snippets_and_figure(tmp_path: Path, capsys) -> None:
    import pandas as pd

    from specsim.cli import main

    (tmp_path / "lat.csv").write_text(PROFILE)
    out = tmp_path / "advice"
    assert main(["advise", "--metrics", str(DATA / "vllm_metrics.prom"), "--latency",
                 str(tmp_path / "lat.csv"), "--out", str(out), "--batch", "1", "2", "4", "16",
                 "--max-gamma", "6"]) == 0
    df = pd.read_csv(out / "schedule.csv")
    want = {"batch", "gamma", "tokens_per_call", "tokens_per_call_ci_low",
            "tokens_per_call_ci_high", "speedup", "speedup_ci_low", "speedup_ci_high",
            "extrapolated", "best"}
    assert want <= set(df.columns) and len(df) == 4 * 7
    assert (df.groupby("batch")["best"].sum() == 1).all()
    assert (df.loc[df["gamma"] == 0, "speedup"] == 1).all()
    for name in ("engine_config.md", "measurement_plan.md", "schedule.pdf", "schedule.png",
                 "schedule.md"):
        assert (out / name).is_file(), name
    text = capsys.readouterr().out
    assert "best K" in text and "speculation" in text


@pytest.mark.parametrize(("metrics", "latency", "extra", "message"), [
    ("vllm_metrics_two_engines.prom", PROFILE, [], "engine"),
    ("vllm_metrics.prom", "role,batch,tokens,seconds\n", [], "no target rows"),
    ("vllm_metrics.prom", PROFILE, ["--batch", "32"], "batch 32"),
    ("vllm_metrics.prom", PROFILE, ["--max-gamma", "9"], "tokens 10"),
])
def test_advise_refuses_in_one_line_and_writes_nothing(tmp_path: Path, capsys, metrics: str,
                                                       latency: str, extra: list,
                                                       message: str) -> None:
    from specsim.cli import main

    (tmp_path / "lat.csv").write_text(latency)
    out = tmp_path / "advice"
    assert main(["advise", "--metrics", str(DATA / metrics), "--latency",
                 str(tmp_path / "lat.csv"), "--out", str(out), *extra]) == 1
    err = capsys.readouterr().err
    assert err.startswith("specsim advise: error: ") and message in err
    assert err.count("\n") == 1 and not out.exists()


def test_the_config_check_refuses_a_profile_its_jobs_would(tmp_path: Path) -> None:
    """realtext.engine's profile is checked when the workflow is parsed (the stage's dag), by
    the function its jobs read the profile with."""
    from specsim.acceptance.latency import profile_of

    roofline = ("Llama-2-70B", "Llama-2-7B", "H100-SXM")
    assert profile_of("", roofline, [1, 64], 8).max_tokens(64) == 9
    with pytest.raises(LatencyError, match=r"no such file|cannot read"):
        profile_of(str(tmp_path / "missing.csv"), roofline, [1], 4)
    (tmp_path / "lat.csv").write_text(PROFILE)
    with pytest.raises(LatencyError, match="batch 256"):
        profile_of(str(tmp_path / "lat.csv"), roofline, [1, 256], 4)
    with pytest.raises(LatencyError, match="'H9'"):
        profile_of("", ("Llama-2-70B", "Llama-2-7B", "H9"), [1], 4)
