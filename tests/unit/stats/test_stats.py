"""Tests for specsim.stats against independent references (closed forms, scipy, MC)."""

from __future__ import annotations

import math

import mc
import numpy as np
import pytest
from scipy.stats import binomtest

from specsim.stats import (
    GofResult,
    alpha_from_tokens,
    batch_mean_interval,
    chi2_isf,
    chi2_sf,
    fit_alpha,
    gof_power,
    gof_test,
    normal_quantile,
    student_t_quantile,
    tv_floor,
    tv_floor_quantile,
    verdict,
    wilson_interval,
)

# ---------------------------------------------------------------------------
# Distribution wrappers: argument wiring, edge cases and validation
# (the special functions themselves are scipy's and tested there)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 3, 5, 10, 40, 200])
def test_chi2_sf_even_df_closed_form(k: int) -> None:
    # Q(k, y) = exp(-y) sum_{j<k} y^j / j! for integer k (df = 2k).
    xs = np.array([1e-3, 0.5, 2.0, 10.0, 50.0, 2.0 * k, 200.0, 800.0])
    ref = np.array(
        [
            math.fsum(math.exp(-x / 2 + j * math.log(x / 2) - math.lgamma(j + 1)) for j in range(k))
            for x in xs
        ]
    )
    got = chi2_sf(xs, 2 * k)
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=0)


def test_chi2_sf_df1_erfc_and_edges() -> None:
    xs = np.array([1e-6, 0.1, 1.0, 3.0, 30.0, 300.0])
    ref = np.array([math.erfc(math.sqrt(x / 2)) for x in xs])
    np.testing.assert_allclose(chi2_sf(xs, 1), ref, rtol=1e-12)
    got = chi2_sf(3.841458820694124, 1)
    assert isinstance(got, float) and got == pytest.approx(0.05, rel=1e-12)
    # exact: documented edge values, returned rather than computed
    assert chi2_sf(0.0, 4) == 1.0
    assert chi2_sf(-1.0, 4) == 1.0
    assert chi2_sf(math.inf, 4) == 0.0
    assert math.isnan(chi2_sf(math.nan, 4))
    # Broadcasting and monotonicity in x.
    grid = chi2_sf(np.linspace(0.1, 60, 50)[:, None], np.array([1, 5, 20]))
    assert grid.shape == (50, 3)
    assert np.all(np.diff(grid, axis=0) < 0)
    with pytest.raises(ValueError):
        chi2_sf(1.0, 0)


def test_chi2_isf_inverts_chi2_sf() -> None:
    # df = 2 closed form: sf(x) = exp(-x / 2).
    assert chi2_isf(1e-3, 2) == pytest.approx(-2 * math.log(1e-3), rel=1e-13)
    for level, df in [(0.05, 1), (1e-6, 7), (0.5, 300)]:
        assert chi2_sf(chi2_isf(level, df), df) == pytest.approx(level, rel=1e-12)


def test_student_t_quantile_table_values() -> None:
    assert student_t_quantile(0.975, 10) == pytest.approx(2.228138852, abs=1e-9)
    # Tables print 1.998340522 for 63 df; quadrature of the t pdf gives 1.99834054252
    # (CDF error of the table value ~1e-9), so check the tight reference and the table loosely.
    t63 = student_t_quantile(0.975, 63)
    assert t63 == pytest.approx(1.998340522, abs=5e-8)
    assert t63 == pytest.approx(1.998340542520738, abs=1e-11)
    assert student_t_quantile(0.995, 5) == pytest.approx(4.032142983557536, abs=1e-9)


def test_student_t_quantile_closed_forms_and_symmetry() -> None:
    ps = np.array([0.001, 0.05, 0.3, 0.5, 0.7, 0.95, 0.999])
    # df = 1 (Cauchy) and df = 2 have closed-form quantiles.
    np.testing.assert_allclose(
        student_t_quantile(ps, 1), np.tan(np.pi * (ps - 0.5)), rtol=1e-12, atol=1e-14
    )
    np.testing.assert_allclose(
        student_t_quantile(ps, 2), (2 * ps - 1) / np.sqrt(2 * ps * (1 - ps)), rtol=1e-12, atol=1e-14
    )
    np.testing.assert_allclose(student_t_quantile(1 - ps, 7), -student_t_quantile(ps, 7))
    # Large df approaches the normal quantile; Cornish-Fisher z + (z^3 + z) / (4 df) at 1e7.
    z = 1.959963984540054
    assert student_t_quantile(0.975, math.inf) == pytest.approx(z, abs=1e-12)
    assert student_t_quantile(0.975, 1e7) == pytest.approx(z + (z**3 + z) / 4e7, abs=1e-12)


