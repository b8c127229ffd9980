"""``long_run``: tokens per target call and acceptance of chains run for many rounds.

Simulated and exact by the point's model family (:meth:`specsim.families.Family.simulate_long_run`,
:meth:`~specsim.families.Family.exact_long_run`): for tables the finite-horizon DP average of
exactly what the simulation reports and the stationary limit; for the i.i.d. stub a labelled
Monte Carlo quadrature with its own standard error. Estimates are batch means over chains.
:func:`exact_curve` gives the stationary exact tokens of a point's model at other draft lengths,
for the tables that figures draw curves from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from specsim import exact, stats
from specsim.measures.base import EXACT, SIM, Measure, run_record
from specsim.resources import Footprint
from specsim.verify import rule_spec

if TYPE_CHECKING:
    from specsim.families.base import Point

__all__ = ["LongRun", "closed_form", "exact_curve"]

ROUNDS_BUDGET = ("chains", "rounds", "burn_in", "batches")


def closed_form(point: Point) -> dict[str, Any]:
    """Leviathan et al. 2022 Eq. 1 at a calibrated point's α (exact there: every context
    accepts with probability α); nothing for a draft of its own."""
    if point.alpha is None:
        return {}
    return {"tokens_closed_form": float(exact.expected_tokens(point.alpha, point.gamma))}


def exact_curve(point: Point, gammas: np.ndarray, budget: Mapping[str, Any],
                root_seed: int) -> tuple[np.ndarray, str]:
    """Stationary exact tokens per round of the point's model, α, temperature and rule at
    each draft length in ``gammas``, and how they were obtained.

    A calibrated draft accepts with probability exactly α in every context, so Leviathan et al.
    2022 Eq. 1, E[tokens] = (1 - α^(γ+1)) / (1 - α), is exact for every family; otherwise the
    family's own method (:meth:`specsim.families.Family.exact_curve`).
    """
    if point.alpha is not None:
        return np.asarray(exact.expected_tokens(point.alpha, gammas), dtype=np.float64), "Eq. 1"
    return point.family.exact_curve(point, np.asarray(gammas), root_seed, budget)


class LongRun(Measure):
    name = "long_run"
    budget = ROUNDS_BUDGET
    sim_schema = SIM
    exact_schema = EXACT

    def budget_keys(self, point: Point) -> tuple[str, ...]:
        return (*self.budget, *point.family.exact_budget)  # e.g. iid: quadrature_pairs

    def simulate(self, point: Point, budget: Mapping[str, Any],
                 root_seed: int) -> dict[str, Any]:
        seed = point.seed(root_seed)
        chains, rounds, batches = (int(budget[k]) for k in ("chains", "rounds", "batches"))
        hist, burn_in = point.family.simulate_long_run(point, seed, budget)
        return run_record(point, seed, chains=chains, rounds=rounds, burn_in=burn_in,
                          batches=batches) | {"accepted_hist": hist.ravel().tolist(),
                                              "joint2": []}

    def exact(self, point: Point, budget: Mapping[str, Any], root_seed: int) -> dict[str, Any]:
        return ({"point_id": point.point_id} | point.family.exact_long_run(point, root_seed, budget)
                | closed_form(point))

    def estimate(self, row: Mapping[str, Any], level: float) -> dict[str, Any]:
        g, rule = int(row["gamma"]), str(row["rule"])
        hist = np.asarray(row["accepted_hist"], dtype=np.int64).reshape(int(row["batches"]), g + 1)
        k = np.arange(g + 1)
        rounds_b = hist.sum(axis=1)
        tokens_b = hist @ exact.round_tokens(g, rule)
        hits_b = hist @ k
        trials_b = hist @ np.minimum(k + 1, g)
        tok, tlo, thi, tse = stats.batch_mean_interval(tokens_b, rounds_b)
        acc, alo, ahi, _ = stats.batch_mean_interval(hits_b, trials_b)
        frac, flo, fhi, _ = stats.batch_mean_interval(hits_b, g * rounds_b)
        fit, fit_lo, fit_hi = stats.fit_alpha(hist.sum(axis=0))
        return {
            "rounds_total": int(rounds_b.sum()),
            "tokens_per_round": tok, "tokens_ci_low": tlo, "tokens_ci_high": thi,
            "tokens_se": tse,
            "accept_rate": acc, "accept_ci_low": alo, "accept_ci_high": ahi,
            "accept_fraction": frac, "accept_fraction_ci_low": flo,
            "accept_fraction_ci_high": fhi,
            "alpha_fit": fit, "alpha_fit_low": fit_lo, "alpha_fit_high": fit_hi,
            # Eq. 1 inverted assumes tokens = accepted + 1: not so for a rule keeping its drafts
            "alpha_moment": float(stats.alpha_from_tokens(tok, g))
            if not rule_spec(rule).keep_drafts else np.nan,
            "max_tokens_observed": int(exact.round_tokens(g, rule)[hist.sum(axis=0) > 0].max()),
        }

    def work(self, budget: Mapping[str, Any]) -> int:
        return int(budget["chains"]) * (int(budget["rounds"]) + int(budget["burn_in"]))

    def footprint(self, point: Point, budget: Mapping[str, Any]) -> Footprint:
        return point.family.long_run_footprint(point, budget)

    def work_done(self, sim: Mapping[str, Any]) -> str:
        return f"{sim['chains'] * (sim['rounds'] + sim['burn_in']):,} rounds"
