"""A round's cost calibrated on the engine's own runs (a :class:`~.cost.CostModel`).

A forward-time profile misses what an engine's speculative path costs beyond the forwards
(scheduling, sampling, the drafter's own step inside the engine). The engine's measured
throughput contains it. With runs at batch size b (:mod:`specsim.acceptance.runs`) with
speculation off, tps(b, 0), and at draft lengths K_r <= K (the counters' K), tps(b, K_r)::

    plain(b)        = b / tps(b, 0)                    seconds of a plain step
    round(b, K_r)   = b T(K_r) / tps(b, K_r)           seconds of a measured round

since a round emits T(K_r) tokens per sequence on average (T from the counters,
:mod:`specsim.acceptance.counts`). The model of a round of K' drafts::

    round(b, K') = plain(b) + o(b) + K' c(b) + [V(b, K'+1) - V(b, 1)]

- c(b): what one draft step costs inside the engine at batch b (drafter forward, its
  scheduling, the verify pass's growth per token when no profile is given);
- o(b): a per-round overhead independent of K' (rejection sampling, bookkeeping);
- V(b, n): the target's forward time at n tokens per sequence from ``--latency``, when given:
  it then supplies only how the verify pass grows with tokens (its medians; its spreads and
  its draft rows are not used), and c(b) is what remains per draft step.

Fit, per measured batch size, on the excess E(b, K_r) = round - plain - [V(b, K_r+1) - V(b, 1)]:
runs at one K_r give o(b) = 0 and c(b) = E / K_r (exact through the run); runs at several K_r
give (o, c) by least squares, with the residual's root mean square reported (0 with two draft
lengths: two points fix a line). In the noiseless case the model's own terms come back exactly.

o and c are held >= 0 (a negative c would make every longer draft cheaper, the longest
extrapolated K' best): where the free least-squares line leaves that region the fit is on its
boundary. A run whose round is faster than its tokens allow (b T(K_r) / tps(b, K_r) <
b / tps(b, 0), even at the spreads' ends most in its favour) contradicts the counters and is
refused.

Intervals: the runs' spreads (``tokens_per_second_low``/``_high``) enter by refitting at every
combination of their ends (the plain run's and each speculative run's); the ratio
round / plain takes the extremes over those fits. With runs at one K_r the split of the excess
is an assumption: the interval spans every split (o from 0 to the whole excess). With several,
each end moves out by 1.96 residuals (the scatter of the runs about the line). Beyond the
largest K_r the pessimistic end charges every draft the largest run's excess per draft. T(K_r)
used to calibrate is taken at its point estimate (its interval enters the speedup through T(K')
in :mod:`.schedule`).

Coverage, never silent: K' beyond the largest measured K_r at a batch size is extrapolated
linearly in K' (``cost_extrapolated``); a batch size between two measured ones takes the terms
interpolated linearly in b (``batch_interpolated``); outside the measured batch sizes it is
refused, as are runs that contradict the counters (a draft length beyond K, a batch size
without a plain run or without a speculative one).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from specsim.acceptance.cost import CostModel, RoundCost
from specsim.acceptance.counts import AcceptanceCounts
from specsim.acceptance.latency import ROLES, LatencyProfile
from specsim.acceptance.runs import Run
from specsim.stats import normal_quantile

__all__ = ["BatchFit", "CalibratedCost", "CalibrationError", "cost_model", "fit_terms"]

MAX_CORNERS = 1 << 10


class CalibrationError(ValueError):
    """Runs that cannot calibrate the cost: one line naming the run or the cell."""


@dataclass(frozen=True)
class BatchFit:
    """The terms fitted at one measured batch size (seconds), from the runs at ``gammas``."""

    batch: int
    plain: float
    overhead: float
    per_draft: float
    residual: float  # root mean square of the fit's residuals (seconds); 0 when exact
    gammas: tuple[int, ...]
    ratio_bounds: Mapping[int, tuple[float, float]]  # K' -> (low, high) of round / plain

    def ratio(self, gamma: int, growth: float) -> float:
        """round / plain at K' = ``gamma`` (1 at 0: a plain step has no overhead)."""
        if gamma == 0:
            return 1.0
        return (self.plain + self.overhead + gamma * self.per_draft + growth) / self.plain