def test_student_t_quantile_edges_and_errors() -> None:
    out = student_t_quantile([0.0, 0.5, 1.0, math.nan], 3)
    assert out[0] == -math.inf and out[1] == 0.0 and out[2] == math.inf and math.isnan(out[3])
    assert isinstance(student_t_quantile(0.9, 4), float)
    with pytest.raises(ValueError):
        student_t_quantile(0.9, 0)
    with pytest.raises(ValueError):
        student_t_quantile(1.2, 3)


def test_normal_quantile() -> None:
    assert normal_quantile(0.975) == pytest.approx(1.959963984540054, abs=1e-12)
    out = normal_quantile([0.0, 0.5, 1.0])
    assert out[0] == -math.inf and out[1] == 0.0 and out[2] == math.inf
    with pytest.raises(ValueError):
        normal_quantile(1.5)


# ---------------------------------------------------------------------------
# Intervals
# ---------------------------------------------------------------------------


def test_wilson_interval_hand_computed() -> None:
    # x = 7, n = 20, z = 1.959963984540054:
    # centre = (7 + z^2/2) / (20 + z^2) = 0.3741687...
    # half = z / (20 + z^2) * sqrt(7 * 13 / 20 + z^2 / 4) = 0.1929769...
    low, high = wilson_interval(7, 20)
    assert low == pytest.approx(0.18119182, abs=1e-8)
    assert high == pytest.approx(0.56714572, abs=1e-8)
    lows, highs = wilson_interval([0, 20, 0, 7], [20, 20, 0, 20], level=0.95)
    assert lows[0] == 0.0 and highs[1] == 1.0
    assert (lows[2], highs[2]) == (0.0, 1.0)
    assert lows[3] == pytest.approx(low) and highs[3] == pytest.approx(high)
    # Zero successes: upper bound z^2 / (n + z^2).
    z2 = 1.959963984540054**2
    assert highs[0] == pytest.approx(z2 / (20 + z2), rel=1e-12)
    with pytest.raises(ValueError):
        wilson_interval(5, 3)


def test_wilson_interval_matches_scipy_binomtest() -> None:
    cases = [(0, 1), (1, 1), (3, 17), (7, 20), (500, 1000), (12345, 10**6), (1, 10**9)]
    for level in (0.5, 0.95, 0.999):
        lows, highs = wilson_interval([x for x, _ in cases], [n for _, n in cases], level)
        for (x, n), lo, hi in zip(cases, lows, highs, strict=True):
            ci = binomtest(x, n).proportion_ci(confidence_level=level, method="wilson")
            assert (lo, hi) == pytest.approx((ci.low, ci.high), rel=1e-12, abs=1e-15)


def test_batch_mean_interval_formula_and_errors() -> None:
    y = np.array([31.0, 28.0, 35.0, 30.0, 26.0])
    x = np.array([10.0, 9.0, 11.0, 10.0, 9.0])
    est, low, high, se = batch_mean_interval(y, x)
    r = y.sum() / x.sum()
    se_ref = math.sqrt(np.sum((y - r * x) ** 2) / (5 * 4 * x.mean() ** 2))
    t4 = 2.7764451051977987
    assert est == pytest.approx(r, rel=1e-15)
    assert se == pytest.approx(se_ref, rel=1e-12)
    assert (low, high) == pytest.approx((r - t4 * se_ref, r + t4 * se_ref), rel=1e-9)
    with pytest.raises(ValueError, match="at least 2"):
        batch_mean_interval([1.0], [2.0])
    with pytest.raises(ValueError):
        batch_mean_interval([1.0, 2.0], [0.0, 0.0])


