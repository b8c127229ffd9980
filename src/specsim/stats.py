"""Statistical helpers for comparing Monte Carlo output with exact theory.

Distributions and special functions come from :mod:`scipy.stats` and :mod:`scipy.special`;
this module adds the project's decision logic on top of them: pooling of small expected
cells for the G-test and the verdict threshold, the exact total-variation noise floor, the
ratio-of-sums batch interval, the power of the G-test, and the truncated-geometric fit of
the acceptance rate alpha.  Functions taking array-like input return a Python ``float`` for
scalar input and a ``float64`` array otherwise.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from specsim.exact import expected_tokens
from specsim.precision import at_least


class _Lazy:
    """A module imported on first use: ``scipy.stats`` costs a second or more to import, and
    processes that import this module without testing anything (the figures job, through
    :mod:`specsim.checks`) should not pay it."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)


special: Any = _Lazy("scipy.special")
stats: Any = _Lazy("scipy.stats")


__all__ = [
    "GofResult",
    "alpha_from_tokens",
    "batch_mean_interval",
    "chi2_isf",
    "chi2_sf",
    "fit_alpha",
    "gof_power",
    "gof_test",
    "normal_quantile",
    "student_t_quantile",
    "tv_floor",
    "tv_floor_quantile",
    "verdict",
    "wilson_interval",
]

FloatOrArray = float | npt.NDArray[np.float64]


def _out(arr: npt.ArrayLike) -> FloatOrArray:
    """Return a Python float for 0-d input, a float64 array otherwise."""
    a = np.asarray(arr, dtype=float)
    return float(a) if a.ndim == 0 else a


