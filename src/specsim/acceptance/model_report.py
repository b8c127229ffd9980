"""``schedule.md``: the cost model behind a schedule, stated -- its equation, every assumption,
its fitted terms and residuals, and the cells it does not cover -- above the table itself."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from specsim.acceptance.calibrate import CalibratedCost
    from specsim.acceptance.cost import CostModel
    from specsim.acceptance.latency import LatencyProfile

__all__ = ["describe_calibrated", "describe_profile", "schedule_markdown"]

_COMMON = [
    "T(K') from the counters is exact for K' <= K (prefix acceptance: 1 + sum_{i<=K'} a_i/N); "
    "rounds are taken as independent draws from the serving mix (a multinomial interval), "
    "and a run at K' starts its rounds where the run at K would (the counters' shortcut)",
    "K' > K: T(K') extrapolated by the counters' tail model (column `extrapolated`)",
    "speedup interval: T(K')'s interval with the cost model's interval of round / plain, "
    "interval arithmetic (conservative)",
]


def describe_profile(profile: LatencyProfile) -> str:
    """The forward-time model (:meth:`LatencyProfile.round_cost`)."""
    return "\n".join([
        "## Cost model: forward times",
        "",
        f"Source: `{profile.source}`.",
        "",
        "    speedup(b, K') = T(K') T_target(b, 1) / (K' T_draft(b, 1) + T_target(b, K'+1))",
        "",
        "Assumptions:",
        "",
        *(f"- {a}" for a in [
            "a plain step is one target forward of one token per sequence; a round is K' draft "
            "steps then one target forward of K'+1 tokens per sequence, and nothing else "
            "(no scheduling, sampling or drafter overhead inside the engine)",
            "cells between measured ones are interpolated linearly (tokens, then batch); "
            "nothing is extrapolated",
            *_COMMON]),
        ""])


def describe_calibrated(cost: CalibratedCost) -> str:
    """The calibrated model (:mod:`specsim.acceptance.calibrate`) with its fitted terms."""
    growth = (f"`{cost.growth.source}` (its medians only)" if cost.growth is not None
              else "none: 0 (the verify pass's growth is inside c(b))")
    fits = pd.DataFrame([{"batch": f.batch, "plain_seconds": f.plain, "overhead_o": f.overhead,
                          "per_draft_c": f.per_draft, "c_over_plain": f.per_draft / f.plain,
                          "runs_gamma": " ".join(str(g) for g in f.gammas),
                          "residual_seconds": f.residual,
                          "residual_over_plain": f.residual / f.plain}
                         for f in cost.fits.values()])
    from specsim.io import to_markdown
    from specsim.precision import printable
    return "\n".join([
        "## Cost model: calibrated on the engine's runs",
        "",
        f"Source: {cost.source}; verify growth V: {growth}.",
        "",
        "    plain(b)     = b / tps(b, 0)",
        "    round(b, K') = plain(b) + o(b) + K' c(b) + [V(b, K'+1) - V(b, 1)]",
        "    speedup(b, K') = T(K') plain(b) / round(b, K')",
        "",
        "Fitted on round(b, K_r) = b T(K_r) / tps(b, K_r) at the measured draft lengths K_r.",
        "",
        "Assumptions:",
        "",
        *(f"- {a}" for a in [
            "tps(b, K) is the whole batch's output tokens per second of decoding at batch "
            "size (concurrency) b: b sequences in every step",
            "the round's cost beyond a plain step is linear in K': o(b) >= 0 per round plus "
            "c(b) >= 0 per draft step (plus the profile's verify growth when given); with "
            "runs at one K_r the point takes o(b) = 0 (all of the excess per draft step) and "
            "the interval every split of the excess between o and c",
            "several K_r: least squares, the interval widened by 1.96 residuals",
            "K' beyond the largest measured K_r: the line extrapolated (`cost_extrapolated`), "
            "its pessimistic end the largest K_r's excess per draft at every draft; such a K' "
            "is recommended only when that end still beats the best measured K'",
            "a round measured faster than its tokens allow (b T(K_r) / tps(b, K_r) < b / "
            "tps(b, 0) at the spreads' ends) contradicts the counters: refused",
            "batch sizes between measured ones: o, c and plain interpolated linearly in b "
            "(`batch_interpolated`); outside them: refused",
            "the runs' spreads: every combination of their ends refitted, the extremes kept; "
            "T(K_r) used to calibrate at its point estimate",
            *_COMMON]),
        "",
        "Fitted terms per measured batch size (seconds; residual: root mean square over the "
        "runs at K_r, 0 when the fit is exact):",
        "",
        to_markdown(printable(fits)),
        ""])


def schedule_markdown(cost: CostModel, table: pd.DataFrame) -> str:
    """The whole ``schedule.md``: the model, the cells it does not cover, the table."""
    from specsim.io import to_markdown
    from specsim.precision import printable

    flags = [("extrapolated", "T(K') extrapolated beyond the counters' K"),
             ("cost_extrapolated", "cost extrapolated beyond the measured draft lengths"),
             ("batch_interpolated", "cost interpolated between measured batch sizes")]
    lines = ["# Schedule", "", cost.describe(), "## Cells not measured", ""]
    for col, what in flags:
        cells = table[table[col].astype(bool)]
        named = ", ".join(f"(b={int(r.batch)}, K'={int(r.gamma)})" for r in cells.itertuples())
        lines.append(f"- {what}: {named or 'none'}")
    lines += ["", "## Table", "", to_markdown(printable(table)), ""]
    return "\n".join(lines)