def test_batch_mean_interval_coverage() -> None:
    rng = np.random.default_rng(20240601)
    true_ratio = 2.5
    reps, b = 400, 12
    covered = 0
    for _ in range(reps):
        counts = rng.integers(20, 60, size=b).astype(float)
        sums = rng.poisson(true_ratio * counts).astype(float)
        _, low, high, _ = batch_mean_interval(sums, counts)
        covered += low <= true_ratio <= high
    # Binomial(400, 0.95) leaves 356..397 with probability 1e-6; 85% or 99.9% coverage fails
    lo, hi = mc.binomial_range(reps, 0.95)
    assert lo <= covered <= hi, covered


# ---------------------------------------------------------------------------
# TV floor
# ---------------------------------------------------------------------------


def _binom_mad_bruteforce(n: int, p: float) -> float:
    k = np.arange(n + 1)
    lp = np.array(
        [
            math.lgamma(n + 1)
            - math.lgamma(i + 1)
            - math.lgamma(n - i + 1)
            + i * math.log(p)
            + (n - i) * math.log1p(-p)
            for i in k
        ]
    )
    return float(np.sum(np.exp(lp) * np.abs(k - n * p)))


@pytest.mark.parametrize("n", [1, 2, 7, 60, 333])
def test_tv_floor_matches_exact_binomial_sum(n: int) -> None:
    p = np.array([0.001, 0.1, 0.2, 0.25, 1 / 3, 0.07, 0.045])
    p = p / p.sum()
    ref = sum(_binom_mad_bruteforce(n, float(pi)) for pi in p) / (2 * n)
    assert tv_floor(p, n) == pytest.approx(ref, rel=1e-12)


def _random_probs(k: int, seed: int) -> np.ndarray:
    p = np.random.default_rng(seed).dirichlet(np.ones(k))
    return p


@pytest.mark.parametrize("k", [6, 36])
@pytest.mark.parametrize("n", [100, 10_000])
def test_tv_floor_matches_monte_carlo(k: int, n: int) -> None:
    p = _random_probs(k, seed=k)
    rng = np.random.default_rng(1000 * k + n)
    draws = rng.multinomial(n, p, size=20_000)
    tv = 0.5 * np.abs(draws / n - p).sum(axis=1)
    se = tv.std(ddof=1) / math.sqrt(tv.size)
    mc.assert_close(tv.mean(), se, tv_floor(p, n))  # ~4.9 SE; a bias of 7.2 SE fails


def test_tv_floor_edges_and_large_n() -> None:
    assert tv_floor([0.0, 1.0], 5) == 0.0
    # Bin(3, 1/2): E|X - 1.5| = 3/4 per cell -> TV = 2 * 0.75 / 6.
    assert tv_floor([0.5, 0.5, 0.0], 3) == pytest.approx(0.25, rel=1e-14)
    p = np.full(6, 1 / 6)
    big = tv_floor(p, 10**9)
    # CLT limit: E|X - np| -> sqrt(2 n p q / pi).
    clt = 6 * math.sqrt(2 * 1e9 * (1 / 6) * (5 / 6) / math.pi) / (2e9)
    assert math.isfinite(big) and big == pytest.approx(clt, rel=1e-6)
    with pytest.raises(ValueError):
        tv_floor([0.5, 0.6], 10)


def test_tv_floor_quantile_is_upper_band() -> None:
    p = _random_probs(10, seed=3)
    q99 = tv_floor_quantile(p, 1000, q=0.99, draws=4000, rng=7)
    q50 = tv_floor_quantile(p, 1000, q=0.5, draws=4000, rng=7)
    assert q50 < tv_floor(p, 1000) * 1.1 < q99
    # identity is the claim: same seed, same operations in the same order
    assert q99 == tv_floor_quantile(p, 1000, q=0.99, draws=4000, rng=7)


# ---------------------------------------------------------------------------
# Goodness of fit
# ---------------------------------------------------------------------------


