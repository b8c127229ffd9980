"""The cost calibrated on an engine's runs (specsim.acceptance.runs, .calibrate):
synthetic runs generated from a known model give its terms back (exactly when
noiseless), the schedule takes either cost model, every bad runs file is one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specsim.acceptance.calibrate import CalibratedCost, CalibrationError, fit_terms
from specsim.acceptance.counts import AcceptanceCounts
from specsim.acceptance.latency import LatencyProfile
from specsim.acceptance.runs import Run, RunsError, read_runs
from specsim.acceptance.schedule import schedule

DATA = Path(__file__).resolve().parents[2] / "data" / "engine"
COUNTS = AcceptanceCounts.from_histogram([200, 150, 120, 130, 400])  # K = 4
BATCHES = (1, 2, 8)
PLAIN = {1: 0.020, 2: 0.021, 8: 0.026}      # seconds of a plain step
OVERHEAD = {1: 0.002, 2: 0.003, 8: 0.005}   # o(b)
PER_DRAFT = {1: 0.004, 2: 0.006, 8: 0.018}  # c(b): a draft step grows with batch


def true_round(b: int, g: int, o: bool = True, growth: LatencyProfile | None = None) -> float:
    if g == 0:
        return PLAIN[b]
    up = 0.0 if growth is None else (growth.target(b, g + 1).median
                                     - growth.target(b, 1).median)
    return PLAIN[b] + (OVERHEAD[b] if o else 0.0) + g * PER_DRAFT[b] + up


def synthetic_runs(gammas: tuple[int, ...], o: bool = True, spread: float = 0.0,
                   growth: LatencyProfile | None = None) -> list[Run]:
    """tps(b, g) = b T(g) / round(b, g) of the known model, optionally +-spread."""
    out = []
    for b in BATCHES:
        for g in (0, *gammas):
            tps = b * COUNTS.tokens_per_call(g).mean / true_round(b, g, o, growth)
            out.append(Run(b, g, tps, tps * (1 - spread), tps * (1 + spread), f"runs: b{b}g{g}"))
    return out


def test_fit_terms_is_exact_on_a_line_and_reports_the_residual() -> None:
    assert fit_terms([3], [0.3]) == pytest.approx((0.0, 0.1, 0.0))
    o, c, r = fit_terms([1, 2, 4], [0.5 + 0.25 * g for g in (1, 2, 4)])
    assert (o, c, r) == pytest.approx((0.5, 0.25, 0.0), abs=1e-14)
    o, c, r = fit_terms([1, 2, 3], [1.0, 0.0, 1.0])  # best line 2/3 flat; residuals 1/3, 2/3
    assert c == pytest.approx(0.0, abs=1e-14) and o == pytest.approx(2 / 3)
    assert r == pytest.approx(np.sqrt((1 / 9 + 4 / 9 + 1 / 9) / 3))


def test_several_draft_lengths_recover_the_known_terms_exactly() -> None:
    cost = CalibratedCost.fit(COUNTS, synthetic_runs((1, 2, 4)), 6)
    for b in BATCHES:
        f = cost.fits[b]
        assert f.plain == pytest.approx(PLAIN[b], rel=1e-12)
        assert f.overhead == pytest.approx(OVERHEAD[b], rel=1e-9)
        assert f.per_draft == pytest.approx(PER_DRAFT[b], rel=1e-9)
        assert f.residual < 1e-12 and f.gammas == (1, 2, 4)
        for g in range(7):  # every K', 3, 5 and 6 unmeasured: the model's own round
            rc = cost.round_cost(b, g)
            assert rc.round == pytest.approx(true_round(b, g), rel=1e-9)
            assert rc.extrapolated == (g > 4) and not rc.interpolated
            assert rc.ratio_low == pytest.approx(rc.ratio, rel=1e-9)
            if g <= 4:  # within the runs the noiseless line is exact
                assert rc.ratio_high == pytest.approx(rc.ratio, rel=1e-9)
            else:  # beyond them, pessimistic: each draft costs the largest run's average
                per = (OVERHEAD[b] + 4 * PER_DRAFT[b]) / 4
                assert rc.ratio_high == pytest.approx((PLAIN[b] + g * per) / PLAIN[b],
                                                      rel=1e-9)


def test_a_fit_never_makes_drafts_or_rounds_cost_less_than_nothing() -> None:
    """A free fit with c < 0 (noise, a flat measured excess) would make every longer draft
    cheaper and the longest extrapolated K' best: o and c are held >= 0."""
    o, c, _ = fit_terms([1, 2, 3], [0.30, 0.25, 0.20])
    assert c == 0.0 and o == pytest.approx(0.25)
    o, c, _ = fit_terms([1, 2, 3], [0.10, 0.30, 0.50])  # free fit o = -0.1
    assert o == 0.0 and c == pytest.approx((0.1 + 0.6 + 1.5) / 14)
    assert fit_terms([2], [-0.01])[:2] == (0.0, 0.0)