def fit_terms(gammas: Sequence[int], excess: Sequence[float]) -> tuple[float, float, float]:
    """(o, c, residual RMS) of excess = o + gamma c with o, c >= 0 (module docstring): one
    draft length gives o = 0 and c = excess / gamma; several, least squares, on the boundary
    where the free fit leaves it (a round never costs less per draft, nor per round, than
    nothing: a negative c would make every longer draft cheaper)."""
    g = np.asarray(gammas, dtype=np.float64)
    e = np.asarray(excess, dtype=np.float64)
    if g.size == 1:
        return 0.0, max(float(e[0] / g[0]), 0.0), 0.0
    a = np.column_stack([np.ones_like(g), g])
    (o, c), *_ = np.linalg.lstsq(a, e, rcond=None)
    if c < 0:  # all of the excess per round
        o, c = max(float(np.mean(e)), 0.0), 0.0
    elif o < 0:  # all of it per draft step
        o, c = 0.0, max(float(g @ e / (g @ g)), 0.0)
    r = e - (o + c * g)
    return float(o), float(c), float(math.sqrt(float(np.mean(r * r))))


@dataclass(frozen=True)
class CalibratedCost:
    """round(b, K') from the runs (module docstring); ``growth`` the optional profile."""

    fits: Mapping[int, BatchFit]
    growth: LatencyProfile | None
    max_gamma_fitted: int  # up to which K' ratio_bounds were computed
    source: str

    @classmethod
    def fit(cls, counts: AcceptanceCounts, runs: Sequence[Run], max_gamma: int,
            growth: LatencyProfile | None = None) -> CalibratedCost:
        """Check the runs against the counters, then fit every measured batch size."""
        K = counts.max_gamma
        by_batch: dict[int, dict[int, Run]] = {}
        for run in runs:
            if run.gamma > K:
                raise CalibrationError(
                    f"{run.where}: gamma {run.gamma} is beyond the counters' K = {K}: "
                    f"T({run.gamma}) is not identified; drop the row or give --metrics "
                    f"counted at K >= {run.gamma}")
            by_batch.setdefault(run.batch, {})[run.gamma] = run
        for b, cell in sorted(by_batch.items()):
            if 0 not in cell:
                raise CalibrationError(
                    f"{min(cell.values(), key=lambda r: r.gamma).where}: batch {b} has no "
                    f"plain run (gamma 0): add one, the round is measured against it")
            if len(cell) == 1:
                raise CalibrationError(
                    f"{cell[0].where}: batch {b} has a plain run but none at gamma 1..{K}: "
                    f"the speculative runs never covered it; add a run at gamma {K} there "
                    f"or drop the row")
        tokens = {g: counts.tokens_per_call(g).mean for g in range(K + 1)}
        fits = {b: _fit_batch(b, cell, tokens, growth, max_gamma)
                for b, cell in sorted(by_batch.items())}
        names = sorted({r.where.split(": line")[0] for r in runs})
        return cls(fits, growth, max_gamma, "runs " + ", ".join(names))

    # ------------------------------------------------------------------ CostModel
    def check_covers(self, batches: Sequence[int], max_gamma: int) -> None:
        known = sorted(self.fits)
        for b in batches:
            if b < known[0] or b > known[-1]:
                raise CalibrationError(
                    f"--batch {b}: the runs measured batch sizes {known}; the calibrated cost "
                    f"is interpolated between them, never extrapolated: add runs at batch {b} "
                    f"or drop it")
        if max_gamma > self.max_gamma_fitted:
            raise CalibrationError(f"K' = {max_gamma}: calibrated up to {self.max_gamma_fitted}")
        if self.growth is not None:
            self.growth.check_covers(batches, max_gamma, draft=False)  # its verify growth only

    def round_cost(self, batch: int, gamma: int) -> RoundCost:
        known = sorted(self.fits)
        if batch in self.fits:
            lo = hi = self.fits[batch]
            w = 0.0
        else:
            i = int(np.searchsorted(known, batch))
            lo, hi = self.fits[known[i - 1]], self.fits[known[i]]
            w = (batch - lo.batch) / (hi.batch - lo.batch)
        plain, o, c = ((1 - w) * getattr(lo, k) + w * getattr(hi, k)
                       for k in ("plain", "overhead", "per_draft"))
        growth = _growth(self.growth, batch, gamma)
        verify = plain + (o + growth if gamma else 0.0)
        ratio = (gamma * c + verify) / plain
        if not ratio > 0:
            raise CalibrationError(
                f"{self.source}: the calibrated round at batch {batch}, K' = {gamma} takes "
                f"{ratio:.3g} plain steps (o = {o:.3g} s, c = {c:.3g} s): the runs contradict "
                f"the model; check the runs or drop --max-gamma to the measured K")
        spread = [x * np.array(f.ratio_bounds[gamma]) / f.ratio(
            gamma, _growth(self.growth, f.batch, gamma)) for f, x in ((lo, 1 - w), (hi, w))]
        low, high = (ratio * (spread[0] + spread[1])).tolist()
        return RoundCost(gamma, plain, c if gamma else 0.0, verify, min(low, ratio),
                         max(high, ratio), gamma > min(max(lo.gammas), max(hi.gammas)),
                         w > 0)

    def describe(self) -> str:
        """The model, its assumptions and the fitted terms (Markdown; ``schedule.md``)."""
        from specsim.acceptance.model_report import describe_calibrated
        return describe_calibrated(self)