def test_gof_null_pvalues_are_uniform() -> None:
    # Include small cells so that pooling is exercised.
    p = np.concatenate([np.full(15, 0.06), np.full(10, 0.009), np.full(5, 0.0002)])
    p = p / p.sum()
    rng = np.random.default_rng(12345)
    m = 2000
    pv = np.array([gof_test(rng.multinomial(1000, p), p).p_value for _ in range(m)])
    # each assertion at mc.FAIL_PROB / 2: false alarms at 5% Binomial(2000, 0.05), 55..152
    # (a 2.4% or 8.3% test fails); KS distance from U(0, 1) by the DKW inequality, 0.062
    lo, hi = mc.binomial_range(m, 0.05, mc.FAIL_PROB / 2)
    assert lo <= np.sum(pv < 0.05) <= hi
    s = np.sort(pv)
    ks = max(np.max(np.arange(1, m + 1) / m - s), np.max(s - np.arange(m) / m))
    assert ks <= np.sqrt(np.log(2 / (mc.FAIL_PROB / 2)) / (2 * m)), ks


def test_gof_detects_alternative() -> None:
    p = _random_probs(20, seed=11)
    q = p.copy()
    q[np.argmax(q)] -= 0.05
    q[np.argmin(q)] += 0.05
    assert 0.5 * np.abs(q - p).sum() == pytest.approx(0.05)
    counts = np.random.default_rng(5).multinomial(100_000, q)
    res = gof_test(counts, p)
    assert res.p_value < 1e-6
    assert verdict(res.p_value) == "biased"


def test_gof_zero_probability_and_pooling() -> None:
    res = gof_test([10, 1, 10], [0.5, 0.0, 0.5])
    assert res.p_value == 0.0 and res.statistic == math.inf
    # Zero-probability cells without observations are ignored.
    ok = gof_test([10, 0, 10], [0.5, 0.0, 0.5])
    # exact: O = E in every cell, so G = 2 sum O log(10 / 10) = 0 and chi2_sf(0) = 1 (an edge)
    assert ok == GofResult(statistic=0.0, df=1, p_value=1.0, n=20, cells=2)
    # All cells pooled -> df = 0 -> p-value 1.
    assert gof_test([1, 3], [0.5, 0.5]).p_value == 1.0
    # Expected 90, 6, 3, 1 with min_expected 3.5: cells 1 and 3 are pooled (4 >= 3.5).
    res = gof_test([88, 7, 3, 2], [0.9, 0.06, 0.03, 0.01], min_expected=3.5)
    assert res.cells == 3 and res.df == 2 and res.n == 100
    e = np.array([90.0, 6.0, 4.0])
    o = np.array([88.0, 7.0, 5.0])
    g = 2 * np.sum(o * np.log(o / e))
    assert res.statistic == pytest.approx(g, rel=1e-12)
    assert res.p_value == pytest.approx(math.exp(-g / 2), rel=1e-12)  # df = 2 closed form
    # Expected 90, 7, 2, 1: pool 1 + 2 = 3 < 5, so the pool also absorbs the 7 -> 2 cells.
    res2 = gof_test([92, 5, 2, 1], [0.9, 0.07, 0.02, 0.01])
    assert res2.cells == 2 and res2.df == 1
    o2, e2 = np.array([8.0, 92.0]), np.array([10.0, 90.0])
    assert res2.statistic == pytest.approx(2 * np.sum(o2 * np.log(o2 / e2)), rel=1e-12)


def test_verdict() -> None:
    assert verdict(0.5) == "lossless"
    assert verdict(1e-3) == "lossless"
    assert verdict(9e-4) == "biased"
    assert verdict(0.01, level=0.05) == "biased"


def test_gof_power_identities() -> None:
    p = _random_probs(8, seed=4)
    # No difference: the G statistic is central chi-square, so the power is the level.
    for level in (1e-3, 0.05):
        assert gof_power(p, p, 10_000, level) == pytest.approx(level, rel=1e-10)
    # Mass on a cell the null forbids is seen once any of the n draws lands there.
    assert gof_power([0.5, 0.4, 0.1], [0.5, 0.5, 0.0], 20) == pytest.approx(1 - 0.9**20)
    # More data, more power; a gross difference is certain to be found.
    q = 0.9 * p + 0.1 * _random_probs(8, seed=5)
    powers = [gof_power(q, p, n) for n in (100, 1000, 10_000, 100_000)]
    assert np.all(np.diff(powers) > 0) and powers[-1] == pytest.approx(1.0)