def test_runs_faster_than_the_counters_allow_are_refused() -> None:
    """A round of K drafts that emits T(K) tokens in less time than a plain step emits one
    contradicts the counters (zero acceptance: T = 1), even at the spreads' ends."""
    zero = AcceptanceCounts(1000, (0, 0, 0))
    runs = [Run(1, 0, 50.0, 49.0, 51.0, "r: line 2"), Run(1, 3, 90.0, 88.0, 92.0, "r: line 3")]
    with pytest.raises(CalibrationError, match=r"r: line 3: at batch 1 a round of K = 3 emits "
                                               r"T = 1 tokens.*\(r: line 2\)"):
        CalibratedCost.fit(zero, runs, 3)


def test_one_draft_length_spans_every_split_of_the_excess() -> None:
    """Runs at K = 4 alone do not say how the excess splits into o + K c: the point takes
    o = 0, the interval every split (o from 0 to the whole excess)."""
    cost = CalibratedCost.fit(COUNTS, synthetic_runs((4,), o=False), 6)
    for b in BATCHES:
        excess = 4 * PER_DRAFT[b]
        for g in range(7):
            rc = cost.round_cost(b, g)
            ends = sorted([(PLAIN[b] + g * PER_DRAFT[b]) / PLAIN[b],
                           (PLAIN[b] + (excess if g else 0.0)) / PLAIN[b]])
            assert (rc.ratio_low, rc.ratio_high) == pytest.approx(tuple(ends), rel=1e-9)


def test_the_scatter_about_the_line_widens_the_interval_to_cover_the_runs() -> None:
    """Noisy runs at several K: the least-squares line misses each run by its residual, and
    the interval of round / plain at each measured K holds the measured ratio."""
    rng = np.random.default_rng(3)
    runs = [Run(r.batch, r.gamma, t, t, t, r.where) for r in synthetic_runs((1, 2, 3, 4))
            for t in [r.tokens_per_second * (1 if r.gamma == 0 else rng.uniform(0.97, 1.03))]]
    cost = CalibratedCost.fit(COUNTS, runs, 4)
    tps = {(r.batch, r.gamma): r.tokens_per_second for r in runs}
    for b in BATCHES:
        assert cost.fits[b].residual > 0
        for g in (1, 2, 3, 4):
            measured = (b * COUNTS.tokens_per_call(g).mean / tps[(b, g)]) / (b / tps[(b, 0)])
            rc = cost.round_cost(b, g)
            assert rc.ratio_low <= measured <= rc.ratio_high


