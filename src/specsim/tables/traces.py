"""The trace models' tables (declared, with their columns, in :mod:`specsim.outputs.traces`).

Both read the trace models of the ``accept_curve`` studies from the grid and compute their
exact positional laws (:mod:`specsim.traces.positional`); neither needs a point's simulation.
``trace_positions`` -- acceptance by position within the draft and its spread, per (model, rule,
γ) of the study; ``trace_curve`` -- tokens per target call at every γ up to the study's largest,
with a bootstrap CI over documents, beside Eq. 1 at the mean acceptance and the Jensen gap.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from specsim import exact
from specsim.families.trace import TraceFamily, load_trace
from specsim.grid import Grid, Point
from specsim.tables.points import sort_rows
from specsim.traces import positional

__all__ = ["trace_curve", "trace_positions"]

KEYS = ["study", "model", "rule", "gamma"]


def _trace_points(grid: Grid) -> list[tuple[str, Point]]:
    """(study, point) for every trace-model point of the accept_curve studies."""
    by_id = {p.point_id: p for p in grid.points}
    return [(name, by_id[pid]) for name, study in grid.studies.items()
            if study["analysis"] == "accept_curve" for pid in study["points"]
            if by_id[pid].spec.family == TraceFamily.name]


def _law(point: Point, gamma: int) -> positional.PositionalLaw:
    trace = load_trace(point.spec, point.temperature)
    return positional.positional_law(positional.acceptance(trace, point.rule), trace.doc_start,
                                     gamma)


def trace_positions(grid: Grid, points: pd.DataFrame) -> pd.DataFrame:
    cols = [*KEYS, "draft_position", "accept_rate", "accept_std", "tested_per_round"]
    rows: list[dict[str, Any]] = []
    for study, p in _trace_points(grid):
        rate, std, weight = _law(p, p.gamma).accept_by_position()
        rows += [{"study": study, "model": p.model, "rule": p.rule, "gamma": p.gamma,
                  "draft_position": i + 1, "accept_rate": rate[i], "accept_std": std[i],
                  "tested_per_round": weight[i]} for i in range(p.gamma)]
    return sort_rows(pd.DataFrame(rows, columns=cols), [*KEYS, "draft_position"])


def trace_curve(grid: Grid, points: pd.DataFrame) -> pd.DataFrame:
    cols = [*KEYS, "tokens_exact", "tokens_ci_low", "tokens_ci_high", "alpha_mean",
            "tokens_eq1", "jensen_gap", "documents", "positions"]
    longest: dict[tuple[str, str, str], Point] = {}
    for study, p in _trace_points(grid):
        key = (study, p.model, p.rule)
        if key not in longest or p.gamma > longest[key].gamma:
            longest[key] = p
    root = int(grid.config["seed"])
    rows: list[dict[str, Any]] = []
    for (study, model, rule), p in longest.items():
        trace = load_trace(p.spec, p.temperature)
        seed = int(p.seed(root).generate_state(1)[0])
        for g in range(1, p.gamma + 1):
            law = _law(p, g)
            lo, hi = law.tokens_ci(seed)
            a = float(np.mean(law.beta))
            eq1 = float(exact.expected_tokens(a, g))
            rows.append({"study": study, "model": model, "rule": rule, "gamma": g,
                         "tokens_exact": law.tokens_per_call, "tokens_ci_low": lo,
                         "tokens_ci_high": hi, "alpha_mean": a, "tokens_eq1": eq1,
                         "jensen_gap": law.tokens_per_call - eq1, "documents": trace.n_docs,
                         "positions": trace.n_positions})
    return sort_rows(pd.DataFrame(rows, columns=cols), KEYS)
