"""The calibrated cost out of sample on the batched loop, against the forward-time profile.

From the engine check's measured runs (:mod:`.engine_check`: throughput at every batch size b
and K' = 0..``engine_max_gamma``), the calibrated cost (:mod:`specsim.acceptance.calibrate`)
is fitted on the runs at K' in ``calibration_gammas`` only (0 and the counters' K), and both
cost models -- ``forward_times`` (the latency profile) and ``calibrated`` -- predict every
(b, K'). Against the measured runs, per model and batch size:

- ``best_predicted`` / ``best_measured``: the schedule's best K' and the measured argmax (ties
  to the smaller K'); ``agree`` whether they are equal;
- ``regret``: throughput lost following the advice instead of the measured best,
  1 - tps(b, best_predicted) / tps(b, best_measured) (measured speedups, paired ratios);
- ``speedup_mae`` / ``speedup_max_error``: |predicted - measured| speedup over the
  out-of-sample K' (1..max, not among ``calibration_gammas``), the same cells for both models.

Runs too noisy for the fit (a loaded machine: a round of K timed faster than one plain step,
:class:`specsim.acceptance.calibrate.CalibrationError`) leave the calibrated model out; its
summary row says so (``calibrated (refused: ...)``), and the profile's rows stand.

The summary (:data:`SUMMARY_COLUMNS`): per model, the batches agreeing, mean and worst regret,
the break-even batch predicted and measured (the smallest batch size from which on the best
K' is 0 at every larger one; empty when speculation pays at the largest), and the MAE over
every out-of-sample cell.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from specsim import timing
from specsim.acceptance.calibrate import CalibratedCost, CalibrationError
from specsim.acceptance.cost import CostModel
from specsim.acceptance.counts import AcceptanceCounts
from specsim.acceptance.runs import Run
from specsim.acceptance.schedule import schedule
from specsim.precision import first_max

__all__ = ["COLUMNS", "SUMMARY_COLUMNS", "calibration_tables", "measured_frame"]

COLUMNS = ("model", "batch", "best_predicted", "best_measured", "agree", "regret",
           "speedup_mae", "speedup_max_error")
SUMMARY_COLUMNS = ("model", "calibration_gammas", "batches", "agree", "mean_regret",
                   "worst_regret", "break_even_predicted", "break_even_measured", "speedup_mae",
                   "speedup_max_error", "cells")


def measured_frame(runs: Mapping[tuple[int, int], Sequence[Any]]) -> pd.DataFrame:
    """Per (batch, gamma): the repeats' median tokens per second and quartiles, and the
    median of the paired per-repeat ratios to K' = 0 at the same batch size."""
    rows = []
    for (b, g), gens in sorted(runs.items()):
        tps = np.array([x.tokens_per_second for x in gens], dtype=np.float64)
        base = [x.tokens_per_second for x in runs[(b, 0)]]
        q1, med, q3 = np.percentile(tps, [25, 50, 75])
        rows.append({"batch": b, "gamma": g, "tokens_per_second": float(med),
                     "tokens_per_second_low": float(q1), "tokens_per_second_high": float(q3),
                     "speedup_measured": timing.paired_ratio(tps, base).median})
    return pd.DataFrame(rows)


def _runs(measured: pd.DataFrame, gammas: Sequence[int]) -> list[Run]:
    sub = measured[measured["gamma"].isin(list(gammas))]
    return [Run(int(r.batch), int(r.gamma), r.tokens_per_second, r.tokens_per_second_low,
                r.tokens_per_second_high, f"batched loop b={int(r.batch)} K'={int(r.gamma)}")
            for r in sub.itertuples()]


def _break_even(best: Mapping[int, int]) -> str:
    out = ""
    for b in sorted(best, reverse=True):
        if best[b] != 0:
            break
        out = str(b)
    return out


def calibration_tables(counts: AcceptanceCounts, profile: CostModel, measured: pd.DataFrame,
                       calibration_gammas: Sequence[int], max_gamma: int
                       ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per model and batch, per model) tables of the module docstring."""
    batches = sorted(set(int(b) for b in measured["batch"]))
    models: list[tuple[str, CostModel]] = [("forward_times", profile)]
    refused = ""
    try:
        models.append(("calibrated", CalibratedCost.fit(counts, _runs(measured,
                                                                       calibration_gammas),
                                                         max_gamma)))
    except CalibrationError as err:  # timing noise the fit cannot use: said, not hidden
        refused = str(err)
        print(f"engine calibration refused: {refused}", file=sys.stderr)
    meas = measured.set_index(["batch", "gamma"])["speedup_measured"]
    held_out = [g for g in range(1, max_gamma + 1) if g not in calibration_gammas]
    rows, summary = [], []
    best_meas = {b: int(first_max(np.array([meas[(b, g)] for g in range(max_gamma + 1)])))
                 for b in batches}
    for name, cost in models:
        table = schedule(counts, cost, batches, max_gamma).table.set_index(["batch", "gamma"])
        best = {b: int(table.loc[b].index[table.loc[b]["best"].to_numpy()][0]) for b in batches}
        errors_all = []
        for b in batches:
            err = [abs(table.loc[(b, g), "speedup"] - meas[(b, g)]) for g in held_out]
            errors_all += err
            rows.append({"model": name, "batch": b, "best_predicted": best[b],
                         "best_measured": best_meas[b], "agree": best[b] == best_meas[b],
                         "regret": 1.0 - meas[(b, best[b])] / meas[(b, best_meas[b])],
                         "speedup_mae": float(np.mean(err)) if err else float("nan"),
                         "speedup_max_error": float(np.max(err)) if err else float("nan")})
        regret = [r["regret"] for r in rows if r["model"] == name]
        summary.append({"model": name,
                        "calibration_gammas": " ".join(str(g) for g in calibration_gammas),
                        "batches": len(batches),
                        "agree": sum(best[b] == best_meas[b] for b in batches),
                        "mean_regret": float(np.mean(regret)),
                        "worst_regret": float(np.max(regret)),
                        "break_even_predicted": _break_even(best),
                        "break_even_measured": _break_even(best_meas),
                        "speedup_mae": float(np.mean(errors_all)) if errors_all else float("nan"),
                        "speedup_max_error": (float(np.max(errors_all)) if errors_all
                                              else float("nan")),
                        "cells": len(errors_all)})
    if refused:  # the calibrated model's summary row says why it has no numbers
        summary.append({"model": f"calibrated (refused: {refused})",
                        "calibration_gammas": " ".join(str(g) for g in calibration_gammas),
                        "batches": len(batches), "cells": 0})
    return (pd.DataFrame(rows).loc[:, list(COLUMNS)],
            pd.DataFrame(summary).reindex(columns=list(SUMMARY_COLUMNS)))