def test_one_draft_length_puts_the_excess_on_the_draft_step() -> None:
    """Generated with o = 0, runs at K = 4 only: c(b) exact, and every K' follows."""
    cost = CalibratedCost.fit(COUNTS, synthetic_runs((4,), o=False), 4)
    for b in BATCHES:
        assert cost.fits[b].overhead == 0.0
        assert cost.fits[b].per_draft == pytest.approx(PER_DRAFT[b], rel=1e-12)
        for g in range(5):
            assert cost.round_cost(b, g).round == pytest.approx(true_round(b, g, o=False),
                                                                rel=1e-12)


def test_a_profile_supplies_only_the_verify_growth(tmp_path: Path) -> None:
    lines = ["role,batch,tokens,seconds"]
    for b in BATCHES:  # absolute times far off the runs': only their differences matter
        lines += [f"target,{b},{n},{5 + 0.001 * b * n * n}" for n in range(1, 8)]
        lines.append(f"draft,{b},1,99")
    (tmp_path / "lat.csv").write_text("\n".join(lines) + "\n")
    growth = LatencyProfile.read(tmp_path / "lat.csv")
    cost = CalibratedCost.fit(COUNTS, synthetic_runs((1, 3), growth=growth), 6, growth)
    for b in BATCHES:
        assert cost.fits[b].per_draft == pytest.approx(PER_DRAFT[b], rel=1e-9)
        assert cost.fits[b].overhead == pytest.approx(OVERHEAD[b], rel=1e-9)
        assert cost.round_cost(b, 6).round == pytest.approx(true_round(b, 6, growth=growth),
                                                            rel=1e-9)


def test_the_schedule_takes_the_calibrated_cost_and_carries_the_spreads() -> None:
    runs = synthetic_runs((4,), o=False)
    exact = schedule(COUNTS, CalibratedCost.fit(COUNTS, runs, 6), BATCHES, 6)
    noisy = schedule(COUNTS, CalibratedCost.fit(COUNTS, synthetic_runs(
        (4,), o=False, spread=0.05), 6), BATCHES, 6)
    for a, n in zip(exact.table.itertuples(), noisy.table.itertuples(), strict=True):
        assert a.speedup == pytest.approx(n.speedup, rel=1e-12)
        if a.gamma:
            assert a.speedup == pytest.approx(
                a.tokens_per_call * PLAIN[a.batch] / true_round(a.batch, a.gamma, o=False),
                rel=1e-12)
            # the runs' spread widens the interval beyond T's alone
            assert n.speedup_ci_low < a.speedup_ci_low and n.speedup_ci_high > a.speedup_ci_high
        assert a.cost_extrapolated == (a.gamma > 4)
    # at the measured K the point estimate is the measured ratio of throughputs
    row = exact.table[(exact.table.batch == 8) & (exact.table.gamma == 4)].iloc[0]
    tps = {(r.batch, r.gamma): r.tokens_per_second for r in runs}
    assert row.speedup == pytest.approx(tps[(8, 4)] / tps[(8, 0)], rel=1e-12)


def test_batches_between_runs_are_interpolated_and_flagged_outside_refused() -> None:
    cost = CalibratedCost.fit(COUNTS, synthetic_runs((4,), o=False), 4)
    rc = cost.round_cost(5, 4)  # halfway between 2 and 8
    assert rc.interpolated and rc.plain == pytest.approx((PLAIN[2] + PLAIN[8]) / 2)
    assert rc.draft == pytest.approx((PER_DRAFT[2] + PER_DRAFT[8]) / 2)
    with pytest.raises(CalibrationError, match=r"--batch 16: the runs measured batch sizes"):
        schedule(COUNTS, cost, [1, 16], 4)


