"""The best draft length at every batch size, from an engine's counters and a cost model.

For a batch of b sequences and draft length K'::

    speedup(b, K') = T(K') / ratio(b, K'),   ratio(b, K') = round(b, K') / plain(b)

T(K') the tokens per target call the counters give (:mod:`specsim.acceptance.counts`);
round(b, K') the seconds of a speculative round of K' drafts and plain(b) those of a plain
decoding step, both from a cost model (:class:`specsim.acceptance.cost.CostModel`): plain
decoding emits one token per sequence per step, a round emits T(K') on average. Two models
answer it, and this module does not ask which:

- forward times (:class:`specsim.acceptance.latency.LatencyProfile`)::

      speedup(b, K') = T(K') T_target(b, 1) / (K' T_draft(b, 1) + T_target(b, K' + 1))

- the engine's measured runs (:class:`specsim.acceptance.calibrate.CalibratedCost`)::

      round(b, K') = plain(b) + o(b) + K' c(b) [+ V(b, K'+1) - V(b, 1)].

K' = 0 is plain decoding: speedup 1 exactly.

The interval of the speedup is interval arithmetic on T(K')'s interval and the cost model's
interval of the ratio (low tokens over the slowest ratio for its low end, and the other way
round): conservative. The best K' at a batch size is chosen by :func:`choose_best`: the largest
point estimate among the K' the data identify (ties within :data:`specsim.precision.EXACT_RTOL`
to the smaller K', the same on every CPU); 0 means turn speculation off there. A K' beyond
them -- its tokens per call from the tail model (K' > K, :mod:`.tail`) or its cost beyond the
runs' draft lengths (``cost_extrapolated``) -- replaces it only when its pessimistic bound
(``speedup_ci_low``) beats that best identified point estimate (then the largest point estimate
among those that do): a model is never recommended on its optimistic side. Column ``chosen_by``
says which happened on the best row: ``identified`` (no extrapolated K' looked better),
``held_back`` (an extrapolated K' had a larger point estimate but its low end did not beat this
one) or ``low_bound`` (extrapolated, its low end beats the best identified). Speculation *stops
paying* at the smallest batch size asked from which on every larger one asked is best at K' = 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from specsim.acceptance.cost import CostModel
from specsim.acceptance.counts import AcceptanceCounts
from specsim.precision import at_least, first_max

__all__ = ["COLUMNS", "Schedule", "best_by_batch", "choose_best", "schedule"]

COLUMNS = ("batch", "gamma", "tokens_per_call", "tokens_per_call_ci_low",
           "tokens_per_call_ci_high", "speedup", "speedup_ci_low", "speedup_ci_high",
           "extrapolated", "best", "round_seconds", "plain_seconds", "draft_seconds",
           "verify_seconds", "tokens_per_second", "pays", "chosen_by", "cost_extrapolated",
           "batch_interpolated")


@dataclass(frozen=True)
class Schedule:
    """One row per (batch, gamma) (:data:`COLUMNS`), and what it says per batch size."""

    table: pd.DataFrame
    engine_gamma: int  # K: the draft length the counters come from

    @property
    def best(self) -> pd.DataFrame:
        """The best row of each batch size."""
        return self.table[self.table["best"]].reset_index(drop=True)

    def best_gamma(self) -> dict[int, int]:
        return {int(r.batch): int(r.gamma) for r in self.best.itertuples()}

    @property
    def stops_paying_at(self) -> int | None:
        """The smallest batch size asked from which on speculation is off (best K' = 0) at
        every larger one asked; None when it pays at the largest."""
        best = self.best_gamma()
        out = None
        for b in sorted(best, reverse=True):
            if best[b] != 0:
                break
            out = b
        return out

    def summary(self) -> str:
        """The schedule as a short text table (what ``specsim advise`` prints)."""
        lines = [f"{'batch':>6} {'best K':>6} {'speedup':>8} {'95% CI':>17} {'tokens/call':>11}"]
        for r in self.best.itertuples():
            flag = {"low_bound": f"  (extrapolated beyond K = {self.engine_gamma}: even its "
                                 f"low end beats every identified K')",
                    "held_back": f"  (identified; an extrapolated K' > {self.engine_gamma} "
                                 f"looks faster but its low end does not beat this)",
                    }.get(r.chosen_by, "")
            if r.cost_extrapolated:
                flag += "  (cost extrapolated beyond the runs' K)"
            lines.append(f"{r.batch:>6} {r.gamma:>6} {r.speedup:>8.3f} "
                         f"[{r.speedup_ci_low:>6.3f}, {r.speedup_ci_high:>6.3f}] "
                         f"{r.tokens_per_call:>11.3f}{flag}")
        stop = self.stops_paying_at
        unsure = [int(r.batch) for r in self.best.itertuples() if r.gamma > 0 and not r.pays]
        if stop is not None:
            lines.append(f"speculation stops paying at batch {stop} (best K' = 0 from there on)")
        elif not unsure:
            lines.append("speculation pays at every batch size asked")
        else:
            lines.append("speculation is best at every batch size asked")
        if unsure:
            lines.append(f"not sure to pay at batch {', '.join(map(str, unsure))}: the best "
                         f"K''s interval reaches below 1 (column pays)")
        return "\n".join(lines)


def schedule(counts: AcceptanceCounts, cost: CostModel, batches: Sequence[int],
             max_gamma: int | None = None, level: float = 0.95) -> Schedule:
    """speedup(b, K') for every batch size in ``batches`` and K' = 0..max_gamma (default: the
    engine's K), the best K' per batch size; the cost model's error (LatencyError,
    CalibrationError) when it does not cover a batch size or K' (module docstring)."""
    gmax = counts.max_gamma if max_gamma is None else int(max_gamma)
    if gmax < 1:
        raise ValueError(f"max_gamma {gmax}: need at least one draft length to compare")
    asked = sorted(set(int(b) for b in batches))
    if not asked or asked[0] < 1:
        raise ValueError(f"batch sizes {list(batches)}: need at least one, each >= 1")
    cost.check_covers(asked, gmax)
    tokens = [counts.tokens_per_call(g, level) for g in range(gmax + 1)]
    rows = []
    for b in asked:
        for t in tokens:
            g = t.gamma
            c = cost.round_cost(b, g)
            if g == 0:
                speed = lo = hi = 1.0
            else:
                speed = t.mean / c.ratio
                lo = t.low / c.ratio_high
                hi = t.high / c.ratio_low
            rows.append({"batch": b, "gamma": g, "tokens_per_call": t.mean,
                         "tokens_per_call_ci_low": t.low, "tokens_per_call_ci_high": t.high,
                         "speedup": speed, "speedup_ci_low": lo, "speedup_ci_high": hi,
                         "extrapolated": t.extrapolated, "round_seconds": c.round,
                         "plain_seconds": c.plain, "draft_seconds": c.draft,
                         "verify_seconds": c.verify,
                         "tokens_per_second": b * t.mean / c.round,
                         "cost_extrapolated": c.extrapolated and g > 0,
                         "batch_interpolated": c.interpolated})
    table = pd.DataFrame(rows)
    best = np.zeros(len(table), dtype=bool)
    chosen_by = np.full(len(table), "", dtype=object)
    for _, idx in table.groupby("batch").groups.items():
        label, why = choose_best(table.loc[idx])
        at = table.index.get_loc(label)  # marked in arrays, set once (not a .loc write each)
        best[at], chosen_by[at] = True, why
    table["best"], table["chosen_by"] = best, chosen_by
    # speculation at this batch size is best and surely pays (its interval above 1)
    table["pays"] = table["best"] & (table["gamma"] > 0) & (table["speedup_ci_low"] > 1.0)
    return Schedule(table.loc[:, list(COLUMNS)], counts.max_gamma)


def choose_best(rows: pd.DataFrame) -> tuple[object, str]:
    """(index label, ``chosen_by``) of the best of one batch size's rows (module docstring):
    the identified K' with the largest point estimate, replaced by an extrapolated K' only
    when its ``speedup_ci_low`` beats that point estimate."""
    beyond = rows["extrapolated"].astype(bool) | rows["cost_extrapolated"].astype(bool)
    ident = rows[~beyond]
    top = first_max(ident["speedup"].to_numpy())
    best, bar = ident.index[top], float(ident["speedup"].to_numpy()[top])
    extra = rows[beyond]
    sure = extra[extra["speedup_ci_low"] > bar]
    if len(sure):
        return sure.index[first_max(sure["speedup"].to_numpy())], "low_bound"
    if len(extra) and not bool(at_least(bar, float(extra["speedup"].max()))):
        return best, "held_back"
    return best, "identified"


def best_by_batch(counts: AcceptanceCounts, cost: CostModel, low: int, high: int,
                  max_gamma: int) -> list[tuple[int, int, int]]:
    """Ranges (first batch, last batch, best K') of equal best K' over every batch size
    low..high, on the cost model interpolated between its measured batch sizes (what the
    engines' per-batch-size settings take)."""
    sched = schedule(counts, cost, range(low, high + 1), max_gamma)
    best = sched.best_gamma()
    ranges: list[tuple[int, int, int]] = []
    for b in sorted(best):
        if ranges and ranges[-1][2] == best[b]:
            ranges[-1] = (ranges[-1][0], b, best[b])
        else:
            ranges.append((b, b, best[b]))
    return ranges

