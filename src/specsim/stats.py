"""Statistical helpers for comparing Monte Carlo output with exact theory.

Pure functions, numpy + stdlib only (no scipy).  Special functions follow Numerical
Recipes (incomplete gamma / beta by series and Lentz continued fractions) with the
Loader (2000) saddle-point terms ``stirlerr`` / ``bd0`` for accurate log prefactors.
Functions taking array-like input return a Python ``float`` for scalar input and a
``float64`` array otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from specsim.exact import expected_tokens

__all__ = [
    "GofResult",
    "alpha_from_tokens",
    "batch_mean_interval",
    "chi2_sf",
    "fit_alpha",
    "gof_test",
    "normal_quantile",
    "student_t_quantile",
    "tv_floor",
    "tv_floor_quantile",
    "verdict",
    "wilson_interval",
]

FloatOrArray = float | npt.NDArray[np.float64]

_EPS = 1e-16
_FPMIN = 1e-300
_MAX_ITER = 100_000
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def _out(arr: npt.NDArray[np.float64]) -> FloatOrArray:
    """Return a Python float for 0-d arrays, the array otherwise."""
    return float(arr) if arr.ndim == 0 else arr


def _level_z(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    return NormalDist().inv_cdf(0.5 + 0.5 * level)


# ---------------------------------------------------------------------------
# Loader's saddle-point building blocks
# ---------------------------------------------------------------------------


def _stirlerr(n: float) -> float:
    """log(n!) - log(sqrt(2 pi n) (n/e)^n), accurate for all n > 0."""
    if n <= 15.0:
        return math.lgamma(n + 1.0) - (n + 0.5) * math.log(n) + n - _LOG_SQRT_2PI
    nn = n * n
    s0, s1, s2, s3, s4 = 1 / 12, 1 / 360, 1 / 1260, 1 / 1680, 1 / 1188
    if n > 500:
        return (s0 - s1 / nn) / n
    if n > 80:
        return (s0 - (s1 - s2 / nn) / nn) / n
    if n > 35:
        return (s0 - (s1 - (s2 - s3 / nn) / nn) / nn) / n
    return (s0 - (s1 - (s2 - (s3 - s4 / nn) / nn) / nn) / nn) / n


def _bd0(x: float, m: float) -> float:
    """Deviance term x log(x/m) + m - x, computed without cancellation."""
    if abs(x - m) < 0.1 * (x + m):
        v = (x - m) / (x + m)
        s = (x - m) * v
        ej = 2.0 * x * v
        v2 = v * v
        for j in range(1, 1000):
            ej *= v2
            s1 = s + ej / (2 * j + 1)
            if s1 == s:
                return s1
            s = s1
        return s
    return x * math.log(x / m) + m - x


def _log_dbinom(k: int, n: int, p: float) -> float:
    """log P(X = k) for X ~ Binomial(n, p), 0 < p < 1, via Loader's algorithm."""
    q = 1.0 - p
    if k == 0:
        return n * math.log1p(-p)
    if k == n:
        return n * math.log(p)
    lc = _stirlerr(n) - _stirlerr(k) - _stirlerr(n - k) - _bd0(k, n * p) - _bd0(n - k, n * q)
    lf = math.log(2.0 * math.pi) + math.log(k) + math.log1p(-k / n)
    return lc - 0.5 * lf


# ---------------------------------------------------------------------------
# Chi-square survival function
# ---------------------------------------------------------------------------


def _log_gamma_prefactor(a: float, x: float) -> float:
    """log(x^a e^-x / Gamma(a)) for a, x > 0 (Loader's Poisson density form)."""
    return math.log(a) - _stirlerr(a) - _bd0(a, x) - _LOG_SQRT_2PI - 0.5 * math.log(a)