def _check_level(level: float) -> None:
    """Reject confidence levels outside the open interval (0, 1)."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")


# ---------------------------------------------------------------------------
# Distribution functions (thin, validated wrappers over scipy.stats / scipy.special)
# ---------------------------------------------------------------------------


def chi2_sf(x: npt.ArrayLike, df: npt.ArrayLike) -> FloatOrArray:
    """Chi-square survival function P(X > x) (``scipy.stats.chi2.sf``), broadcasting.

    x <= 0 gives 1, x = inf gives 0, NaN propagates; a non-positive df raises ValueError.
    """
    dfa = np.asarray(df, dtype=float)
    if np.any(dfa <= 0.0):
        raise ValueError("df must be positive")
    return _out(stats.chi2.sf(x, dfa))


def chi2_isf(level: float, df: int) -> float:
    """Critical value x with P(X > x) = level for X ~ chi-square(df) (``chi2.isf``)."""
    return float(stats.chi2.isf(level, df))


def normal_quantile(p: npt.ArrayLike) -> FloatOrArray:
    """Standard normal quantile (``scipy.special.ndtri``); p = 0 / 1 map to -inf / +inf."""
    pa = np.asarray(p, dtype=float)
    if np.any((pa < 0.0) | (pa > 1.0)):
        raise ValueError("probabilities must lie in [0, 1]")
    return _out(special.ndtri(pa))


def student_t_quantile(p: npt.ArrayLike, df: npt.ArrayLike) -> FloatOrArray:
    """Student t quantile (``scipy.stats.t.ppf``), broadcasting; df = inf is the normal.

    p = 0 / 1 map to -inf / +inf and NaN propagates; p outside [0, 1] or a non-positive
    df raises ValueError.
    """
    pa = np.asarray(p, dtype=float)
    dfa = np.asarray(df, dtype=float)
    if np.any(dfa <= 0.0):
        raise ValueError("df must be positive")
    if np.any((pa < 0.0) | (pa > 1.0)):
        raise ValueError("probabilities must lie in [0, 1]")
    return _out(stats.t.ppf(pa, dfa))


# ---------------------------------------------------------------------------
# Confidence intervals
# ---------------------------------------------------------------------------


def wilson_interval(
    successes: npt.ArrayLike, trials: npt.ArrayLike, level: float = 0.95
) -> tuple[FloatOrArray, FloatOrArray]:
    """Wilson (1927) score interval (low, high) for a binomial proportion, broadcasting.

    The same closed form as ``scipy.stats.binomtest(k, n).proportion_ci(method="wilson")``
    (which takes one scalar pair at a time), with exact endpoints 0 at x = 0 and 1 at
    x = n; trials == 0 gives (0, 1).
    """
    _check_level(level)
    z = float(special.ndtri(0.5 + 0.5 * level))
    x, n = np.broadcast_arrays(np.asarray(successes, dtype=float), np.asarray(trials, dtype=float))
    if np.any(n < 0) or np.any(x < 0) or np.any(x > n):
        raise ValueError("need 0 <= successes <= trials")
    empty = n == 0
    ns = np.where(empty, 1.0, n)
    z2 = z * z
    denom = ns + z2
    center = (x + 0.5 * z2) / denom
    half = z / denom * np.sqrt(x * (ns - x) / ns + 0.25 * z2)
    low = np.where(empty | (x == 0), 0.0, np.clip(center - half, 0.0, 1.0))
    high = np.where(empty | (x == n), 1.0, np.clip(center + half, 0.0, 1.0))
    return _out(low), _out(high)


def batch_mean_interval(
    batch_sums: npt.ArrayLike, batch_counts: npt.ArrayLike, level: float = 0.95
) -> tuple[float, float, float, float]:
    """Ratio-of-sums estimate sum(y)/sum(x) over independent batches with a t interval.

    Delta-method variance Var(R) ~ sum((y_i - R x_i)^2) / (B (B - 1) xbar^2) with a
    Student t quantile on B - 1 degrees of freedom.  Returns (estimate, low, high, stderr).
    """
    _check_level(level)
    y = np.asarray(batch_sums, dtype=float).ravel()
    x = np.asarray(batch_counts, dtype=float).ravel()
    if y.shape != x.shape:
        raise ValueError("batch_sums and batch_counts must have the same length")
    b = y.size
    if b < 2:
        raise ValueError(f"need at least 2 independent batches for an interval, got {b}")
    total = float(x.sum())
    if not total > 0.0:
        raise ValueError("sum of batch_counts must be positive")
    est = float(y.sum()) / total
    xbar = total / b
    resid = y - est * x
    var = float(np.sum(resid * resid)) / (b * (b - 1) * xbar * xbar)
    se = math.sqrt(var)
    # t.ppf is stdtrit inside (0, 1): the same float, without importing scipy.stats (~0.6 s)
    tq = float(special.stdtrit(b - 1, 0.5 + 0.5 * level))
    return est, est - tq * se, est + tq * se, se


# ---------------------------------------------------------------------------
# Total-variation noise floor
# ---------------------------------------------------------------------------


def _check_probs(p: npt.ArrayLike) -> npt.NDArray[np.float64]:
    pa = np.asarray(p, dtype=float).ravel()
    if pa.size == 0 or np.any(~np.isfinite(pa)) or np.any(pa < 0):
        raise ValueError("probabilities must be finite and non-negative")
    s = float(pa.sum())
    if abs(s - 1.0) > 1e-8:
        raise ValueError(f"probabilities must sum to 1, got {s!r}")
    return pa / s


def tv_floor(p: npt.ArrayLike, n: int) -> float:
    """Exact E[TV(empirical of n i.i.d. draws from p, p)] = sum_i E|X_i - n p_i| / (2 n).

    X_i ~ Binomial(n, p_i) has de Moivre's mean absolute deviation
    E|X - n p| = 2 nu (1 - p) P(X = nu), nu = floor(n p) + 1 (Diaconis & Zabell 1991),
    with P(X = nu) from ``scipy.stats.binom.pmf``; it is 0 when nu > n or p is 0 or 1.
    """
    pa = _check_probs(p)
    n = int(n)
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    nu = np.floor(n * pa) + 1.0
    live = (pa > 0.0) & (pa < 1.0) & (nu <= n)
    pl, nl = pa[live], nu[live]
    mad = 2.0 * nl * (1.0 - pl) * stats.binom.pmf(nl, n, pl)
    return math.fsum(mad) / (2.0 * n)


def tv_floor_quantile(
    p: npt.ArrayLike,
    n: int,
    q: float = 0.99,
    draws: int = 2000,
    rng: np.random.Generator | int | None = None,
) -> float:
    """Monte Carlo q-quantile of TV(empirical of n draws from p, p) from multinomial draws."""
    pa = _check_probs(p)
    if int(n) <= 0 or draws <= 0 or not 0.0 <= q <= 1.0:
        raise ValueError("need n > 0, draws > 0 and 0 <= q <= 1")
    gen = np.random.default_rng(rng)
    counts = gen.multinomial(int(n), pa, size=int(draws))
    tv = 0.5 * np.abs(counts / float(n) - pa).sum(axis=1)
    return float(np.quantile(tv, q))


# ---------------------------------------------------------------------------
# Goodness of fit
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class GofResult:
    """G-test outcome: statistic, degrees of freedom, p-value, sample size, cells used."""

    statistic: float
    df: int
    p_value: float
    n: int
    cells: int


def gof_test(counts: npt.ArrayLike, probs: npt.ArrayLike, min_expected: float = 5.0) -> GofResult:
    """G-test (likelihood-ratio test, G = 2 sum O ln(O/E)) of counts against exact probabilities.

    Cells with expected count below ``min_expected`` are pooled into one cell (smallest
    expected first, extended until the pooled expectation reaches ``min_expected``); the
    pooled table goes to ``scipy.stats.power_divergence(lambda_="log-likelihood")``, whose
    p-value is the chi-square(cells - 1) tail.  Any observation in a zero-probability cell
    gives p-value 0 (statistic inf); df == 0 (everything pooled) gives p-value 1.
    """
    obs = np.asarray(counts, dtype=float).ravel()
    pa = _check_probs(probs)
    if obs.shape != pa.shape:
        raise ValueError("counts and probs must have the same length")
    if np.any(obs < 0) or np.any(~np.isfinite(obs)):
        raise ValueError("counts must be finite and non-negative")
    total = float(obs.sum())
    n = round(total)
    support = pa > 0
    if np.any(obs[~support] > 0):
        cells = int(support.sum()) + 1
        return GofResult(math.inf, cells - 1, 0.0, n, cells)
    if n == 0:
        return GofResult(0.0, 0, 1.0, 0, 1)
    o = obs[support]
    e = total * pa[support]
    order = np.argsort(e, kind="stable")
    o, e = o[order], e[order]
    n_small = int(np.searchsorted(e, min_expected, side="left"))
    if n_small > 0:
        csum = np.cumsum(e)
        # Smallest k >= n_small with pooled expectation >= min_expected (or everything).
        k = max(n_small, int(np.searchsorted(csum, min_expected, side="left")) + 1)
        k = min(k, e.size)
        o = np.concatenate(([o[:k].sum()], o[k:]))
        e = np.concatenate(([e[:k].sum()], e[k:]))
    cells = int(e.size)
    df = cells - 1
    g = stats.power_divergence(o, e, lambda_="log-likelihood")
    stat = max(0.0, float(g.statistic))  # rounding can leave -1e-15 for a perfect fit
    return GofResult(stat, df, float(g.pvalue) if df > 0 else 1.0, n, cells)


def gof_power(true_probs: npt.ArrayLike, null_probs: npt.ArrayLike, n: int,
              level: float = 1e-3) -> float:
    """Power of :func:`gof_test` at ``level`` when data come from ``true_probs``.

    Under the alternative the G statistic is asymptotically non-central chi-square with
    df = (null support) - 1 and non-centrality 2 n KL(true || null); the power is its tail
    beyond the chi-square critical value (``scipy.stats.ncx2.sf``).  Mass on cells the null
    forbids is detected with probability 1 - (1 - mass)^n.  Used to say when a 'lossless'
    verdict for a broken rule is a missed detection rather than a finding.
    """
    t = np.asarray(true_probs, dtype=float).ravel()
    q = np.asarray(null_probs, dtype=float).ravel()
    forbidden = float(t[q <= 0].sum())
    if forbidden > 0:
        return float(1.0 - (1.0 - forbidden) ** n)
    allowed = q > 0
    kl = float(np.sum(special.rel_entr(t[allowed], q[allowed])))
    df = max(1, int(allowed.sum()) - 1)
    lam = max(0.0, 2.0 * n * kl)  # KL >= 0; clip rounding below zero
    return float(stats.ncx2.sf(chi2_isf(level, df), df, lam))


def verdict(p_value: float, level: float = 1e-3) -> str:
    """'lossless' if p_value >= level else 'biased'.

    ``level`` is the false-alarm rate per test; many rows are tested, so it is chosen
    small (default 1e-3) to keep the family-wise false alarm rate low (Bonferroni-style:
    with m rows the chance of any false 'biased' is at most m * level). The p-value is
    compared up to :data:`specsim.precision.EXACT_RTOL` (its expected counts come from an
    exact law whose last bits depend on the CPU).
    """
    return "lossless" if bool(at_least(p_value, level)) else "biased"


# ---------------------------------------------------------------------------
# Acceptance rate alpha
# ---------------------------------------------------------------------------


def _alpha_loglik(alpha: float, s: float, f: float) -> float:
    """Truncated-geometric log-likelihood S log(alpha) + F log(1 - alpha), 0 log 0 = 0."""
    return float(special.xlogy(s, alpha) + special.xlog1py(f, -alpha))


def fit_alpha(accepted_hist: npt.ArrayLike, level: float = 0.95) -> tuple[float, float, float]:
    """MLE of alpha with a likelihood-ratio interval from accepted-draft counts h[0..gamma].

    Law: P(k) = alpha^k (1 - alpha) for k < gamma, P(gamma) = alpha^gamma.  The MLE is
    S / (S + R - h_gamma), S = sum k h_k, R = sum h_k.  The interval is
    {alpha : 2 (l(hat) - l(alpha)) <= chi2_{1, level}} (Wilks), found by bisection.
    Returns (alpha_hat, low, high).
    """
    _check_level(level)
    h = np.asarray(accepted_hist, dtype=float).ravel()
    if h.size < 2:
        raise ValueError("histogram must cover k = 0..gamma with gamma >= 1")
    if np.any(h < 0) or np.any(~np.isfinite(h)):
        raise ValueError("histogram counts must be finite and non-negative")
    s = float(np.dot(np.arange(h.size, dtype=float), h))
    f = float(h.sum() - h[-1])  # rounds ending in a rejection
    if s + f <= 0:
        raise ValueError("histogram carries no information about alpha (no rounds)")
    alpha_hat = s / (s + f)
    cut = _alpha_loglik(alpha_hat, s, f) - 0.5 * float(stats.chi2.ppf(level, 1))

    def solve(inside: float, outside: float) -> float:
        if _alpha_loglik(outside, s, f) >= cut:
            return outside
        for _ in range(200):
            mid = 0.5 * (inside + outside)
            if mid in (inside, outside):
                break
            if _alpha_loglik(mid, s, f) >= cut:
                inside = mid
            else:
                outside = mid
        return 0.5 * (inside + outside)

    return alpha_hat, solve(alpha_hat, 0.0), solve(alpha_hat, 1.0)


def alpha_from_tokens(mean_tokens: npt.ArrayLike, gamma: int) -> FloatOrArray:
    """Invert E[tokens] = (1 - alpha^(gamma+1)) / (1 - alpha) for alpha in [0, 1] by bisection.

    ``mean_tokens`` is clipped to [1, gamma + 1]; NaN stays NaN.
    """
    gamma = int(gamma)
    if gamma < 1:
        raise ValueError(f"gamma must be >= 1, got {gamma}")
    m = np.asarray(mean_tokens, dtype=float)
    nan = np.isnan(m)
    target = np.clip(np.where(nan, 1.0, m), 1.0, gamma + 1.0)
    lo = np.zeros_like(target)
    hi = np.ones_like(target)
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        below = np.asarray(expected_tokens(mid, gamma)) < target
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    alpha = 0.5 * (lo + hi)
    alpha = np.where(target <= 1.0, 0.0, np.where(target >= gamma + 1.0, 1.0, alpha))
    return _out(np.where(nan, np.nan, alpha))
