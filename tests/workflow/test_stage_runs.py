"""Stage outputs of real DAG runs: the tiny run's cost_batch table and its figure, and a trace
model (tests/data/trace.yaml) through every study analysis."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mc
import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import SCHEMA, TINY
from trace_files import make_trace

from specsim import intensity
from specsim.config import load_grid
from specsim.costs import BATCHED, RooflineCost
from specsim.exact import stationary_rates
from specsim.schemes import Scheme
from specsim.traces.format import write_trace


def test_the_tiny_run_writes_cost_batch_and_its_figure(tiny_run: Any) -> None:
    from specsim.tables.schemes import COST_COLUMNS
    df = pd.read_csv(tiny_run / "results" / "tables" / "cost_batch.csv")
    assert list(df.columns) == COST_COLUMNS
    assert set(df["batch"]) == {1, 64} and list(df["model"].unique()) == ["seed_good", "stub"]
    one, many = (df[(df["batch"] == b) & (df["model"] == "seed_good")].iloc[0] for b in (1, 64))
    assert many["gamma_best"] <= one["gamma_best"]  # verifying costs more at batch 64
    assert one["verify_best"] < 1.01 < many["verify_best"]
    # Sequoia's trees: budget 1 is Algorithm 1 at γ = 1, so the best budget is at least as fast
    # as γ = 1 at every batch; the stub (a frozen chain, no stationary law) has none
    good = df[df["model"] == "seed_good"]
    assert good["sequoia_budget"].between(1, 32).all()
    assert (good["sequoia_depth"] <= good["sequoia_budget"]).all()
    grid = load_grid(yaml.safe_load(TINY.read_text()), SCHEMA)
    point = next(p for p in grid.points if p.model == "seed_good")
    P, Q, _, _ = point.family.equivalence_model(point)
    gamma_one = stationary_rates(Scheme.build("correct").law(P, Q, 1)).tokens_per_round
    for _, r in good.iterrows():
        cost = RooflineCost(intensity.SHAPES[-1], intensity.SHAPES[0],
                            next(d for d in intensity.DEVICES if d.name == r["device"]),
                            int(r["batch"]), int(r["n_ctx"]))
        assert r["sequoia_speedup"] >= gamma_one / cost.total((1,), BATCHED) * (1 - 1e-12)
    assert df.loc[df["model"] == "stub", "sequoia_budget"].isna().all()
    assert (tiny_run / "results" / "figures" / "optimal_gamma_batch.png").stat().st_size > 0


@pytest.mark.slow
def test_every_study_analysis_runs_on_a_trace_model_through_the_dag(tmp_path: Path) -> None:
    """tests/data/trace.yaml: equivalence, accept_curve, optimal_k, break_even and the schemes
    and policies on one ``file:`` trace model; every exact value inside its Monte Carlo CI."""
    import pandas as pd
    from conftest import ROOT, snakemake

    (tmp_path / "traces").mkdir()
    write_trace(tmp_path / "traces" / "tiny.parquet",
                make_trace([30, 12, 40, 18, 25, 25], vocab=12, top_k=4, seed=21))
    snakemake(tmp_path, ROOT / "tests" / "data" / "trace.yaml", "--cores", "2")
    out = tmp_path / "results" / "tables"

    def table(name: str) -> pd.DataFrame:
        return pd.read_csv(out / f"{name}.csv")

    # every exact value within its Monte Carlo estimate's error (Student t on the batch SE),
    # not the 95% `covered` column: ~14 rows of 95% intervals all cover for ~49% of seeds, and
    # the seeds follow the trace file's bytes. mc.FAIL_PROB over the 14 rows: ~10 SE on 15
    # degrees of freedom; a 13 SE bias fails 99% of the time
    rows = {"accept_curve": "tokens_per_round", "schemes": "tokens_per_call"}
    assert len(table("accept_curve")) == 4 and len(table("schemes")) == 10
    for name, est in rows.items():
        df = table(name)
        se = np.hypot(df["tokens_se"], df.get("tokens_exact_se", 0.0))
        assert set(df["model"]) == {"pair"}, name
        for (_, r), s in zip(df.iterrows(), se, strict=True):
            mc.assert_close(r[est], s, r["tokens_exact"], dof=int(r["batches"]) - 1,
                            assertions=14, what=name)
    assert set(table("schemes")["policy"]) == {"fixed", "confidence", "heuristic", "optimal"}
    pol = table("schemes_policies")  # the optimal policy (cap 2) bounds the others at or below it
    assert (pol["policy"] == "optimal").sum() == 2
    names = table("checks")["check"].astype(str)
    assert names.str.startswith("optimal_at_least_best_fixed[policies/pair").sum() == 2
    assert names.str.startswith("no_policy_beats_optimal[policies/pair").sum() >= 2
    assert set(table("optimal_k")["model"]) == {"pair"}
    assert set(table("break_even")["model"]) == {"pair"}
    eq = table("equivalence").set_index("rule")
    assert eq.loc["correct", "verdict"] == "lossless" and eq.loc["correct", "tv_exact"] < 1e-12
    assert eq.loc["no_resample", "verdict"] == "biased"
    positions = table("trace_positions")
    assert len(positions) == 2 * (1 + 3)  # (correct, greedy) x draft positions of γ = 1, 3
    curve = table("trace_curve")
    assert len(curve) == 2 * 3 and (curve["tokens_ci_low"] <= curve["tokens_exact"]).all()
    assert (curve["tokens_exact"] <= curve["tokens_ci_high"]).all()
    checks = table("checks")
    assert checks["passed"].all(), checks[~checks["passed"]]
    assert (tmp_path / "results" / "checks.ok").exists()

