"""Tests for specsim.exact: closed forms, the exact round DP, long-run rates, lossless check.

The references written here are deliberately independent of the module: an explicit per-round
enumeration over all drafted sequences (slow, readable), exact rational arithmetic for the
optimal-gamma search, and a plain Monte Carlo transcription of the seed program's rounds.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from fractions import Fraction

import mc
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from specsim.exact import (
    RULES,
    Rule,
    arithmetic_operations,
    break_even_c,
    context_acceptance,
    expected_tokens,
    first_tokens_distribution,
    long_run,
    optimal_gamma,
    round_law,
    speedup_exists,
    stationary,
    table1_rows,
    target_joint,
    tv,
    walltime_improvement,
)

FloatArray = NDArray[np.float64]
Outcomes = dict[tuple[tuple[int, ...], int], float]


# ---------------------------------------------------------------------------------------------
# the seed program's tables
# ---------------------------------------------------------------------------------------------
def random_table(seed: int, sharpness: float = 1.0, vocab: int = 6) -> FloatArray:
    """Seed program's random_table: row-softmax of N(0, sharpness) logits."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, sharpness, (vocab, vocab))
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def blend(target: FloatArray, other: FloatArray, w: float) -> FloatArray:
    return w * target + (1.0 - w) * other


TARGET = random_table(1, 2.5)
GOOD_DRAFT = blend(TARGET, random_table(2, 2.5), 0.85)
MED_DRAFT = blend(TARGET, random_table(2, 2.5), 0.55)
POOR_DRAFT = blend(TARGET, random_table(3, 2.5), 0.20)


def sparse_table(rng: np.random.Generator, vocab: int, zero_frac: float) -> FloatArray:
    """Random row-stochastic table with roughly zero_frac exact zeros (>= 1 positive per row)."""
    t = rng.exponential(size=(vocab, vocab))
    t[rng.random((vocab, vocab)) < zero_frac] = 0.0
    empty = t.sum(axis=1) == 0.0
    t[empty, rng.integers(0, vocab, size=int(empty.sum()))] = 1.0
    return t / t.sum(axis=1, keepdims=True)


# ---------------------------------------------------------------------------------------------
# independent brute-force reference: one round, all drafted sequences enumerated
# ---------------------------------------------------------------------------------------------
def ref_residual(p: FloatArray, q: FloatArray) -> FloatArray:
    r = np.clip(p - q, 0.0, None)
    s = r.sum()
    return p / p.sum() if s <= 0 else r / s


def ref_round_outcomes(P: FloatArray, Q: FloatArray, ctx: int, gamma: int, rule: str) -> Outcomes:
    """{(emitted tokens, n_accepted): probability} for one round of the seed's verify_round."""
    vocab = P.shape[0]
    out: Outcomes = defaultdict(float)
    for drafted in itertools.product(range(vocab), repeat=gamma):
        prefixes = (ctx, *drafted)
        p_draft = 1.0
        for i, x in enumerate(drafted):
            p_draft *= Q[prefixes[i], x]
        if p_draft == 0.0:
            continue
        alive = p_draft  # probability of this draft AND every decision so far accepted
        for i, x in enumerate(drafted):
            p, q = P[prefixes[i]], Q[prefixes[i]]
            if rule == "greedy":
                a = 1.0 if x == int(np.argmax(p)) else 0.0
            else:
                a = min(1.0, p[x] / q[x])
            reject = alive * (1.0 - a)
            if reject > 0.0:
                final = p if rule == "no_resample" else ref_residual(p, q)
                tail = drafted[i + 1 :] if rule == "continue" else ()
                for y in range(vocab):
                    if final[y] > 0.0:
                        out[((*drafted[:i], y, *tail), i)] += reject * final[y]
            alive *= a
        for y in range(vocab):  # all accepted: bonus token
            if P[drafted[-1], y] > 0.0:
                out[((*drafted, y), gamma)] += alive * P[drafted[-1], y]
    return dict(out)