def _growth(profile: LatencyProfile | None, batch: int, gamma: int) -> float:
    if profile is None or gamma == 0:
        return 0.0
    return profile.target(batch, gamma + 1).median - profile.target(batch, 1).median


def _fit_batch(b: int, cell: Mapping[int, Run], tokens: Mapping[int, float],
               growth: LatencyProfile | None, max_gamma: int) -> BatchFit:
    gammas = tuple(sorted(g for g in cell if g > 0))

    def terms(tps: Mapping[int, float]) -> tuple[float, float, float, float, float]:
        """plain, o, c, residual, and the excess per draft at the largest K_r measured."""
        plain = b / tps[0]
        excess = [b * tokens[g] / tps[g] - plain - _growth(growth, b, g) for g in gammas]
        return (plain, *fit_terms(gammas, excess), max(excess[-1], 0.0) / gammas[-1])

    plain, o, c, res, _ = terms({g: r.tokens_per_second for g, r in cell.items()})
    for g in gammas:  # even at the ends of the spreads most in its favour, a round is faster
        fast, slow = cell[g], cell[0]
        if b * tokens[g] / fast.low < b / slow.high - _growth(growth, b, g):
            raise CalibrationError(
                f"{fast.where}: at batch {b} a round of K = {g} emits T = {tokens[g]:.4g} "
                f"tokens a sequence in less time than the plain step ({slow.where}) emits one: "
                f"the runs and the counters contradict each other (another pair, prompts or "
                f"engine?); give counters and runs of one deployment")
    ends = [sorted({r.low, r.high}) for _, r in sorted(cell.items())]
    if math.prod(len(e) for e in ends) > MAX_CORNERS:
        raise CalibrationError(f"batch {b}: {len(ends)} runs with spreads: more combinations "
                               f"of their ends than {MAX_CORNERS}; give fewer draft lengths")
    corners = list(itertools.product(*ends))
    fitted = [terms(dict(zip(sorted(cell), corner, strict=True))) for corner in corners]
    if len(gammas) == 1:  # o = 0 is an assumption: the interval spans every split o + K c
        fitted += [(p, oo + cc * gammas[0], 0.0, r, d) for p, oo, cc, r, d in fitted]
    # several draft lengths: the scatter about the line (its residual) widens each end
    z = float(normal_quantile(0.975)) if len(gammas) > 1 else 0.0
    bounds = {}
    for g in range(max_gamma + 1):
        up = _growth(growth, b, g) if g else 0.0
        ratios = [(p + (oo + up if g else 0.0) + g * cc) / p for p, oo, cc, _, _ in fitted]
        if g > gammas[-1]:  # beyond the runs, pessimistic: every draft costs the largest
            ratios += [(p + up + g * d) / p for p, _, _, _, d in fitted]  # K_r's average
        pad = z * res / plain if g else 0.0
        bounds[g] = (max(min(ratios) - pad, 1e-12), max(ratios) + pad)
    return BatchFit(b, plain, o, c, res, gammas, bounds)


def cost_model(counts: AcceptanceCounts, runs: Sequence[str], latency: str | None,
               max_gamma: int) -> tuple[CostModel, list[int]]:
    """The cost model ``specsim advise`` was given and its measured batch sizes: calibrated
    on ``--runs`` (``--latency``, if given, its verify growth), else the ``--latency``
    profile alone; neither is refused."""
    from specsim.acceptance.runs import read_runs

    profile = LatencyProfile.read(latency, ("target",) if runs else ROLES) if latency else None
    if runs:
        cost = CalibratedCost.fit(counts, read_runs(runs), max_gamma, profile)
        return cost, sorted(cost.fits)
    if profile is None:
        raise CalibrationError("no cost: give --runs (the engine's measured throughput with "
                               "speculation off and on) or --latency (forward times)")
    return profile, list(profile.batches("target"))