def _gammq_scalar(a: float, x: float) -> float:
    """Regularized upper incomplete gamma Q(a, x) (Numerical Recipes gammq)."""
    if math.isnan(a) or math.isnan(x):
        return math.nan
    if a <= 0.0:
        raise ValueError(f"shape must be positive, got {a}")
    if x <= 0.0:
        return 1.0
    if math.isinf(x):
        return 0.0
    log_pre = _log_gamma_prefactor(a, x)
    if x < a + 1.0:
        # Series for P(a, x); Q = 1 - P (P is not close to 1 in this region).
        ap = a
        term = 1.0 / a
        total = term
        for _ in range(_MAX_ITER):
            ap += 1.0
            term *= x / ap
            total += term
            if abs(term) < abs(total) * _EPS:
                break
        return max(0.0, 1.0 - total * math.exp(log_pre))
    # Modified Lentz continued fraction for Q(a, x).
    b = x + 1.0 - a
    c = 1.0 / _FPMIN
    d = 1.0 / b
    h = d
    for i in range(1, _MAX_ITER):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        if abs(d) < _FPMIN:
            d = _FPMIN
        c = b + an / c
        if abs(c) < _FPMIN:
            c = _FPMIN
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            break
    return math.exp(log_pre) * h


def chi2_sf(x: npt.ArrayLike, df: npt.ArrayLike) -> FloatOrArray:
    """Chi-square survival function P(X > x) = Q(df/2, x/2), broadcasting over inputs."""
    xa, dfa = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(df, dtype=float))
    out = np.empty(xa.shape, dtype=float)
    for idx in np.ndindex(xa.shape):
        out[idx] = _gammq_scalar(0.5 * float(dfa[idx]), 0.5 * float(xa[idx]))
    return _out(out)


# ---------------------------------------------------------------------------
# Quantiles
# ---------------------------------------------------------------------------


def normal_quantile(p: npt.ArrayLike) -> FloatOrArray:
    """Standard normal quantile (inverse CDF); p = 0 / 1 map to -inf / +inf."""
    pa = np.asarray(p, dtype=float)
    if np.any((pa < 0.0) | (pa > 1.0)):
        raise ValueError("probabilities must lie in [0, 1]")
    nd = NormalDist()
    out = np.empty(pa.shape, dtype=float)
    for idx in np.ndindex(pa.shape):
        v = float(pa[idx])
        if math.isnan(v):
            out[idx] = math.nan
        elif v == 0.0:
            out[idx] = -math.inf
        elif v == 1.0:
            out[idx] = math.inf
        else:
            out[idx] = nd.inv_cdf(v)
    return _out(out)


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction for the incomplete beta function (modified Lentz)."""
    qab = a + b
    qap = a + 1.0
    qam = a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    if abs(d) < _FPMIN:
        d = _FPMIN
    d = 1.0 / d
    h = d
    for m in range(1, _MAX_ITER):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        if abs(d) < _FPMIN:
            d = _FPMIN
        c = 1.0 + aa / c
        if abs(c) < _FPMIN:
            c = _FPMIN
        d = 1.0 / d
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        if abs(d) < _FPMIN:
            d = _FPMIN
        c = 1.0 + aa / c
        if abs(c) < _FPMIN:
            c = _FPMIN
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            break
    return h


def _betainc(a: float, b: float, x: float, y: float) -> float:
    """Regularized incomplete beta I_x(a, b); y = 1 - x is passed to avoid cancellation."""
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    log_bt = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(y)
    )
    bt = math.exp(log_bt)
    if x < (a + 1.0) / (a + b + 2.0):
        return bt * _betacf(a, b, x) / a
    return 1.0 - bt * _betacf(b, a, y) / b


def _t_upper_tail(t: float, df: float) -> float:
    """P(T > t) for t >= 0 and T ~ Student t with df degrees of freedom."""
    t2 = t * t
    return 0.5 * _betainc(0.5 * df, 0.5, df / (df + t2), t2 / (df + t2))


def _t_quantile_scalar(p: float, df: float) -> float:
    if math.isnan(p) or math.isnan(df):
        return math.nan
    if df <= 0.0:
        raise ValueError(f"df must be positive, got {df}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"probability must lie in [0, 1], got {p}")
    if p == 0.5:
        return 0.0
    if p in (0.0, 1.0):
        return math.copysign(math.inf, p - 0.5)
    if math.isinf(df):
        return NormalDist().inv_cdf(p)
    upper = p > 0.5
    tail = 1.0 - p if upper else p
    lo, hi = 0.0, 1.0
    while _t_upper_tail(hi, df) > tail:
        lo, hi = hi, 2.0 * hi
        if hi > 1e300:
            break
    for _ in range(2000):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if _t_upper_tail(mid, df) > tail:
            lo = mid
        else:
            hi = mid
    t = 0.5 * (lo + hi)
    return t if upper else -t


def student_t_quantile(p: npt.ArrayLike, df: npt.ArrayLike) -> FloatOrArray:
    """Student t quantile by bisection on the exact CDF (regularized incomplete beta)."""
    pa, dfa = np.broadcast_arrays(np.asarray(p, dtype=float), np.asarray(df, dtype=float))
    out = np.empty(pa.shape, dtype=float)
    for idx in np.ndindex(pa.shape):
        out[idx] = _t_quantile_scalar(float(pa[idx]), float(dfa[idx]))
    return _out(out)


# ---------------------------------------------------------------------------
# Confidence intervals
# ---------------------------------------------------------------------------


def wilson_interval(
    successes: npt.ArrayLike, trials: npt.ArrayLike, level: float = 0.95
) -> tuple[FloatOrArray, FloatOrArray]:
    """Wilson score interval (low, high) for a binomial proportion; trials == 0 gives (0, 1)."""
    z = _level_z(level)
    x, n = np.broadcast_arrays(np.asarray(successes, dtype=float), np.asarray(trials, dtype=float))
    if np.any(n < 0) or np.any(x < 0) or np.any(x > n):
        raise ValueError("need 0 <= successes <= trials")
    empty = n == 0
    ns = np.where(empty, 1.0, n)
    z2 = z * z
    denom = ns + z2
    center = (x + 0.5 * z2) / denom
    half = z / denom * np.sqrt(x * (ns - x) / ns + 0.25 * z2)
    low = np.where(empty, 0.0, np.clip(center - half, 0.0, 1.0))
    high = np.where(empty, 1.0, np.clip(center + half, 0.0, 1.0))
    # Exact endpoints at the boundaries (avoid rounding noise at x = 0 or x = n).
    low = np.where(x == 0, 0.0, low)
    high = np.where((x == n) & ~empty, 1.0, high)
    return _out(low), _out(high)


def batch_mean_interval(
    batch_sums: npt.ArrayLike, batch_counts: npt.ArrayLike, level: float = 0.95
) -> tuple[float, float, float, float]:
    """Ratio-of-sums estimate sum(y)/sum(x) over independent batches with a t interval.

    Delta-method variance Var(R) ~ sum((y_i - R x_i)^2) / (B (B - 1) xbar^2) with a
    Student t quantile on B - 1 degrees of freedom.  Returns (estimate, low, high, stderr).
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
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
    tq = float(student_t_quantile(0.5 + 0.5 * level, b - 1))
    return est, est - tq * se, est + tq * se, se


