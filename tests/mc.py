"""Monte Carlo against exact values in tests: comparisons that hold for any random stream.

A fixed seed does not fix a test's random stream across CPUs: numpy's exp, log and power differ
in their last bits between SIMD dispatch targets (AVX512_SPR, AVX512_ICL, X86_V4, ...), and a
fixture built with them (a trace, a random table) then feeds the rules different draws. So a
test comparing a Monte Carlo estimate with its exact value is a statistical test, and each here
states its false-alarm probability: at most :data:`FAIL_PROB` per test, split over the test's
assertions by Bonferroni (``assertions``). A 95% interval would be a 5% coin flip on every new
CPU.

The wider bound keeps its teeth: a bias of ``bound + 2.4`` standard errors (normal; a few more
on few degrees of freedom, :func:`detectable`) fails with probability 99%, and the estimates
compared here have standard errors of 0.1-1% of their values. The intervals' own coverage is
tested over many seeds in tests/unit/engine/test_coverage.py, with :func:`binomial_range`.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

from specsim import stats

FAIL_PROB = 1e-6  # false-alarm probability of one test, whatever its random stream


def bound(assertions: int = 1, dof: float = math.inf, fail_prob: float = FAIL_PROB) -> float:
    """How many standard errors ``|estimate - exact|`` may reach: exceeded with probability
    ``fail_prob / assertions`` (two-sided; Student t on ``dof`` degrees of freedom)."""
    return float(stats.student_t_quantile(1 - fail_prob / (2 * assertions), dof))


def detectable(assertions: int = 1, dof: float = math.inf, fail_prob: float = FAIL_PROB) -> float:
    """The bias, in standard errors, that fails the bound 99% of the time."""
    return bound(assertions, dof, fail_prob) + float(stats.student_t_quantile(0.99, dof))


def p_floor(assertions: int = 1, fail_prob: float = FAIL_PROB) -> float:
    """The p-value a goodness-of-fit test under the exact law must exceed, for each of a test's
    ``assertions``: uniform under the null, so each fails with probability p_floor."""
    return fail_prob / assertions


def assert_close(estimate: npt.ArrayLike, se: npt.ArrayLike, exact: npt.ArrayLike, *,
                 dof: float = math.inf, assertions: int = 1, slack: float = 0.0,
                 fail_prob: float = FAIL_PROB, what: str = "") -> None:
    """Every ``|estimate - exact| <= bound(assertions, dof) * se + slack`` (elementwise;
    ``assertions`` counts every element of every call the test makes)."""
    est, err, ex = (np.asarray(a, dtype=float) for a in (estimate, se, exact))
    k = bound(assertions, dof, fail_prob)
    dev = np.abs(est - ex)
    ok = dev <= k * err + slack
    if not np.all(ok):
        with np.errstate(divide="ignore", invalid="ignore"):
            z = (est - ex) / err
        raise AssertionError(
            f"{what or 'Monte Carlo estimate'} {est[~ok] if est.ndim else est} vs exact "
            f"{ex[~ok] if ex.ndim else ex}: z = {z[~ok] if z.ndim else z} beyond +-{k:.2f} "
            f"(false-alarm probability {fail_prob / assertions:.2g} each)")


def assert_batch_mean_close(batch_sums: npt.ArrayLike, batch_counts: npt.ArrayLike,
                            exact: float, *, assertions: int = 1, slack: float = 0.0,
                            what: str = "") -> None:
    """:func:`specsim.stats.batch_mean_interval`'s ratio of sums against ``exact``, with its
    batch standard error on B - 1 degrees of freedom."""
    est, _, _, se = stats.batch_mean_interval(batch_sums, batch_counts)
    assert_close(est, se, exact, dof=np.size(batch_sums) - 1, assertions=assertions,
                 slack=slack, what=what)


def binomial_range(n: int, p: float, fail_prob: float = FAIL_PROB) -> tuple[int, int]:
    """Counts ``lo..hi`` that a Binomial(n, p) count leaves with probability <= ``fail_prob``
    (half in each tail, exact binomial tails)."""
    lo = int(sps.binom.ppf(fail_prob / 2, n, p))  # P(X < lo) < fail_prob / 2
    hi = int(sps.binom.isf(fail_prob / 2, n, p))  # P(X > hi) <= fail_prob / 2
    return lo, hi


def se_of_interval(low: npt.ArrayLike, high: npt.ArrayLike, dof: npt.ArrayLike,
                   level: float = 0.95) -> npt.NDArray[np.float64]:
    """The standard error behind a Student t interval of ``level`` (a table's 95% columns)."""
    half = (np.asarray(high, dtype=float) - np.asarray(low, dtype=float)) / 2
    return half / np.asarray(stats.student_t_quantile(0.5 + level / 2, dof), dtype=float)
