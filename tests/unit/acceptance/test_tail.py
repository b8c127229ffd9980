"""specsim.acceptance.tail: conditional acceptance fitted along the positions beyond the
engine's K, its interval, and the schedule's rule for extrapolated draft lengths."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from specsim.acceptance.counts import AcceptanceCounts
from specsim.acceptance.schedule import Schedule, choose_best
from specsim.acceptance.tail import (
    SLOPE_CEILING,
    SLOPE_FLOOR,
    fit_tail,
    tail_mean,
    tail_share_interval,
)
from specsim.exact import expected_tokens
from specsim.stats import wilson_interval


def declining(u: float, v: float, K: int) -> np.ndarray:
    """r_1..r_K of the model logit r_i = u + v log(i / K), written out independently."""
    i = np.arange(1, K + 1)
    return 1.0 / (1.0 + np.exp(-(u + v * np.log(i / K))))


def truth(u: float, v: float, K: int, gamma: int) -> float:
    """T(gamma) of that model: 1 + sum_i prod_{j<=i} r_j, positions beyond K on the same law."""
    i = np.arange(1, gamma + 1)
    r = 1.0 / (1.0 + np.exp(-(u + v * np.log(i / K))))
    return 1.0 + float(np.cumprod(r).sum())


def histogram_probs(r: np.ndarray) -> np.ndarray:
    """P(J = j), j = 0..K, of rounds whose i-th draft is accepted with r_i given the ones before."""
    reach = np.concatenate([[1.0], np.cumprod(r)])  # P(J >= j)
    return reach - np.concatenate([reach[1:], [0.0]])


@pytest.mark.parametrize(("u", "v", "K"), [(1.2, -0.8, 4), (0.3, -1.5, 3), (2.0, -0.2, 6),
                                           (0.0, -3.0, 2)])
def test_the_fit_recovers_a_declining_law_and_its_tail_exactly(u: float, v: float,
                                                               K: int) -> None:
    per_position = np.cumprod(declining(u, v, K))
    t = fit_tail(per_position)
    assert t.identified and t.K == K
    assert t.intercept == pytest.approx(u, abs=1e-8) and t.slope == pytest.approx(v, abs=1e-8)
    for g in range(K + 1, K + 6):
        assert tail_mean(per_position, g) == pytest.approx(truth(u, v, K, g), rel=1e-9)
    # the same fit from counts (the likelihood's scale does not move its maximum)
    c = AcceptanceCounts(10**12, tuple(round(10**12 * p) for p in per_position))
    assert c.tokens_per_call(K + 3).mean == pytest.approx(truth(u, v, K, K + 3), rel=1e-9)


@pytest.mark.parametrize("alpha", [0.3, 0.6, 0.9])
def test_constant_acceptance_is_leviathans_tail_in_the_limit(alpha: float) -> None:
    c = AcceptanceCounts(10**12, tuple(round(10**12 * alpha**i) for i in range(1, 5)))
    for g in (5, 8):
        t = c.tokens_per_call(g)
        want = float(expected_tokens(alpha, g))
        assert t.mean == pytest.approx(want, rel=1e-9)
        assert t.low <= want <= t.high and t.high - t.low < 1e-4
    assert fit_tail(c.per_position).slope == pytest.approx(0.0, abs=1e-7)


def test_a_rising_law_is_not_extrapolated_the_pooled_constant_is() -> None:
    r = np.array([0.5, 0.6, 0.65, 0.68])
    p = np.cumprod(r)
    t = fit_tail(p)
    pooled = p.sum() / (1.0 + p[:-1].sum())  # sum a_i / sum a_{i-1}
    assert t.slope == 0.0
    assert 1 / (1 + math.exp(-t.intercept)) == pytest.approx(pooled, rel=1e-12)
    want = 1.0 + p.sum() + p[-1] * sum(pooled**m for m in range(1, 4))
    assert tail_mean(p, 7) == pytest.approx(want, rel=1e-12)


def test_k1_is_the_constant_tail_bracketed_by_the_slopes_seen() -> None:
    c = AcceptanceCounts(5000, (3500,))
    base = c.tokens_per_call(1)
    r_lo, r_hi = (float(x) for x in wilson_interval(3500, 5000))

    def share(r: float, v: float, m: int) -> float:
        return sum(math.prod(1 / (1 + math.exp(-(math.log(r / (1 - r)) + v * math.log(1 + j))))
                             for j in range(1, k + 1)) for k in range(1, m + 1))

    for g in (2, 4, 8):
        t = c.tokens_per_call(g)
        assert t.mean == pytest.approx(float(expected_tokens(0.7, g)), rel=1e-12)
        assert t.low == pytest.approx(base.low + r_lo * share(r_lo, SLOPE_FLOOR, g - 1),
                                      rel=1e-9)
        assert t.high == pytest.approx(base.high + r_hi * share(r_hi, SLOPE_CEILING, g - 1),
                                       rel=1e-9)
    # the worst real pair of SLOPE_FLOOR's sweep: 22% below the constant tail at T(3), inside
    # the interval
    assert c.tokens_per_call(3).low < float(expected_tokens(0.7, 3)) / 1.22


def test_tail_interval_covers_a_declining_law_over_many_runs() -> None:
    """Counters of 1500 rounds drawn from a declining law, 240 runs: the 95% interval of T(K')
    beyond K misses in a binomial share; more than 31 misses has probability < 1e-6 at 5%. The
    constant tail's point is biased; the fitted one is not (its mean error within 4 standard
    errors of 0)."""
    u, v, K, n, runs, hi_miss = 0.9, -1.2, 3, 1500, 240, 31
    assert stats.binom.sf(hi_miss, runs, 0.05) < 1e-6
    probs = histogram_probs(declining(u, v, K))
    rng = np.random.default_rng(4101)
    gammas = (K + 2, K + 5)
    misses = {g: 0 for g in gammas}
    errors = {g: [] for g in gammas}
    const = {g: [] for g in gammas}
    for _ in range(runs):
        c = AcceptanceCounts.from_histogram(rng.multinomial(n, probs))
        for g in gammas:
            t = c.tokens_per_call(g)
            want = truth(u, v, K, g)
            misses[g] += not t.low <= want <= t.high
            errors[g].append(t.mean - want)
            const[g].append(tail_mean(c.per_position, g, constant=True) - want)
    for g in gammas:
        e = np.array(errors[g])
        assert misses[g] <= hi_miss, (g, misses[g])
        assert abs(e.mean()) < 4 * e.std() / math.sqrt(runs) + 2e-3, g
        assert np.mean(const[g]) > 10 * e.std() / math.sqrt(runs), g  # the constant tail's bias


def test_the_interval_narrows_with_the_rounds_at_k_ge_2() -> None:
    r = declining(0.9, -1.2, 3)
    widths = []
    for n in (10**4, 4 * 10**4):
        acc = tuple(round(n * p) for p in np.cumprod(r))
        lo, hi = tail_share_interval(n, acc, 4)
        widths.append(hi - lo)
    assert widths[1] == pytest.approx(widths[0] / 2, rel=0.25)


# ------------------------------------------------------------------ the selection rule
def rows(spec: list[tuple[int, float, float, bool]], cost_beyond: int | None = None
         ) -> pd.DataFrame:
    """One batch size's rows: (gamma, speedup, speedup_ci_low, extrapolated); K' above
    ``cost_beyond`` have their cost extrapolated beyond the runs."""
    t = pd.DataFrame(spec, columns=["gamma", "speedup", "speedup_ci_low", "extrapolated"],
                     index=[10 + i for i in range(len(spec))])
    t["cost_extrapolated"] = False if cost_beyond is None else t["gamma"] > cost_beyond
    return t


def test_a_k_whose_cost_is_extrapolated_beyond_the_runs_is_held_to_the_same_rule() -> None:
    """Tokens identified (K' <= K) but the round's cost extrapolated beyond the runs' K: the
    cost is a model there too, so its low end must beat the best measured K'."""
    spec = [(0, 1.0, 1.0, False), (1, 1.40, 1.35, False), (2, 1.50, 1.44, False),
            (3, 1.58, 1.45, False)]
    assert choose_best(rows(spec)) == (13, "identified")
    assert choose_best(rows(spec, cost_beyond=2)) == (12, "held_back")
    spec[3] = (3, 1.58, 1.52, False)
    assert choose_best(rows(spec, cost_beyond=2)) == (13, "low_bound")


def test_an_extrapolated_k_is_chosen_only_when_its_low_end_beats_the_best_identified() -> None:
    base = [(0, 1.0, 1.0, False), (1, 1.40, 1.35, False), (2, 1.50, 1.44, False)]
    # an extrapolated K' looks faster, but its low end (1.45) is below 1.50: held back
    held = rows([*base, (3, 1.58, 1.45, True), (4, 1.60, 1.30, True)])
    assert choose_best(held) == (12, "held_back")
    # K' = 3's low end beats 1.50: chosen; K' = 4 also does and has the larger point estimate
    sure = rows([*base, (3, 1.58, 1.52, True), (4, 1.62, 1.51, True), (5, 1.70, 1.40, True)])
    assert choose_best(sure) == (14, "low_bound")
    # nothing extrapolated looks better: the identified best, said so
    plain = rows([*base, (3, 1.49, 1.30, True)])
    assert choose_best(plain) == (12, "identified")
    # speculation off is an identified choice like any other
    off = rows([(0, 1.0, 1.0, False), (1, 0.9, 0.85, False), (2, 1.05, 0.7, True)])
    assert choose_best(off) == (10, "held_back")


def test_the_summary_says_why_an_extrapolated_k_was_or_was_not_chosen() -> None:
    t = pd.concat([rows([(0, 1.0, 1.0, False), (2, 1.5, 1.44, False), (4, 1.6, 1.45, True)])
                   .assign(batch=1),
                   rows([(0, 1.0, 1.0, False), (2, 1.5, 1.44, False), (4, 1.6, 1.52, True)])
                   .assign(batch=8)], ignore_index=True)
    t["best"], t["chosen_by"] = False, ""
    for _, idx in t.groupby("batch").groups.items():
        best, why = choose_best(t.loc[idx])
        t.loc[best, ["best", "chosen_by"]] = [True, why]
    t = t.assign(tokens_per_call=2.0, speedup_ci_high=t["speedup"] + 0.1, pays=t["best"])
    text = Schedule(t, 2).summary().splitlines()
    assert "low end does not beat this" in text[1] and text[1].split()[1] == "2"
    assert "even its low end beats every identified" in text[2] and text[2].split()[1] == "4"



def test_k1_interval_covers_declines_up_to_the_floor() -> None:
    """From K = 1 counters of a law declining at slope v (logit r_i = u + v log i), the
    interval holds T(K') for every v in [SLOPE_FLOOR, SLOPE_CEILING]; the constant tail's point
    is too high by the decline's share."""
    u = math.log(0.8 / 0.2)
    c = AcceptanceCounts(10**6, (800000,))
    for v in (SLOPE_FLOOR, -1.0, 0.0, SLOPE_CEILING):
        for g in (2, 3, 6):
            t, want = c.tokens_per_call(g), truth(u, v, 1, g)
            assert t.low <= want <= t.high, (v, g)
    assert c.tokens_per_call(3).mean / truth(u, -1.0, 1, 3) > 1.08  # the optimism it brackets
    assert c.tokens_per_call(3).low > truth(u, 2 * SLOPE_FLOOR, 1, 3)  # and no further


@pytest.mark.parametrize(("rounds", "accepted"), [(10, (10, 10)), (100, (100, 60)),
                                                  (100, (3, 3, 3)), (50, (1, 0, 0)),
                                                  (1000, (999, 1))])
def test_extreme_counters_give_finite_ordered_intervals(rounds: int, accepted: tuple) -> None:
    c = AcceptanceCounts(rounds, accepted)
    K = len(accepted)
    for g in (K + 1, K + 4):
        t = c.tokens_per_call(g)
        assert all(math.isfinite(x) for x in (t.low, t.mean, t.high))
        assert 1.0 <= t.low <= t.mean <= t.high <= 1.0 + g
        assert t.low >= c.tokens_per_call(K).low - 1e-12