# ---------------------------------------------------------------------------
# Total-variation noise floor
# ---------------------------------------------------------------------------


def _binom_mad(n: int, p: float) -> float:
    """E|X - n p| for X ~ Binomial(n, p), de Moivre's closed form in log space."""
    if p <= 0.0 or p >= 1.0 or n == 0:
        return 0.0
    nu = math.floor(n * p) + 1
    if nu > n:
        return 0.0
    # E|X - np| = 2 nu C(n, nu) p^nu q^(n - nu + 1) = 2 nu q P(X = nu).
    return 2.0 * nu * (1.0 - p) * math.exp(_log_dbinom(nu, n, p))


def _check_probs(p: npt.ArrayLike) -> npt.NDArray[np.float64]:
    pa = np.asarray(p, dtype=float).ravel()
    if pa.size == 0 or np.any(~np.isfinite(pa)) or np.any(pa < 0):
        raise ValueError("probabilities must be finite and non-negative")
    s = float(pa.sum())
    if abs(s - 1.0) > 1e-8:
        raise ValueError(f"probabilities must sum to 1, got {s!r}")
    return pa / s


def tv_floor(p: npt.ArrayLike, n: int) -> float:
    """Exact E[TV(empirical of n i.i.d. draws from p, p)] = sum_i E|X_i - n p_i| / (2 n)."""
    pa = _check_probs(p)
    n = int(n)
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    return math.fsum(_binom_mad(n, float(pi)) for pi in pa) / (2.0 * n)


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
    """G-test (2 sum O ln(O/E)) of observed counts against exact probabilities.

    Cells with expected count below ``min_expected`` are pooled into one cell (smallest
    expected first, extended until the pooled expectation reaches ``min_expected``).
    Any observation in a zero-probability cell gives p-value 0 (statistic inf).
    df = cells after pooling - 1; df == 0 gives p-value 1.
    """
    obs = np.asarray(counts, dtype=float).ravel()
    pa = _check_probs(probs)
    if obs.shape != pa.shape:
        raise ValueError("counts and probs must have the same length")
    if np.any(obs < 0) or np.any(~np.isfinite(obs)):
        raise ValueError("counts must be finite and non-negative")
    n = round(float(obs.sum()))
    support = pa > 0
    if np.any(obs[~support] > 0):
        cells = int(support.sum()) + 1
        return GofResult(math.inf, cells - 1, 0.0, n, cells)
    o = obs[support]
    e = n * pa[support]
    if n == 0:
        return GofResult(0.0, 0, 1.0, 0, 1)
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
    pos = o > 0
    stat = max(0.0, 2.0 * float(np.sum(o[pos] * np.log(o[pos] / e[pos]))))
    if df == 0:
        return GofResult(stat, 0, 1.0, n, cells)
    return GofResult(stat, df, float(chi2_sf(stat, df)), n, cells)


