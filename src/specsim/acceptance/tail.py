"""Beyond the engine's K: how conditional acceptance changes with position, and T(K') from it.

Counters at draft length K identify T(K') for K' <= K only (:mod:`.counts`). Beyond K this
module is the one home of the extrapolation. The conditional acceptance of position i,
r_i = a_i / a_{i-1} (a_0 = N), follows a binomial GLM in the log of the position::

    logit r_i = u + v log(i / K)        (u: logit r_K, v: the slope per log position)

fitted by maximum likelihood on the identified positions i = 1..K, a_i successes of a_{i-1}
trials, over slopes v <= 0. With prefix acceptance the product of these binomials *is* the
multinomial likelihood of the histogram of accepted drafts (a continuation-ratio model), so
the fit and its likelihood are exact for the counters. Then a_{K+m} / N = (a_K / N)
prod_{j<=m} r_{K+j} and T(K') = T(K) + (a_K / N) S, S = sum_{m=1}^{K'-K} prod_{j=1}^{m} r_{K+j}.

Why the log of the position: conditional acceptance changes most over the first positions and
then flattens. On real LLM pairs it falls (in a vLLM sweep of real pairs the constant tail
from K = 1 was +5% at T(2) and +10% at T(3) on average; v = -1.0 reproduces both, +5.1% and
+9.8%, at r_1 = 0.5, where a slope linear in i that gives +5% at T(2) overshoots T(3) by 12-17%).
Why v <= 0: a rise along the counters' positions is a selection (rounds that got far are in
easy text) that longer drafts do not keep. On the n-gram pairs' traces r_i rises by 0.1-0.3 in
logit from position 1 to 2 and by < 0.05 per position after 4, yet T(K') beyond K lies *below*
the constant tail from every K >= 2 (results/tables/engine_shortcut.csv); a free fit
extrapolating the rise was up to 6% too high there. Under the constraint a rising fit becomes
v = 0 at the pooled conditional acceptance sum a_i / sum a_{i-1}.

The interval: the profile-likelihood interval of S, i.e. S's extremes over the likelihood
region {(u, v), v <= 0: 2 (l_hat - l(u, v)) <= z^2} (for a scalar function of the parameters,
the profile-likelihood interval is its range over that region); it is combined with a_K / N's
Wilson interval and T(K)'s own interval end to end (conservative: three intervals at their
ends). Its coverage is tested by Monte Carlo on simulated rounds
(tests/unit/acceptance/test_tail.py). It holds the counters' sampling and slope uncertainty, not
what the counters cannot see: rounds of a run at K' start elsewhere in the text than those of the
run at K (the shortcut's error, about 1% on the n-gram pairs, :mod:`.shortcut`).

K = 1 identifies one position and no slope. The point estimate is then the constant tail
(Leviathan's constant alpha, the one model without a free parameter) and the slope is bracketed
by [:data:`SLOPE_FLOOR`, :data:`SLOPE_CEILING`]. The low end is the decline of the worst real
pair seen in that sweep: +22% at T(3) from K = 1 needs v = -1.67..-2.04 for r_1 = 0.6..0.9. The
high end is the steepest rise seen from K = 1 on the default run's sampled traces (the slope
that makes the K = 1 tail exact at K' = 2..8: -0.03..+0.25 on the twelve n-gram pairs' traces at
temperatures 0.5, 1 and 1.5). Greedy (temperature 0) traces, whose acceptance is 0 or 1 at
every position of a few looping texts, fall outside both ends (-3.7..+2.4) and
results/tables/engine_shortcut.csv shows them uncovered. Neither end is identified: the schedule
recommends an extrapolated K' only when its low end beats the best identified one
(:mod:`.schedule`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from specsim.stats import normal_quantile, wilson_interval

__all__ = ["SLOPE_CEILING", "SLOPE_FLOOR", "Tail", "fit_tail", "fit_tails", "tail_mean",
           "tail_means", "tail_share_interval"]

SLOPE_FLOOR = -2.0  # K = 1: the worst real pair's decline (the interval's low end)
SLOPE_CEILING = 0.3  # K = 1: the steepest rise on the sampled traces (the interval's high end)
_BOX = 30.0  # |u|, |v| bound: separated counters (r_i = 0 or 1) put the MLE at infinity
_GRID = 65  # slopes across the likelihood region where S's extremes are searched


def _log_sigmoid(eta: np.ndarray) -> np.ndarray:
    """log(1 / (1 + e^-eta)), stable at both ends."""
    out: np.ndarray = -np.logaddexp(0.0, -eta)
    return out


def _sigmoid(eta: np.ndarray | float) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(eta, dtype=np.float64)))


def _logit(r: float) -> float:
    if r <= 0.0:
        return -_BOX
    if r >= 1.0:
        return _BOX
    return min(max(math.log(r / (1.0 - r)), -_BOX), _BOX)


@dataclass(frozen=True)
class Tail:
    """The tail model fitted on counters at K: logit r_{K+j} = u + v log((K + j) / K)."""

    K: int
    intercept: float  # u: logit of the conditional acceptance at position K
    slope: float  # v
    identified: bool  # the slope was fitted (K >= 2), not K = 1's constant point


def _share(K: int, u: np.ndarray, v: np.ndarray, extra: int) -> np.ndarray:
    """S = sum_{m=1}^{extra} prod_{j<=m} r_{K+j} for each (u, v): the extra positions' share
    of a_K / N."""
    total = np.zeros(np.broadcast(u, v).shape)
    prod = np.ones_like(total)
    for j in range(1, extra + 1):
        prod = prod * _sigmoid(u + v * math.log((K + j) / K))
        total = total + prod
    return total


def _data(rounds: float, accepted: Sequence[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y, n, x): successes a_i, trials a_{i-1} and covariate log(i / K) of positions 1..K."""
    a = np.array((rounds, *accepted), dtype=np.float64)
    K = a.size - 1
    return a[1:], a[:-1], np.log(np.arange(1, K + 1) / K)