def test_gof_power_matches_simulated_rejection_rate() -> None:
    # Non-central chi-square(1, 2 n KL) tail ~ 0.585 here, where the normal approximation to it
    # says ~0.660; the G-test's actual rejection rate must match the former.
    null, true, n, level = np.array([0.3, 0.7]), np.array([0.31, 0.69]), 10_000, 0.05
    power = gof_power(true, null, n, level)
    rng = np.random.default_rng(2024)
    reps = 2000
    rejected = sum(gof_test(rng.multinomial(n, true), null).p_value < level for _ in range(reps))
    assert abs(rejected / reps - power) < 4 * math.sqrt(power * (1 - power) / reps)


# ---------------------------------------------------------------------------
# alpha
# ---------------------------------------------------------------------------


def _simulate_hist(alpha: float, gamma: int, rounds: int, rng: np.random.Generator) -> np.ndarray:
    k = np.minimum(rng.geometric(1 - alpha, size=rounds) - 1, gamma)
    return np.bincount(k, minlength=gamma + 1)


def test_fit_alpha_mle_and_lr_endpoints() -> None:
    h = np.array([10, 20, 30, 40])
    a, lo, hi = fit_alpha(h)
    s, f = 20 + 60 + 120, 60
    assert a == pytest.approx(s / (s + f), rel=1e-15)
    grid = np.linspace(1e-4, 1 - 1e-4, 20001)
    ll = s * np.log(grid) + f * np.log1p(-grid)
    assert grid[np.argmax(ll)] == pytest.approx(a, abs=1e-4)
    ll_hat = s * math.log(a) + f * math.log1p(-a)
    for end in (lo, hi):
        dev = 2 * (ll_hat - (s * math.log(end) + f * math.log1p(-end)))
        assert dev == pytest.approx(1.959963984540054**2, rel=1e-9)
    assert lo < a < hi
    # Boundaries: all rejected at first draft / all accepted (exact: 0 / 5 and 10 / 10, and the
    # interval search returns the boundary itself).
    assert fit_alpha([5, 0, 0])[:2] == (0.0, 0.0)
    assert fit_alpha([0, 0, 5])[0::2] == (1.0, 1.0)
    with pytest.raises(ValueError):
        fit_alpha([0, 0, 0])


@pytest.mark.parametrize(("alpha", "gamma"), [(0.7, 4), (0.35, 2)])
def test_fit_alpha_coverage(alpha: float, gamma: int) -> None:
    rng = np.random.default_rng(777 + gamma)
    reps = 200
    covered = 0
    estimates = []
    for _ in range(reps):
        a, lo, hi = fit_alpha(_simulate_hist(alpha, gamma, 300, rng))
        covered += lo <= alpha <= hi
        estimates.append(a)
    assert covered / reps >= 0.9
    assert np.mean(estimates) == pytest.approx(alpha, abs=0.01)


def test_alpha_from_tokens_inverts_eq1() -> None:
    for gamma in (1, 3, 5, 8):
        alphas = np.linspace(0.0, 1.0, 101)
        tokens = np.array(
            [gamma + 1.0 if a == 1 else (1 - a ** (gamma + 1)) / (1 - a) for a in alphas]
        )
        back = alpha_from_tokens(tokens, gamma)
        np.testing.assert_allclose(back, alphas, atol=1e-10)
    assert alpha_from_tokens(2.0, 1) == pytest.approx(1.0)
    assert alpha_from_tokens(1.5, 1) == pytest.approx(0.5, abs=1e-12)
    out = alpha_from_tokens([0.3, 99.0, np.nan], 3)
    assert out[0] == 0.0 and out[1] == 1.0 and np.isnan(out[2])
    assert isinstance(alpha_from_tokens(2.0, 3), float)


@pytest.mark.parametrize("level", [0.5, 0.9, 0.95, 0.999])
def test_batch_mean_interval_quantile_is_scipy_t_ppf_exactly(level) -> None:
    """The interval's t quantile (stdtrit, to spare the scipy.stats import) is t.ppf's float."""
    from scipy import stats

    for b in (2, 3, 5, 16, 32, 101):
        y, x = np.arange(1.0, b + 1) ** 1.5, np.arange(1.0, b + 1)
        est, low, high, se = batch_mean_interval(y, x, level)
        tq = float(stats.t.ppf(0.5 + 0.5 * level, b - 1))
        assert (low, high) == (est - tq * se, est + tq * se)  # the same floats, exactly