def ref_round_law(
    P: FloatArray, Q: FloatArray, gamma: int, rule: str
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    vocab = P.shape[0]
    accepted = np.zeros((vocab, gamma + 1))
    tokens = np.zeros((vocab, gamma + 2))
    nxt = np.zeros((vocab, vocab))
    trials = np.zeros(vocab)
    for s in range(vocab):
        for (emitted, n_acc), pr in ref_round_outcomes(P, Q, s, gamma, rule).items():
            accepted[s, n_acc] += pr
            tokens[s, len(emitted)] += pr
            nxt[s, emitted[-1]] += pr
            trials[s] += pr * min(n_acc + 1, gamma)
    return accepted, tokens, nxt, trials


def ref_first_tokens(
    P: FloatArray, Q: FloatArray, ctx0: int, gamma: int, rule: str, n: int
) -> FloatArray:
    """Joint law of the first n tokens, composing enumerated rounds until n are emitted."""
    vocab = P.shape[0]
    rounds = {s: ref_round_outcomes(P, Q, s, gamma, rule) for s in range(vocab)}
    result = np.zeros((vocab,) * n)

    def go(prefix: tuple[int, ...], prob: float, ctx: int) -> None:
        if len(prefix) >= n:
            result[prefix[:n]] += prob
            return
        for (emitted, _), pr in rounds[ctx].items():
            go(prefix + emitted, prob * pr, emitted[-1])

    go((), 1.0, ctx0)
    return result


def small_cases() -> list[tuple[str, FloatArray, FloatArray]]:
    rng = np.random.default_rng(123)
    P = sparse_table(rng, 3, 0.0)
    Q = sparse_table(rng, 3, 0.0)
    Pz = sparse_table(rng, 3, 0.4)
    Qz = sparse_table(rng, 3, 0.4)
    ties = np.array([[0.4, 0.4, 0.2], [0.5, 0.0, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    return [
        ("dense", P, Q),
        ("zeros", Pz, Qz),
        ("P_eq_Q", P, P.copy()),
        ("argmax_ties", ties, Q),
        ("draft_zeros", P, Qz),
    ]


CASES = small_cases()


# ---------------------------------------------------------------------------------------------
# 1. closed forms
# ---------------------------------------------------------------------------------------------
def test_expected_tokens_values_and_alpha_one_limit() -> None:
    # exact: alpha = 0 and alpha = 1 are branches returning 1 and gamma + 1 (no log/exp)
    assert expected_tokens(0.0, 4) == 1.0
    assert expected_tokens(0.5, 2) == pytest.approx(1.75, abs=1e-15)
    g = np.arange(0, 20)
    np.testing.assert_array_equal(expected_tokens(1.0, g), g + 1.0)
    # near the limit the stable formula tracks the Taylor expansion g+1 - eps g(g+1)/2
    eps = 1e-9
    near = np.asarray(expected_tokens(1.0 - eps, g))
    np.testing.assert_allclose(near, g + 1.0 - eps * g * (g + 1) / 2, rtol=1e-13)
    alphas = np.linspace(0.0, 1.0, 11)
    out = np.asarray(expected_tokens(alphas[:, None], g[None, :]))
    assert np.all(np.isfinite(out))
    brute = np.array([[sum(a**k for k in range(gg + 1)) for gg in g] for a in alphas])
    np.testing.assert_allclose(out, brute, rtol=1e-13)


def test_walltime_and_operations_alpha_one_and_relations() -> None:
    g = np.arange(1, 10, dtype=np.float64)
    np.testing.assert_allclose(walltime_improvement(1.0, g, 0.1), (g + 1) / (0.1 * g + 1))
    np.testing.assert_allclose(arithmetic_operations(1.0, g, 0.3), (0.3 * g + g + 1) / (g + 1))
    a = np.linspace(0.0, 0.99, 12)[:, None]
    sp = np.asarray(walltime_improvement(a, g, 0.0))
    ops = np.asarray(arithmetic_operations(a, g, 0.0))
    np.testing.assert_allclose(sp, np.asarray(expected_tokens(a, g)), rtol=1e-14)
    # c = c_hat = 0: ops = (g+1)/E
    np.testing.assert_allclose(ops * sp, np.broadcast_to(g + 1.0, sp.shape), rtol=1e-14)
    direct = (1 - a ** (g + 1)) / ((1 - a) * (g * 0.2 + 1))
    np.testing.assert_allclose(walltime_improvement(a, g, 0.2), direct, rtol=1e-12)
    assert break_even_c(3.0, 4) == 0.5  # exact: (3 - 1) / 4, one correctly rounded division
    # at c = break_even_c the improvement is exactly 1
    e = float(expected_tokens(0.7, 5))
    assert walltime_improvement(0.7, 5, break_even_c(e, 5)) == pytest.approx(1.0, abs=1e-14)


def test_table1_rows() -> None:
    rows = table1_rows([0.6, 0.8], [1, 5])
    assert set(rows) == {"alpha", "gamma", "operations", "speed"}
    np.testing.assert_array_equal(rows["alpha"], [0.6, 0.6, 0.8, 0.8])
    np.testing.assert_array_equal(rows["gamma"], [1, 5, 1, 5])
    speed_08_5 = (1 - 0.8**6) / 0.2
    assert rows["speed"][3] == pytest.approx(speed_08_5, rel=1e-13)
    assert rows["operations"][3] == pytest.approx(6 / speed_08_5, rel=1e-13)
    assert rows["speed"][0] == pytest.approx(1.6, rel=1e-13)


def _exact_opt(alpha: Fraction, c: Fraction, gamma_max: int) -> tuple[int, Fraction]:
    """Exact rational search: smallest gamma within a relative 1e-12 of the true maximum.

    (The documented tie rule; e.g. alpha = 1/20, c = 0 increases by 20^-gamma forever, so the
    exact argmax gamma_max is not a meaningful target for floating point.)
    """
    vals = [
        sum((alpha**k for k in range(gam + 1)), Fraction(0)) / (gam * c + 1)
        for gam in range(1, gamma_max + 1)
    ]
    best = max(vals)
    g = next(i for i, v in enumerate(vals) if v >= best * (1 - Fraction(1, 10**12)))
    return g + 1, vals[g]


def test_optimal_gamma_matches_exact_rational_brute_force() -> None:
    gamma_max = 24
    alphas = [Fraction(k, 20) for k in range(21)]
    cs = [Fraction(j, 25) for j in range(26)]
    a_grid = np.array([[float(a)] * len(cs) for a in alphas])
    c_grid = np.array([[float(c) for c in cs]] * len(alphas))
    g_opt, imp = optimal_gamma(a_grid, c_grid, gamma_max=gamma_max)
    assert isinstance(g_opt, np.ndarray)
    assert g_opt.shape == a_grid.shape
    for i, a in enumerate(alphas):
        for j, c in enumerate(cs):
            g_ref, v_ref = _exact_opt(a, c, gamma_max)
            assert g_opt[i, j] == g_ref, (a, c)
            assert float(np.asarray(imp)[i, j]) == pytest.approx(float(v_ref), rel=1e-12)
    # documented tie: alpha = 1/2, c = 1/5 ties gamma = 1 and 2 exactly -> smallest
    assert _exact_opt(Fraction(1, 2), Fraction(1, 5), 5)[0] == 1
    assert optimal_gamma(0.5, 0.2)[0] == 1
    # scalar call returns python scalars; perfect free draft runs to gamma_max
    g1, v1 = optimal_gamma(1.0, 0.0, gamma_max=10)
    assert (g1, v1) == (10, 11.0)  # exact: the alpha = 1 branch gives (gamma + 1) / 1


def test_corollary_3_9_on_grid() -> None:
    grid = np.arange(0, 21) / 20
    gammas = np.arange(1, 65)
    for a in grid:
        for c in grid:
            best = float(np.max(walltime_improvement(a, gammas, c)))
            exists = bool(speedup_exists(a, c))
            assert exists == (a > c)
            if a > c:
                assert best > 1.0 + 1e-9
            else:
                assert best <= 1.0 + 1e-12


# ---------------------------------------------------------------------------------------------
# 2. DP vs closed form and vs brute force
# ---------------------------------------------------------------------------------------------
def constant_beta_draft(P: FloatArray, alpha: float) -> FloatArray:
    """Q = w P + (1-w) O per row with beta(s) = alpha for every s.

    With O the point mass on argmin P[s], beta(w) = 1 - (1 - w) TV(P[s], O) = 1 - (1-w)(1 - min p).
    """
    vocab = P.shape[0]
    point = np.zeros_like(P)
    j = np.argmin(P, axis=1)
    point[np.arange(vocab), j] = 1.0
    tv_po = 1.0 - P[np.arange(vocab), j]
    w = 1.0 - (1.0 - alpha) / tv_po
    assert np.all((w >= 0.0) & (w <= 1.0))
    return w[:, None] * P + (1.0 - w[:, None]) * point


@pytest.mark.parametrize("alpha", [0.3, 0.6, 0.9, 0.97, 1.0])
@pytest.mark.parametrize("gamma", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("rule", ["correct", "no_resample"])
def test_dp_matches_eq1_when_beta_constant(alpha: float, gamma: int, rule: Rule) -> None:
    rng = np.random.default_rng(7)
    P = sparse_table(rng, 5, 0.0)
    P = 0.5 * P + 0.5 / 5  # min p >= 0.1 so every alpha >= 0.3 is reachable
    Q = P.copy() if alpha == 1.0 else constant_beta_draft(P, alpha)
    np.testing.assert_allclose(context_acceptance(P, Q), alpha, atol=1e-15)
    law = round_law(P, Q, gamma, rule)
    np.testing.assert_allclose(law.mean_tokens, expected_tokens(alpha, gamma), atol=1e-12)
    geom = np.array([alpha**k * (1 - alpha) for k in range(gamma)] + [alpha**gamma])
    np.testing.assert_allclose(law.accepted, np.broadcast_to(geom, law.accepted.shape), atol=1e-12)
    np.testing.assert_allclose(law.tokens[:, 1:], law.accepted, atol=0)


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize(("name", "P", "Q"), CASES, ids=[c[0] for c in CASES])
def test_round_law_matches_enumeration(name: str, P: FloatArray, Q: FloatArray, rule: Rule) -> None:
    for gamma in (1, 2, 3):
        law = round_law(P, Q, gamma, rule)
        accepted, tokens, nxt, trials = ref_round_law(P, Q, gamma, rule)
        np.testing.assert_allclose(law.accepted, accepted, atol=1e-12, rtol=0)
        np.testing.assert_allclose(law.tokens, tokens, atol=1e-12, rtol=0)
        np.testing.assert_allclose(law.next_state, nxt, atol=1e-12, rtol=0)
        np.testing.assert_allclose(law.trials, trials, atol=1e-12, rtol=0)
        np.testing.assert_allclose(law.next_state.sum(axis=1), 1.0, atol=1e-12)


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize(("name", "P", "Q"), CASES, ids=[c[0] for c in CASES])
def test_first_tokens_matches_enumeration(
    name: str, P: FloatArray, Q: FloatArray, rule: Rule
) -> None:
    for gamma, n in [(1, 1), (1, 3), (2, 2), (2, 4), (3, 2), (3, 4)]:
        for ctx0 in range(3):
            got = first_tokens_distribution(P, Q, ctx0, gamma, rule, n)
            ref = ref_first_tokens(P, Q, ctx0, gamma, rule, n)
            np.testing.assert_allclose(got, ref, atol=1e-12, rtol=0)


def test_continue_next_context_is_last_draft() -> None:
    """Continue with a rejection at position 0 of 2 leaves x_2 ~ Q[x_1] as next context."""
    P = np.array([[1.0, 0.0], [0.0, 1.0]])
    Q = np.array([[0.0, 1.0], [0.5, 0.5]])  # from 0 the draft always says 1 -> rejected
    law = round_law(P, Q, 2, "continue")
    np.testing.assert_allclose(law.next_state[0], [0.5, 0.5], atol=1e-15)
    np.testing.assert_allclose(law.accepted[0], [1.0, 0.0, 0.0], atol=1e-15)
    np.testing.assert_allclose(law.tokens[0], [0.0, 0.0, 1.0, 0.0], atol=1e-15)
    # a sum of products of 0, 1/2, 1: within the rounding of a few terms, like the lines above
    assert law.trials[0] == pytest.approx(1.0, abs=1e-15)


# ---------------------------------------------------------------------------------------------
# stationary and long-run
# ---------------------------------------------------------------------------------------------
def test_stationary_known_chain_and_reducible_raises() -> None:
    K = np.array([[0.9, 0.1], [0.3, 0.7]])
    np.testing.assert_allclose(stationary(K), [0.75, 0.25], atol=1e-14)
    periodic = np.array([[0.0, 1.0], [1.0, 0.0]])
    np.testing.assert_allclose(stationary(periodic), [0.5, 0.5], atol=1e-14)
    transient = np.array([[0.5, 0.5, 0.0], [0.0, 1.0, 0.0], [0.2, 0.3, 0.5]])
    np.testing.assert_allclose(stationary(transient), [0.0, 1.0, 0.0], atol=1e-12)
    with pytest.raises(ValueError, match="not unique"):
        stationary(np.eye(2))


def mc_long_run(
    P: FloatArray, Q: FloatArray, gamma: int, rule: str, rounds: int, seed: int
) -> tuple[FloatArray, FloatArray]:
    """Plain Monte Carlo of the seed program's rounds (per-round tokens and accepted counts)."""
    rng = np.random.default_rng(seed)
    cum_p = [list(np.cumsum(row)) for row in P]
    cum_q = [list(np.cumsum(row)) for row in Q]
    res = [list(np.cumsum(ref_residual(P[s], Q[s]))) for s in range(P.shape[0])]
    last = P.shape[0] - 1

    def sample(cum: list[float], u: float) -> int:
        return min(bisect.bisect_right(cum, u), last)

    u_all = rng.random((rounds, 2 * gamma + 1)).tolist()
    tokens = np.zeros(rounds)
    accepted = np.zeros(rounds)
    ctx = 0
    for r in range(rounds):
        u = u_all[r]
        drafted, cur = [], ctx
        for k in range(gamma):
            cur = sample(cum_q[cur], u[k])
            drafted.append(cur)
        prefixes = [ctx, *drafted]
        out: list[int] = []
        n_acc = 0
        for i, x in enumerate(drafted):
            c = prefixes[i]
            if u[gamma + i] < min(1.0, P[c, x] / Q[c, x]):
                out.append(x)
                n_acc += 1
                continue
            out.append(sample(res[c], u[2 * gamma]))
            if rule == "continue":
                out.extend(drafted[i + 1 :])
            break
        else:
            out.append(sample(cum_p[drafted[-1]], u[2 * gamma]))
        tokens[r], accepted[r] = len(out), n_acc
        ctx = out[-1]
    return tokens, accepted


def _batch_mean_se(x: FloatArray, batches: int = 200) -> tuple[float, float]:
    means = x[: len(x) // batches * batches].reshape(batches, -1).mean(axis=1)
    return float(x.mean()), float(means.std(ddof=1) / np.sqrt(batches))


@pytest.mark.slow
@pytest.mark.parametrize("rule", ["correct", "continue"])
def test_long_run_matches_monte_carlo(rule: Rule) -> None:
    gamma = 4
    lr = long_run(TARGET, MED_DRAFT, gamma, rule)
    tokens, accepted = mc_long_run(TARGET, MED_DRAFT, gamma, rule, 200_000, seed=5)
    for exact, sample in [(lr.tokens_per_round, tokens), (lr.accept_fraction, accepted / gamma)]:
        mean, se = _batch_mean_se(sample)
        assert se > 0.0
        # ~5.4 SE on 199 dof (mc.FAIL_PROB over the two); a bias of 7.8 SE fails
        mc.assert_close(mean, se, exact, dof=199, assertions=2, what=rule)
    assert lr.accept_rate == pytest.approx(lr.accepted_per_round / lr.trials_per_round)
    np.testing.assert_allclose(
        lr.pi @ round_law(TARGET, MED_DRAFT, gamma, rule).next_state, lr.pi, atol=1e-13
    )


def test_long_run_alpha_bar_and_perfect_draft() -> None:
    lr = long_run(TARGET, TARGET, 4, "correct")
    assert lr.alpha_bar == pytest.approx(1.0, abs=1e-14)
    assert lr.tokens_per_round == pytest.approx(5.0, abs=1e-12)
    assert lr.accept_fraction == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(lr.pi, stationary(TARGET), atol=1e-12)
    # trials <= gamma, with equality only if no rejection ever happens before the last position
    lr_med = long_run(TARGET, MED_DRAFT, 4, "correct")
    assert 0.0 < lr_med.accept_fraction < lr_med.accept_rate < 1.0


# ---------------------------------------------------------------------------------------------
# 3. lossless theorem and broken rules
# ---------------------------------------------------------------------------------------------
@st.composite
def table_pairs(draw: st.DrawFn) -> tuple[FloatArray, FloatArray, int, int, int]:
    vocab = draw(st.integers(2, 6))
    gamma = draw(st.integers(1, 5))
    n = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**32 - 1))
    zp = draw(st.sampled_from([0.0, 0.3, 0.6]))
    zq = draw(st.sampled_from([0.0, 0.3, 0.6]))
    equal = draw(st.booleans())
    rng = np.random.default_rng(seed)
    P = sparse_table(rng, vocab, zp)
    Q = P.copy() if equal else sparse_table(rng, vocab, zq)
    ctx0 = draw(st.integers(0, vocab - 1))
    return P, Q, gamma, n, ctx0


@settings(max_examples=300, deadline=None)
@given(table_pairs())
def test_correct_rule_is_lossless(case: tuple[FloatArray, FloatArray, int, int, int]) -> None:
    P, Q, gamma, n, ctx0 = case
    got = first_tokens_distribution(P, Q, ctx0, gamma, "correct", n)
    want = target_joint(P, ctx0, n)
    assert got.shape == (P.shape[0],) * n
    np.testing.assert_allclose(got, want, atol=1e-12, rtol=0)
    assert tv(got, want) < 1e-12


@settings(max_examples=100, deadline=None)
@given(table_pairs(), st.sampled_from(RULES))
def test_every_rule_gives_a_distribution(
    case: tuple[FloatArray, FloatArray, int, int, int], rule: Rule
) -> None:
    P, Q, gamma, n, ctx0 = case
    got = first_tokens_distribution(P, Q, ctx0, gamma, rule, n)
    assert np.all(got >= -1e-15)
    assert got.sum() == pytest.approx(1.0, abs=1e-12)
    law = round_law(P, Q, gamma, rule)
    np.testing.assert_allclose(law.accepted.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(law.tokens.sum(axis=1), 1.0, atol=1e-12)


def test_seed_tables_correct_lossless_and_broken_rules_detected() -> None:
    want = target_joint(TARGET, 0, 2)
    assert tv(first_tokens_distribution(TARGET, GOOD_DRAFT, 0, 4, "correct", 2), want) < 1e-12
    for rule in ("greedy", "no_resample", "continue"):
        got = first_tokens_distribution(TARGET, GOOD_DRAFT, 0, 4, rule, 2)
        assert tv(got, want) > 1e-6, rule


def test_target_joint_and_tv() -> None:
    j = target_joint(TARGET, 2, 3)
    assert j.shape == (6, 6, 6)
    assert j[1, 4, 0] == pytest.approx(TARGET[2, 1] * TARGET[1, 4] * TARGET[4, 0], rel=1e-15)
    assert tv(np.array([1.0, 0.0]), np.array([0.25, 0.75])) == 0.75  # exact: dyadic terms


def test_size_bound_raises() -> None:
    with pytest.raises(ValueError, match=r"6\*\*9 = 10077696 cells.*max_cells=2000000"):
        first_tokens_distribution(TARGET, GOOD_DRAFT, 0, 4, "correct", n=8)
    with pytest.raises(ValueError, match="max_cells=100"):
        first_tokens_distribution(TARGET, GOOD_DRAFT, 0, 4, "correct", n=2, max_cells=100)
    # gamma does not enter the bound: a long draft with n = 2 is cheap
    got = first_tokens_distribution(TARGET, GOOD_DRAFT, 0, 60, "continue", n=2, max_cells=216)
    assert got.sum() == pytest.approx(1.0, abs=1e-12)


def test_input_validation() -> None:
    with pytest.raises(ValueError, match="unknown rule"):
        round_law(TARGET, GOOD_DRAFT, 2, "bogus")
    with pytest.raises(ValueError, match="rows must sum to 1"):
        round_law(TARGET * 2, GOOD_DRAFT, 2)
    with pytest.raises(ValueError, match="alpha"):
        expected_tokens(1.5, 2)