# ------------------------------------------------------------------ reading runs
def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_runs_read_the_csv_and_both_benchmarks_json(tmp_path: Path) -> None:
    csv = write(tmp_path / "r.csv", "batch,gamma,tokens_per_second,tokens_per_second_low,"
                                    "tokens_per_second_high,note\n1,0,40,39,41,x\n1,3,60,,,\n")
    # vllm bench serve --save-result: one object (vllm/benchmarks/serve.py's result_json)
    vllm = write(tmp_path / "v.json", json.dumps({"backend": "vllm", "max_concurrency": 4,
                                                  "output_throughput": 150.5, "completed": 9}))
    # sglang.bench_serving --output-file: one object a line, appended
    sgl = write(tmp_path / "s.jsonl", "\n".join(json.dumps(
        {"backend": "sglang", "max_concurrency": b, "output_throughput": 30.0 * b,
         "accept_length": None}) for b in (2, 8)) + "\n")
    runs = read_runs([csv, f"k=0:{vllm}", f"k=2:{sgl}"])
    got = [(r.batch, r.gamma, r.tokens_per_second, r.low, r.high) for r in runs]
    assert got == [(1, 0, 40, 39, 41), (1, 3, 60, 60, 60), (2, 2, 60, 60, 60),
                   (4, 0, 150.5, 150.5, 150.5), (8, 2, 240, 240, 240)]
    assert runs[-1].where == f"{sgl}: line 2"


@pytest.mark.parametrize(("files", "specs", "message"), [
    ({"a.csv": "batch,gamma,tokens_per_second\n1,0,4\n1,0,5\n"}, ["a.csv"],
     "a.csv: line 3: a second run at batch 1, gamma 0"),
    ({"a.csv": "batch,gamma,tokens_per_second\n1,0,0\n"}, ["a.csv"],
     "a.csv: line 2: column tokens_per_second: '0': a throughput must be"),
    ({"a.csv": "batch,gamma,tokens_per_second\n1,0\n"}, ["a.csv"],
     "line 2: 2 fields, the header has 3"),
    ({"a.csv": "batch,tokens_per_second\n1,4\n"}, ["a.csv"], "missing column(s) gamma"),
    ({"a.csv": "batch,gamma,tokens_per_second,tokens_per_second_low\n1,0,4,5\n"}, ["a.csv"],
     "line 2: need tokens_per_second_low <= tokens_per_second"),
    ({"a.json": '{"max_concurrency": 2, "output_throughput": 3}'}, ["a.json"],
     "give it as --runs k=G:"),
    ({"a.json": '{"max_concurrency": null, "output_throughput": 3}'}, ["k=0:a.json"],
     "line 1: max_concurrency is null"),
    ({"a.json": '{"request_throughput": 3}'}, ["k=1:a.json"], "no 'max_concurrency'"),
    ({"a.csv": "batch,gamma,tokens_per_second\n1,0,4\n"}, ["k=1:a.csv"], "drop 'k=1:'"),
    ({"a.csv": "batch,gamma,tokens_per_second\n2,1,4\n",
      "b.json": '{"max_concurrency": 2, "output_throughput": 3}'}, ["a.csv", "k=1:b.json"],
     "b.json: line 1: a second run at batch 2, gamma 1 (the first: "),
])
def test_bad_runs_files_are_one_line_naming_the_row(tmp_path: Path, files: dict,
                                                    specs: list, message: str) -> None:
    for name, text in files.items():
        write(tmp_path / name, text)
    specs = [s.replace("a.", f"{tmp_path}/a.").replace("b.", f"{tmp_path}/b.") for s in specs]
    with pytest.raises(RunsError) as err:
        read_runs(specs)
    assert "\n" not in str(err.value)
    assert message in str(err.value), str(err.value)


def test_a_runs_file_is_bounded_before_it_is_read(tmp_path: Path, monkeypatch) -> None:
    from specsim.acceptance import runs as module

    path = write(tmp_path / "r.csv", "batch,gamma,tokens_per_second\n1,0,4\n")
    monkeypatch.setattr(module, "MAX_BYTES", 10)
    with pytest.raises(RunsError, match="more than a runs file holds"):
        read_runs([path])