def chi2_isf(level: float, df: int) -> float:
    """Critical value x with chi2_sf(x, df) = level, by bisection (monotone in x)."""
    lo, hi = 0.0, float(df) + 10.0
    while float(chi2_sf(hi, df)) > level:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if float(chi2_sf(mid, df)) > level:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def gof_power(true_probs: npt.ArrayLike, null_probs: npt.ArrayLike, n: int,
              level: float = 1e-3) -> float:
    """Approximate power of :func:`gof_test` at ``level`` when data come from ``true_probs``.

    Under the alternative the G statistic is approximately non-central chi-square with
    non-centrality 2 n KL(true || null) (Patnaik's normal approximation is used); mass on
    cells the null forbids is detected with probability 1 - (1 - mass)^n. Used to say when
    a 'lossless' verdict for a broken rule is a missed detection rather than a finding.
    """
    t = np.asarray(true_probs, dtype=float).ravel()
    q = np.asarray(null_probs, dtype=float).ravel()
    forbidden = float(t[q <= 0].sum())
    if forbidden > 0:
        return float(1.0 - (1.0 - forbidden) ** n)
    pos = t > 0
    kl = float(np.sum(t[pos] * np.log(t[pos] / q[pos])))
    df = max(1, int((q > 0).sum()) - 1)
    lam = 2.0 * n * kl
    crit = chi2_isf(level, df)
    z = (crit - df - lam) / math.sqrt(2.0 * (df + 2.0 * lam))
    return float(1.0 - NormalDist().cdf(z))


def verdict(p_value: float, level: float = 1e-3) -> str:
    """'lossless' if p_value >= level else 'biased'.

    ``level`` is the false-alarm rate per test; many rows are tested, so it is chosen
    small (default 1e-3) to keep the family-wise false alarm rate low (Bonferroni-style:
    with m rows the chance of any false 'biased' is at most m * level).
    """
    return "lossless" if p_value >= level else "biased"


# ---------------------------------------------------------------------------
# Acceptance rate alpha
# ---------------------------------------------------------------------------


def _alpha_loglik(alpha: float, s: float, f: float) -> float:
    """Truncated-geometric log-likelihood S log(alpha) + F log(1 - alpha), 0 log 0 = 0."""
    ll = 0.0
    if s > 0:
        ll += s * math.log(alpha) if alpha > 0 else -math.inf
    if f > 0:
        ll += f * math.log1p(-alpha) if alpha < 1 else -math.inf
    return ll


def fit_alpha(accepted_hist: npt.ArrayLike, level: float = 0.95) -> tuple[float, float, float]:
    """MLE of alpha with a likelihood-ratio interval from accepted-draft counts h[0..gamma].

    Law: P(k) = alpha^k (1 - alpha) for k < gamma, P(gamma) = alpha^gamma.  The MLE is
    S / (S + R - h_gamma), S = sum k h_k, R = sum h_k.  The interval is
    {alpha : 2 (l(hat) - l(alpha)) <= chi2_{1, level}}, found by bisection.
    Returns (alpha_hat, low, high).
    """
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
    cut = _alpha_loglik(alpha_hat, s, f) - 0.5 * _level_z(level) ** 2

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
