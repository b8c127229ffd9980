"""The batched speculative loop and the engine check (specsim.pairs.llm.batched,
specsim.pairs.llm.engine_check). The table's arithmetic is tested always; the loop on the real model
only with the ``llm`` extra (make llm), like the tier's other tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specsim import timing
from specsim.acceptance.counts import AcceptanceCounts
from specsim.acceptance.latency import LatencyProfile
from specsim.pairs.llm.batched import BatchGeneration
from specsim.pairs.llm.engine_check import COLUMNS, check_table
from specsim.pairs.llm.loading import GGUF_PACKAGE
from specsim.pairs.llm.settings import Settings

HAVE_LLM = all(importlib.util.find_spec(m) is not None
               for m in ("torch", "transformers", "gguf", "accelerate", GGUF_PACKAGE))
needs_llm = pytest.mark.skipif(not HAVE_LLM, reason="the llm extra is not installed (make llm)")


def check_structure(table: pd.DataFrame, batches: list[int], max_gamma: int, k: int) -> None:
    """One row per (batch, gamma), gamma 0 plain decoding (speedup 1, predicted and measured),
    the predicted interval around its estimate, rows beyond K flagged, one best K' per batch
    (the argmax, ties to the smaller)."""
    assert list(table.columns) == list(COLUMNS)
    assert list(zip(table["batch"], table["gamma"], strict=True)) == [
        (b, g) for b in batches for g in range(max_gamma + 1)]
    plain = table[table["gamma"] == 0]
    assert (plain["speedup_predicted"] == 1).all() and (plain["speedup_measured"] == 1).all()
    assert (plain["tokens_per_call"] == 1).all()
    assert (table["ci_low"] <= table["speedup_predicted"] + 1e-12).all()
    assert (table["speedup_predicted"] <= table["ci_high"] + 1e-12).all()
    assert (table["extrapolated"] == (table["gamma"] > k)).all()
    assert (table["tokens_per_call_measured"] >= 1).all()
    for _, rows in table.groupby("batch"):
        for best, col in (("best_predicted", "speedup_predicted"),
                          ("best_measured", "speedup_measured")):
            assert (rows[best] == rows[best].iloc[0]).all()
            top = rows[col].max()
            assert int(rows[best].iloc[0]) == int(rows.loc[rows[col] == top, "gamma"].min())


def _counts_and_profile(tmp_path: Path) -> tuple[AcceptanceCounts, LatencyProfile]:
    """Synthetic counters at K = 2 and a latency profile at batch sizes 1 and 4 (read from its
    CSV, as a user's would be)."""
    lines = ["role,batch,tokens,seconds,seconds_low,seconds_high"]
    for b in (1, 4):
        lines += [f"target,{b},{k},{0.01 * b * (1 + 0.1 * k)},," for k in range(1, 5)]
        lines.append(f"draft,{b},1,{0.002 * b},,")
    (tmp_path / "lat.csv").write_text("\n".join(lines) + "\n")
    return (AcceptanceCounts.from_histogram([30, 30, 40]),
            LatencyProfile.read(tmp_path / "lat.csv"))


def test_check_table_puts_the_schedule_beside_the_runs(tmp_path: Path) -> None:
    """Synthetic counters, profile and runs: the predicted column is the schedule's formula,
    the measured one the per-repeat throughput ratio to plain decoding."""
    counts, profile = _counts_and_profile(tmp_path)  # K = 2: T(1) = 1.7, T(2) = 2.1
    runs = {(b, g): [BatchGeneration([[0] * (10 + g)] * b, 1.0 / (1 + r), g, rounds=5)
                     for r in range(3)] for b in (1, 4) for g in range(4)}
    tm = timing.Timings({}, timing.Load(0.5, 0.7, 2))
    table = check_table(counts, profile, runs, tm, [1, 4], 3)
    check_structure(table, [1, 4], 3, 2)
    row = table[(table["batch"] == 4) & (table["gamma"] == 2)].iloc[0]
    t1, td, t3 = 0.04 * 1.1, 0.008, 0.04 * 1.3
    assert row["speedup_predicted"] == pytest.approx(2.1 * t1 / (2 * td + t3))
    assert row["speedup_measured"] == pytest.approx(12 / 10)
    assert row["tokens_per_call_measured"] == pytest.approx(12 * 4 / (5 * 4))
    assert table["load_before"].iloc[0] == 0.5


def test_engine_settings_refuse_an_ngram_draft_and_a_short_max_gamma() -> None:
    with pytest.raises(ValueError, match="engine_draft must be a model draft"):
        Settings(engine_draft="ngram-3").check()
    with pytest.raises(ValueError, match="engine_max_gamma"):
        Settings(engine_gamma=4, engine_max_gamma=3).check()


# --- with the extra: the real model ---------------------------------------------------------
TINY = Settings(threads=1, ngram_orders=(2, 3), int8=False, skip_layers=(6,),
                drafts=("ngram-3",), assisted_drafts=("skip-6",),
                lossless_assisted_draft="skip-6", audit_draft="skip-6",
                trace_pairs=("ngram-3",), prompt_tokens=16, engine_draft="skip-6",
                engine_batches=(1, 3), engine_gamma=2, engine_max_gamma=3,
                engine_record_tokens=4, engine_new_tokens=3, engine_repeats=1,
                engine_latency_repeats=1)


@pytest.fixture(scope="module")
def lab():  # type: ignore[no-untyped-def]
    from specsim.pairs.llm.lab import Lab

    return Lab(TINY)


@needs_llm
@pytest.mark.parametrize("same", [False, True])
def test_batched_loop_verifies_against_each_sequences_own_distribution(lab, same: bool  # type: ignore[no-untyped-def]
                                                                        ) -> None:
    """Ragged acceptance, masked slots and crops: every p row the loop verified against equals
    a cache-free forward of that sequence alone. ``same``: the target as its own draft accepts
    (nearly) every draft, so the draft's lagging token (fed at the next round) is exercised."""
    from specsim.pairs.llm.batched import BatchLM, batch_cache_consistency, batched_generate

    prompts = [w.tolist() for w in lab.windows(3, 16)]
    draft = BatchLM(lab.model if same else lab.draft("skip-6").lm.model)
    gen = batched_generate(BatchLM(lab.model), draft, prompts, 3, 7,
                           np.random.default_rng(3), record=True)
    assert min(len(t) for t in gen.tokens) >= 7
    assert sum(len(t) for t in gen.tokens) == gen.emitted == sum(gen.accepted) + 3 * gen.rounds
    h = gen.histogram()
    assert h.sum() == 3 * gen.rounds
    if same:
        assert h[3] >= 0.9 * h.sum()
    else:
        assert h[:3].sum() > 0  # some rejections: ragged lengths
    assert batch_cache_consistency(lab.model, prompts, gen) < 1e-4


@needs_llm
def test_engine_check_writes_a_consistent_table(lab, tmp_path: Path  # type: ignore[no-untyped-def]
                                                ) -> None:
    from specsim.io import read_json_verified, write_table
    from specsim.pairs.llm.engine_calibration import COLUMNS as CAL
    from specsim.pairs.llm.engine_calibration import SUMMARY_COLUMNS
    from specsim.pairs.llm.engine_check import engine_check

    table = engine_check(lab, str(tmp_path / "lat.csv"), str(tmp_path / "counts.json"),
                         str(tmp_path / "cal.csv"))
    write_table(table, tmp_path / "check.csv")
    cal = pd.read_csv(tmp_path / "cal.csv")
    assert list(cal.columns) == list(CAL) and len(cal) == 2 * 2  # two models, batches 1, 3
    summary = pd.read_csv(tmp_path / "cal_summary.csv")
    assert list(summary.columns) == list(SUMMARY_COLUMNS)
    assert list(summary["model"]) == ["forward_times", "calibrated"]
    check_structure(pd.read_csv(tmp_path / "check.csv"), [1, 3], 3, 2)
    profile = LatencyProfile.read(tmp_path / "lat.csv")
    assert profile.batches("target") == (1, 3) and profile.max_tokens(3) == 4
    counts = read_json_verified(tmp_path / "counts.json")
    assert counts["gamma"] == 2 and len(counts["accepted"]) == 2
    assert counts["rounds"] == sum(counts["histogram"])


def test_calibration_refused_by_noisy_runs_is_said_in_the_summary(tmp_path: Path) -> None:
    """Runs that contradict the counters (timing noise on a loaded machine: a round of K
    faster than one plain step) leave the calibrated model out, and its summary row says why;
    the forward-time profile's rows are still written."""
    from specsim.pairs.llm.engine_calibration import (
        SUMMARY_COLUMNS,
        calibration_tables,
        measured_frame,
    )

    counts, profile = _counts_and_profile(tmp_path)  # K = 2
    # at K' = 2 each sequence gets 12 tokens in 1/100 of the plain runs' time
    runs = {(b, g): [BatchGeneration([[0] * (10 + g)] * b, (0.01 if g == 2 else 1.0) / (1 + r),
                                     g, rounds=5) for r in range(3)]
            for b in (1, 4) for g in range(4)}
    per_batch, summary = calibration_tables(counts, profile, measured_frame(runs), (0, 2), 3)
    assert list(summary.columns) == list(SUMMARY_COLUMNS)
    assert set(per_batch["model"]) == {"forward_times"} and len(per_batch) == 2
    refused = summary[summary["model"].str.startswith("calibrated (refused: ")]
    assert len(refused) == 1 and refused["speedup_mae"].isna().all()
    assert summary.loc[summary["model"] == "forward_times", "cells"].iloc[0] == 2 * 2