def _loglik(y: np.ndarray, n: np.ndarray, x: np.ndarray, u: np.ndarray | float,
            v: np.ndarray | float) -> np.ndarray:
    """The binomial log-likelihood of each row of (y, n) (shape (..., K)) at its (u, v)."""
    eta = np.asarray(u)[..., None] + np.asarray(v)[..., None] * x
    out: np.ndarray = np.sum(y * _log_sigmoid(eta) + (n - y) * _log_sigmoid(-eta), axis=-1)
    return out


def _mle(y: np.ndarray, n: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(u, v) maximising each row's binomial likelihood (rows (R, K)): Newton's method, a
    row's step halved until its likelihood rises, kept inside the box where counters separate."""
    with np.errstate(divide="ignore", invalid="ignore"):
        u = np.clip(np.log(y[:, -1]) - np.log(n[:, -1] - y[:, -1]), -_BOX, _BOX)
    u = np.where(np.isnan(u), 0.0, u)
    v = np.zeros_like(u)
    best = _loglik(y, n, x, u, v)
    going = np.ones(u.shape, dtype=bool)
    for _ in range(100):
        r = _sigmoid(np.clip(u[:, None] + v[:, None] * x, -_BOX, _BOX))
        w, res = n * r * (1.0 - r), y - n * r
        g0, g1 = res.sum(axis=1), (res * x).sum(axis=1)
        h00, h01, h11 = w.sum(axis=1), (w * x).sum(axis=1), (w * x * x).sum(axis=1)
        det = h00 * h11 - h01**2
        going &= det > 1e-300
        safe = np.where(going, det, 1.0)
        su, sv = (h11 * g0 - h01 * g1) / safe, (h00 * g1 - h01 * g0) / safe
        t = np.where(going, 1.0, 0.0)
        for _ in range(40):
            nu, nv = np.clip(u + t * su, -_BOX, _BOX), np.clip(v + t * sv, -_BOX, _BOX)
            ll = _loglik(y, n, x, nu, nv)
            up = ll >= best - 1e-12 * (1.0 + np.abs(best))  # near the top: rounding
            if up.all():
                break
            t = np.where(up, t, 0.5 * t)
        going &= up
        moved = np.abs(nu - u) + np.abs(nv - v)
        u, v, best = np.where(going, nu, u), np.where(going, nv, v), np.where(going, ll, best)
        going &= moved >= 1e-14
        if not going.any():
            break
    return u, v


def _fit(y: np.ndarray, n: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The MLE over slopes v <= 0 of each row: the free MLE where it declines, else (the
    likelihood being concave) v = 0 and u the logit of the pooled conditional acceptance
    sum a_i / sum a_{i-1}."""
    u, v = _mle(y, n, x)
    pooled = y.sum(axis=1) / n.sum(axis=1)
    with np.errstate(divide="ignore"):
        flat = np.clip(np.log(pooled) - np.log1p(-pooled), -_BOX, _BOX)
    rising = v > 0.0
    return np.where(rising, flat, u), np.where(rising, 0.0, v)


def fit_tails(per_position: np.ndarray, constant: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(u, v) of every row of per-position fractions (R, K): the fitted tail, or with
    ``constant`` Leviathan's constant tail (the baseline this fit is measured
    against: r_K = p_K / p_{K-1} at every later position, p_0 = 1, slope 0); K = 1 fits the
    constant tail at r_1."""
    p = np.asarray(per_position, dtype=np.float64)
    R, K = p.shape
    trials = np.concatenate([np.ones((R, 1)), p[:, :-1]], axis=1)
    if constant or K == 1:
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(trials[:, -1] > 0, p[:, -1] / trials[:, -1], 0.0)
            u = np.clip(np.log(r) - np.log1p(-r), -_BOX, _BOX)
        return np.where(np.isnan(u), 0.0, u), np.zeros(R)
    x = np.log(np.arange(1, K + 1) / K)
    return _fit(p, trials, x)


def tail_means(per_position: np.ndarray, gammas: Sequence[int],
               constant: bool = False) -> np.ndarray:
    """(R, len(gammas)): T(gamma) of every row of per-position fractions (R, K), by the fitted
    tail (or the constant one) beyond K -- the one home of the extrapolation."""
    p = np.asarray(per_position, dtype=np.float64)
    K = p.shape[1]
    head = 1.0 + np.cumsum(p, axis=1)
    out = np.empty((p.shape[0], len(gammas)))
    tails: tuple[np.ndarray, np.ndarray] | None = None  # (u, v), fitted when first needed
    for j, g in enumerate(gammas):
        if g <= K:
            out[:, j] = head[:, g - 1] if g > 0 else 1.0
            continue
        if tails is None:
            tails = fit_tails(p, constant)
        out[:, j] = head[:, -1] + p[:, -1] * _share(K, *tails, g - K)
    return out


def fit_tail(per_position: Sequence[float] | np.ndarray) -> Tail:
    """The point fit from per-position fractions p_i = a_i / N (or counts: the fit is the same
    at any scale); K = 1: the constant tail at r_1."""
    p = np.asarray(per_position, dtype=np.float64)[None, :]
    u, v = fit_tails(p)
    return Tail(p.shape[1], float(u[0]), float(v[0]), p.shape[1] > 1)


def tail_mean(per_position: Sequence[float] | np.ndarray, gamma: int,
              constant: bool = False) -> float:
    """T(gamma) from one row of per-position fractions p_i = a_i / N (:func:`tail_means`)."""
    return float(tail_means(np.asarray(per_position, dtype=np.float64)[None, :], [gamma],
                            constant)[0, 0])


def tail_share_interval(rounds: int, accepted: Sequence[int], extra: int,
                        level: float = 0.95) -> tuple[float, float]:
    """S's interval for ``extra`` positions beyond K (module docstring): the profile-likelihood
    interval when K >= 2, the slope bracket [SLOPE_FLOOR, SLOPE_CEILING] with r_1's Wilson
    interval at K = 1."""
    return _region(int(rounds), tuple(int(a) for a in accepted), float(level)).share(extra)


@dataclass(frozen=True)
class _Region:
    """Boundary of the likelihood region: per slope, the lowest and highest intercept."""

    K: int
    slopes: tuple[float, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]

    def share(self, extra: int) -> tuple[float, float]:
        v = np.array(self.slopes)
        return (float(_share(self.K, np.array(self.low), v, extra).min()),
                float(_share(self.K, np.array(self.high), v, extra).max()))


@lru_cache(maxsize=256)
def _region(rounds: int, accepted: tuple[int, ...], level: float) -> _Region:
    K = len(accepted)
    if K == 1:
        r_lo, r_hi = (float(z) for z in wilson_interval(accepted[0], rounds, level))
        return _Region(1, (SLOPE_FLOOR, SLOPE_CEILING), (_logit(r_lo), _logit(r_lo)),
                       (_logit(r_hi), _logit(r_hi)))
    y, n, x = _data(rounds, accepted)
    u_fit, v_fit = _fit(y[None, :], n[None, :], x)
    u_hat, v_hat = float(u_fit[0]), float(v_fit[0])
    z = float(normal_quantile(0.5 + 0.5 * level))
    cut = _loglik(y, n, x, u_hat, v_hat) - 0.5 * z * z

    def best_u(v: np.ndarray) -> np.ndarray:
        # the likelihood is concave in u: bisect its derivative's sign, every slope at once
        lo, hi = np.full(v.shape, -_BOX), np.full(v.shape, _BOX)
        vx = v[:, None] * x  # the same every step: computed once (this loop is the region's cost)
        for _ in range(50):
            mid = 0.5 * (lo + hi)
            rising = (y - n * _sigmoid(mid[:, None] + vx)).sum(axis=1) > 0
            lo, hi = np.where(rising, mid, lo), np.where(rising, hi, mid)
        u: np.ndarray = 0.5 * (lo + hi)
        return u

    def edge(inside: np.ndarray, outside: np.ndarray,
             ok: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        # the last point of each segment inside -> outside where ok holds (ok at inside)
        inside, outside = inside.astype(np.float64), outside.astype(np.float64)
        done = ok(outside)
        for _ in range(50):
            mid = 0.5 * (inside + outside)
            good = ok(mid)
            inside, outside = np.where(good, mid, inside), np.where(good, outside, mid)
        return np.where(done, outside, inside)

    def profile_ok(v: np.ndarray) -> np.ndarray:
        return _loglik(y, n, x, best_u(v), v) >= cut

    v_lo, v_hi = edge(np.array([v_hat, v_hat]), np.array([-_BOX, 0.0]), profile_ok)
    v = np.array(sorted({*np.linspace(v_lo, v_hi, _GRID).tolist(), v_hat}))
    u0 = best_u(v)
    inside = _loglik(y, n, x, u0, v) >= cut
    v, u0 = v[inside], u0[inside]

    def ok(u: np.ndarray) -> np.ndarray:
        return _loglik(y, n, x, u, v) >= cut

    slopes = v.tolist()
    low = edge(u0, np.full(v.shape, -_BOX), ok).tolist()
    high = edge(u0, np.full(v.shape, _BOX), ok).tolist()
    return _Region(K, tuple(slopes), tuple(low), tuple(high))