@pytest.mark.parametrize(("rows", "message"), [
    ([(1, 0), (1, 5)], "line 3: gamma 5 is beyond the counters' K = 4"),
    ([(1, 0), (1, 4), (2, 4)], "line 4: batch 2 has no plain run (gamma 0)"),
    ([(1, 0), (1, 4), (2, 0)], "line 4: batch 2 has a plain run but none at gamma 1..4"),
])
def test_runs_that_contradict_the_counters_are_refused(tmp_path: Path, rows: list,
                                                       message: str) -> None:
    text = "batch,gamma,tokens_per_second\n" + "".join(f"{b},{g},{10 + g}\n" for b, g in rows)
    runs = read_runs([write(tmp_path / "r.csv", text)])
    with pytest.raises(CalibrationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        CalibratedCost.fit(COUNTS, runs, 4)


# ------------------------------------------------------------------ specsim advise --runs
def test_advise_with_runs_alone_writes_the_model_beside_the_schedule(tmp_path: Path) -> None:
    from specsim.cli import main

    counts = AcceptanceCounts.from_histogram([37, 19, 14, 87])  # any K = 3 counters
    rows = ["batch,gamma,tokens_per_second,tokens_per_second_low,tokens_per_second_high"]
    for b, plain, c in ((1, 0.02, 0.005), (4, 0.022, 0.02)):
        rows.append(f"{b},0,{b / plain},{0.98 * b / plain},{1.02 * b / plain}")
        t = counts.tokens_per_call(3).mean
        rows.append(f"{b},3,{b * t / (plain + 3 * c)},,")
    runs = write(tmp_path / "runs.csv", "\n".join(rows) + "\n")
    metrics = write(tmp_path / "m.json", json.dumps([{"acceptance_histogram": [37, 19, 14, 87]}]))
    out = tmp_path / "advice"
    assert main(["advise", "--metrics", metrics, "--runs", runs, "--out", str(out),
                 "--max-gamma", "5"]) == 0
    df = pd.read_csv(out / "schedule.csv")
    assert sorted(set(df.batch)) == [1, 4] and (df.groupby("batch")["best"].sum() == 1).all()
    assert df.loc[df.gamma > 3, "cost_extrapolated"].all()
    md = (out / "schedule.md").read_text()
    assert "round(b, K') = plain(b) + o(b) + K' c(b)" in md and "| batch |" in md
    assert "cost extrapolated beyond the measured draft lengths: (b=1, K'=4)" in md
    # refused: nothing written, one line naming the flag
    out2 = tmp_path / "refused"
    assert main(["advise", "--metrics", metrics, "--runs", runs, "--out", str(out2),
                 "--batch", "8"]) == 1
    assert not out2.exists()
    assert main(["advise", "--metrics", metrics, "--out", str(out2)]) == 1
    assert not out2.exists()


# ------------------------------------------------------------------ out of sample
def test_out_of_sample_tables_score_both_models_against_the_runs(tmp_path: Path) -> None:
    """Runs generated from the o = 0 model at every K' = 0..6; calibrated on K' = 0 and 4
    only it predicts the rest exactly (regret 0, MAE 0); a profile without the draft's cost
    inside the engine is scored on the same cells."""
    from specsim.pairs.llm.engine_calibration import calibration_tables

    rows = []
    for b in BATCHES:
        base = b / true_round(b, 0)
        for g in range(7):
            t = COUNTS.tokens_per_call(g).mean
            tps = b * t / true_round(b, g, o=False)
            rows.append({"batch": b, "gamma": g, "tokens_per_second": tps,
                         "tokens_per_second_low": tps, "tokens_per_second_high": tps,
                         "speedup_measured": tps / base})
    measured = pd.DataFrame(rows)
    lines = ["role,batch,tokens,seconds"]
    for b in BATCHES:  # forward times: the verify pass flat, a draft step 1% of a plain one
        lines += [f"target,{b},{n},{PLAIN[b]}" for n in range(1, 8)]
        lines.append(f"draft,{b},1,{0.01 * PLAIN[b]}")
    profile = LatencyProfile.read(write(tmp_path / "lat.csv", "\n".join(lines) + "\n"))
    per_batch, summary = calibration_tables(COUNTS, profile, measured, (0, 4), 6)
    cal = per_batch[per_batch.model == "calibrated"]
    assert cal["agree"].all() and (cal["regret"].abs() < 1e-12).all()
    assert (cal["speedup_max_error"] < 1e-9).all()
    s = summary.set_index("model")
    assert s.loc["calibrated", "cells"] == s.loc["forward_times", "cells"] == 3 * 5
    assert s.loc["forward_times", "speedup_mae"] > 0.1  # the profile misses c(b)
    best = {b: int(measured[measured.batch == b].set_index("gamma")["speedup_measured"].idxmax())
            for b in BATCHES}
    fwd = per_batch[per_batch.model == "forward_times"].set_index("batch")
    for b in BATCHES:
        assert fwd.loc[b, "best_measured"] == best[b]
        assert fwd.loc[b, "regret"] >= 0


def test_the_summary_says_where_the_best_k_is_not_sure_to_pay() -> None:
    """Runs at one K: the other K' carry every split of the excess, so a best K' whose
    interval reaches below 1 is named as not sure to pay, and the summary does not say that
    speculation pays everywhere."""
    runs = [Run(1, 0, 48.0, 48.0, 48.0, "r: line 2"), Run(1, 4, 80.0, 80.0, 80.0, "r: line 3"),
            Run(8, 0, 300.0, 300.0, 300.0, "r: line 4"),
            Run(8, 4, 310.0, 310.0, 310.0, "r: line 5")]
    sched = schedule(COUNTS, CalibratedCost.fit(COUNTS, runs, 4), (1, 8), 4)
    best = sched.best.set_index("batch")
    assert best.loc[1, "pays"] and not best.loc[8, "pays"] and best.loc[8, "gamma"] > 0
    text = sched.summary().splitlines()
    assert text[-2] == "speculation is best at every batch size asked"
    assert text[-1].startswith("not sure to pay at batch 8:")


def test_with_runs_a_profile_needs_only_the_targets_rows(tmp_path: Path) -> None:
    """Given with --runs, --latency supplies only the verify pass's growth: a profile of the
    target alone is enough (without runs it still needs the draft's rows)."""
    from specsim.acceptance.calibrate import cost_model
    from specsim.acceptance.latency import LatencyError

    lines = ["role,batch,tokens,seconds"]
    lines += [f"target,{b},{n},{5 + 0.001 * b * n * n}" for b in BATCHES for n in range(1, 8)]
    (tmp_path / "lat.csv").write_text("\n".join(lines) + "\n")
    full = LatencyProfile.read(tmp_path / "lat.csv", ("target",))
    runs = tmp_path / "runs.csv"
    runs.write_text("batch,gamma,tokens_per_second\n" + "".join(
        f"{r.batch},{r.gamma},{r.tokens_per_second!r}\n"
        for r in synthetic_runs((1, 3), growth=full)))
    cost, batches = cost_model(COUNTS, [str(runs)], str(tmp_path / "lat.csv"), 6)
    assert batches == list(BATCHES)
    for b in BATCHES:
        assert cost.fits[b].per_draft == pytest.approx(PER_DRAFT[b], rel=1e-9)
    with pytest.raises(LatencyError, match="no draft rows"):
        cost_model(COUNTS, [], str(tmp_path / "lat.csv"), 6)


def test_every_schedule_column_is_documented() -> None:
    """The engine schedule's columns (both cost models write them) each have a caption in the
    table's declaration: the report's headers show it as a tooltip."""
    from specsim.acceptance.schedule import COLUMNS
    from specsim.outputs import table
    documented = set(table("engine_schedule").columns)
    assert set(COLUMNS) <= documented, sorted(set(COLUMNS) - documented)
