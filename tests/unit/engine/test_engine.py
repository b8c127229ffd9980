"""Tests for specsim.engine: the vectorised speculative-sampling engine.

The reference here is a plain per-round transcription of Leviathan et al. 2022, Algorithm 1
(one chain, a Python loop, categorical draws with the standard library's
``random.Random.choices`` -- a different generator and a different sampler from the engine's
inverse-CDF guide tables), with the seed program's three deliberately broken rule variants.
Engine and reference are compared statistically (two-sample chi-square tests on histograms),
never draw for draw; both are also tested against the exact laws of ``specsim.exact``.
"""

from __future__ import annotations

import itertools
import math
import random
from functools import cache

import mc
import numpy as np
import pytest

import specsim.engine as engine
from specsim.engine import (
    RULES,
    MarkovKernel,
    TableSampler,
    first_tokens_markov,
    iid_round,
    inverse_cdf_rows,
    long_run_iid,
    long_run_markov,
    normalised_cdf,
)
from specsim.exact import (
    expected_tokens,
    first_tokens_distribution,
    round_law,
    stationary,
    target_joint,
)
from specsim.families import markov_pair
from specsim.models.iid import iid_frozen_markov, iid_pairs
from specsim.models.spec import ModelSpec, TableSpec
from specsim.sampling import GuidedRows
from specsim.stats import chi2_sf, gof_test
from specsim.verify import accepted_uniforms, verify_uniforms

# p-value threshold of each "same distribution" assertion: no test here makes more than 6, so
# a test fails with probability <= mc.FAIL_PROB (1e-6) whatever its random stream (tests/mc.py)
P_MIN = mc.FAIL_PROB / 6


# ---------------------------------------------------------------------------------------------
# the seed program's tables (recipe copied from the seed; bit-exactness is tested in test_models)
# ---------------------------------------------------------------------------------------------
def _seed_table(seed: int, sharpness: float, vocab: int = 6) -> np.ndarray:
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, sharpness, (vocab, vocab))
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


TARGET = _seed_table(1, 2.5)
GOOD_DRAFT = 0.85 * TARGET + 0.15 * _seed_table(2, 2.5)
V6 = 6


@cache
def seed_kernel() -> MarkovKernel:
    return MarkovKernel(TARGET, GOOD_DRAFT)


def sparse_table(rng: np.random.Generator, vocab: int, zero_frac: float) -> np.ndarray:
    t = rng.exponential(size=(vocab, vocab))
    t[rng.random((vocab, vocab)) < zero_frac] = 0.0
    empty = t.sum(axis=1) == 0.0
    t[empty, rng.integers(0, vocab, size=int(empty.sum()))] = 1.0
    return t / t.sum(axis=1, keepdims=True)


# ---------------------------------------------------------------------------------------------
# reference implementation from the papers
# ---------------------------------------------------------------------------------------------
class Reference:
    """Leviathan et al. 2022 Alg. 1 for order-1 Markov tables, one chain at a time.

    Round from context c0 with draft length gamma:
      1. for i = 1..gamma: x_i ~ Mq(prefix + x_1..x_{i-1}), i.e. Q[x_{i-1}] (x_0 = c0);
      2. p_1..p_{gamma+1} = Mp on the gamma+1 prefixes (one target call);
      3. r_i ~ U(0, 1); n = min({i - 1 : r_i > p_i(x_i) / q_i(x_i)} U {gamma});
      4. p' = p_{n+1}, and if n < gamma: p' = norm(max(0, p_{n+1} - q_{n+1}));
      5. emit x_1..x_n and t ~ p'.
    Seed-program variants: ``greedy`` accepts iff x_i = argmax p_i; ``no_resample`` draws the
    rejection token from p_{n+1}; ``continue`` also emits x_{n+2}..x_gamma after it.
    """

    def __init__(self, P: np.ndarray, Q: np.ndarray) -> None:
        self.P, self.Q = P, Q
        self.V = P.shape[0]
        self.pop = list(range(self.V))

        def cum(row: np.ndarray) -> list[float]:
            return list(itertools.accumulate(float(v) for v in row))

        self.cum_p = [cum(P[c]) for c in range(self.V)]
        self.cum_q = [cum(Q[c]) for c in range(self.V)]
        self.cum_res = []
        for c in range(self.V):
            r = [max(0.0, float(a) - float(b)) for a, b in zip(P[c], Q[c], strict=True)]
            s = sum(r)
            self.cum_res.append(cum(np.array(r) / s) if s > 0 else self.cum_p[c])
        self.argmax_p = [int(np.argmax(P[c])) for c in range(self.V)]

    def draw(self, cum: list[float], rnd: random.Random) -> int:
        return rnd.choices(self.pop, cum_weights=cum)[0]

    def round(self, c0: int, gamma: int, rule: str, rnd: random.Random) -> tuple[list[int], int]:
        drafts: list[int] = []
        c = c0
        for _ in range(gamma):
            c = self.draw(self.cum_q[c], rnd)
            drafts.append(c)
        prefixes = [c0, *drafts]
        n = gamma
        for i, x in enumerate(drafts):
            ctx = prefixes[i]
            if rule == "greedy":
                rejected = x != self.argmax_p[ctx]
            else:
                rejected = rnd.random() > self.P[ctx, x] / self.Q[ctx, x]
            if rejected:
                n = i
                break
        ctx = prefixes[n]
        if n == gamma or rule == "no_resample":
            t = self.draw(self.cum_p[ctx], rnd)
        else:
            t = self.draw(self.cum_res[ctx], rnd)
        out = [*drafts[:n], t]
        if rule == "continue" and n < gamma:
            out.extend(drafts[n + 1:])
        return out, n

    def first_two(self, c0: int, gamma: int, rule: str, rnd: random.Random) -> tuple[int, int]:
        out: list[int] = []
        ctx = c0
        while len(out) < 2:
            new, _ = self.round(ctx, gamma, rule, rnd)
            out.extend(new)
            ctx = out[-1]
        return out[0], out[1]


@cache
def seed_reference() -> Reference:
    return Reference(TARGET, GOOD_DRAFT)


def ref_accepted_hist(ref: Reference, c0: int, gamma: int, rule: str, n: int, seed: int):
    rnd = random.Random(seed)
    h = np.zeros(gamma + 1, dtype=np.int64)
    for _ in range(n):
        h[ref.round(c0, gamma, rule, rnd)[1]] += 1
    return h


def ref_first_two(ref: Reference, c0: int, gamma: int, rule: str, n: int, seed: int):
    rnd = random.Random(seed)
    h = np.zeros((ref.V, ref.V), dtype=np.int64)
    for _ in range(n):
        a, b = ref.first_two(c0, gamma, rule, rnd)
        h[a, b] += 1
    return h


def two_sample_chi2(a, b, min_count: float = 10.0) -> tuple[float, int, float]:
    """Two-sample chi-square for binned counts with unequal totals (Numerical Recipes chstwo).

    Cells with a combined count below ``min_count`` are pooled into one cell.
    Returns (statistic, df, p-value).
    """
    a = np.asarray(a, dtype=float).ravel()
    b = np.asarray(b, dtype=float).ravel()
    na, nb = a.sum(), b.sum()
    tot = a + b
    small = tot < min_count
    if small.any():
        a = np.append(a[~small], a[small].sum())
        b = np.append(b[~small], b[small].sum())
        tot = a + b
    keep = tot > 0
    a, b, tot = a[keep], b[keep], tot[keep]
    ka, kb = math.sqrt(nb / na), math.sqrt(na / nb)
    stat = float(np.sum((ka * a - kb * b) ** 2 / tot))
    df = a.size - 1
    return stat, df, float(chi2_sf(stat, df)) if df > 0 else 1.0


def test_two_sample_chi2_has_power_and_size() -> None:
    rng = np.random.default_rng(0)
    p = np.array([0.1, 0.2, 0.3, 0.4])
    same = [two_sample_chi2(rng.multinomial(5000, p), rng.multinomial(20000, p))[2]
            for _ in range(200)]
    # p-values of a valid test are ~uniform under H0
    assert 0.35 < float(np.mean(same)) < 0.65
    # Binomial(200, 0.05) false alarms at most binomial_range's top (28) but with prob. 1e-6
    assert np.sum(np.array(same) < 0.05) <= mc.binomial_range(200, 0.05)[1]
    shifted = np.array([0.12, 0.2, 0.3, 0.38])
    assert two_sample_chi2(rng.multinomial(50000, p), rng.multinomial(50000, shifted))[2] < 1e-6


# ---------------------------------------------------------------------------------------------
# 1. TableSampler and inverse_cdf_rows are exactly searchsorted(cdf, u, 'right')
# ---------------------------------------------------------------------------------------------
def _awkward_table(rng: np.random.Generator, vocab: int) -> np.ndarray:
    t = sparse_table(rng, vocab, 0.4)
    if vocab >= 3:
        t[0] = 0.0
        t[0, vocab // 2] = 1.0  # single support point in the middle
        t[1] = 0.0
        t[1, 0] = 0.25
        t[1, -1] = 0.75  # leading/trailing mass, zeros between
        t[2] = 0.0
        t[2, 1:-1] = 1.0 / (vocab - 2)  # leading AND trailing zeros
    return t / t.sum(axis=1, keepdims=True)


def _edge_uniforms(cdf_row: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
    brk = cdf_row[cdf_row < 1.0]
    if m <= 4096:
        edges = np.arange(m) / m
    else:  # guide buckets around every breakpoint, plus a random subset of the rest
        cells = np.concatenate([np.floor(brk * m), np.floor(brk * m) + 1,
                                rng.integers(0, m, 1000)])
        edges = np.unique(np.clip(cells, 0, m - 1)) / m
    u = np.concatenate([
        [0.0, np.nextafter(1.0, 0.0), 0.5, 0.25, 0.75],
        brk, np.nextafter(brk, 0.0), np.nextafter(brk, 1.0),
        edges, np.nextafter(edges[1:], 0.0),
        rng.random(200),
    ])
    return u[(u >= 0.0) & (u < 1.0)]


@pytest.mark.parametrize("vocab", [2, 6, 37, 1000])
@pytest.mark.parametrize("kind", ["awkward", "dense", "uniform"])
def test_table_sampler_equals_searchsorted(vocab: int, kind: str) -> None:
    rng = np.random.default_rng(vocab)
    if kind == "awkward":
        table = _awkward_table(rng, vocab)
    elif kind == "dense":
        table = rng.dirichlet(np.full(vocab, 0.3), size=vocab)
    else:
        table = np.full((vocab, vocab), 1.0 / vocab)
    sampler = TableSampler(table)
    rows_to_check = range(vocab) if vocab <= 37 else list(range(5)) + list(
        rng.choice(vocab, 25, replace=False))
    for r in rows_to_check:
        c = np.cumsum(table[r])
        cdf = c / c[-1]
        u = _edge_uniforms(cdf, sampler.m, rng)
        expected = np.searchsorted(cdf, u, side="right")
        got = sampler(np.full(u.size, r, dtype=np.intp), u)
        # identity is the claim: the sampler's cdf is this one (same cumsum and division), and
        # u sits on its breakpoints on purpose
        assert np.array_equal(got, expected), f"row {r}"
        assert np.all(table[r][got] > 0.0)  # zero-probability tokens are never returned
    # vectorised across rows in one call, too
    m = 2000
    rows = rng.integers(0, vocab, m)
    u = rng.random(m)
    u[:3] = [0.0, np.nextafter(1.0, 0.0), 0.5]
    c = np.cumsum(table[rows], axis=1)
    cdf = c / c[:, -1:]
    expected = np.array([np.searchsorted(cdf[i], u[i], side="right") for i in range(m)])
    got = sampler(rows.astype(np.intp), u)
    assert np.array_equal(got, expected)
    assert np.all(table[rows, got] > 0.0)
    # inverse_cdf_rows (used by iid_round) has the same contract
    assert np.array_equal(inverse_cdf_rows(normalised_cdf(table[rows]), u), expected)


def test_guided_rows_is_the_count_on_breakpoints() -> None:
    """GuidedRows returns #{k: cdf_k <= u} of each chain's row (what searchsorted returns),
    u on every breakpoint, every guide edge j/M and either side of them, on rows with
    zero-probability tokens, a crowded bucket (a tail of tiny tokens) and widths 1..40."""
    rng = np.random.default_rng(11)
    for v in [*range(1, 10), 17, 40]:
        table = rng.dirichlet(np.ones(v), 40) * (rng.random((40, v)) < 0.7)
        table[:, rng.integers(0, v)] += 0.1
        table[0, v // 2:] = 1e-9  # many CDF values in the last bucket
        cdf = normalised_cdf(table)
        draw = GuidedRows(table)
        rows = np.repeat(np.arange(40), v + draw.m + 1)
        edge = np.concatenate([cdf, np.tile(np.arange(draw.m + 1) / draw.m, (40, 1))], axis=1)
        u = edge.ravel()
        u = np.concatenate([u, np.nextafter(u, 0.0), np.nextafter(u, 1.0), [0.0, 0.0]])
        u = np.clip(u, 0.0, np.nextafter(1.0, 0.0))
        rows = np.concatenate([rows] * 3 + [[0, 39]])
        want = np.array([np.searchsorted(cdf[r], x, side="right")
                         for r, x in zip(rows, u, strict=True)])
        assert np.array_equal(draw(rows, u), np.minimum(want, v - 1))
        assert np.array_equal(draw(rows, u), inverse_cdf_rows(cdf[rows], u))


def test_table_sampler_exercises_all_lookup_paths() -> None:
    """0 steps (uniform, V power of 2), one comparison, and bisection (memory cap hit)."""
    assert TableSampler(np.full((8, 8), 1 / 8)).steps == 0
    assert TableSampler(TARGET).steps == 1
    big = np.random.default_rng(5).dirichlet(np.full(1000, 0.05), size=1000)
    s = TableSampler(big)
    assert s.steps > 1
    rng = np.random.default_rng(6)
    rows = rng.integers(0, 1000, 4000).astype(np.intp)
    u = rng.random(4000)
    c = np.cumsum(big[rows], axis=1)
    cdf = c / c[:, -1:]
    expected = (cdf <= u[:, None]).sum(axis=1)
    assert np.array_equal(s(rows, u), expected)  # identity: same cdf operations, same order


def test_guide_table_stays_small_with_interior_zero_probability() -> None:
    table = np.array([[0.3, 0.0, 0.2, 0.5]] * 4)  # distinct breakpoints 0.3, 0.5, 1
    s = TableSampler(table)
    # one breakpoint inside (0.3) per row: no bucket ever holds two, and M stops growing as
    # soon as the impure buckets are at most the IMPURE fraction (one per row of M)
    assert s.steps <= 1
    assert 1 / s.m <= TableSampler.IMPURE < 2 / s.m


def test_normalised_cdf_last_is_one_and_zero_tail() -> None:
    t = np.array([[0.2, 0.3, 0.5 - 1e-16, 0.0], [0.0, 1.0, 0.0, 0.0]])
    c = normalised_cdf(t)
    # exact: the last entry is x / x; 0 / s and 1 / 1 are exact too
    assert np.all(c[:, -1] == 1.0)
    assert c[1, 0] == 0.0 and c[1, 1] == 1.0 and c[1, 3] == 1.0
    assert np.array_equal(inverse_cdf_rows(c, np.array([np.nextafter(1.0, 0.0)] * 2)),
                          np.array([2, 1]))


# ---------------------------------------------------------------------------------------------
# 2. engine vs reference vs exact law on the seed's TARGET / GOOD_DRAFT
# ---------------------------------------------------------------------------------------------
ENGINE_N = 200_000
REF_N_HIST = 12_000
REF_N_JOINT = 15_000
CTX_OF_GAMMA = {1: 0, 3: 3, 4: 0}


def _seed_int(*parts: int) -> int:
    return int(np.random.SeedSequence(list(parts)).generate_state(1)[0])


@pytest.mark.parametrize("gamma", [1, 3, 4])
@pytest.mark.parametrize("rule", RULES)
def test_accepted_per_round_engine_vs_reference_vs_exact(rule: str, gamma: int) -> None:
    ctx = CTX_OF_GAMMA[gamma]
    k = RULES.index(rule)
    eng = long_run_markov(seed_kernel(), gamma, rule, np.random.SeedSequence([11, k, gamma]),
                          chains=ENGINE_N, rounds=1, burn_in=0, batches=1, start=ctx)[0]
    assert eng.shape == (gamma + 1,) and eng.sum() == ENGINE_N
    ref = ref_accepted_hist(seed_reference(), ctx, gamma, rule, REF_N_HIST, _seed_int(12, k, gamma))
    exact = round_law(TARGET, GOOD_DRAFT, gamma, rule).accepted[ctx]
    _, _, p2 = two_sample_chi2(eng, ref)
    assert p2 > P_MIN, (eng, ref)
    assert gof_test(eng, exact).p_value > P_MIN, (eng / ENGINE_N, exact)
    assert gof_test(ref, exact).p_value > P_MIN, (ref / REF_N_HIST, exact)


@pytest.mark.parametrize("gamma", [1, 3, 4])
@pytest.mark.parametrize("rule", RULES)
def test_first_two_tokens_engine_vs_reference_vs_exact(rule: str, gamma: int) -> None:
    ctx = 0
    k = RULES.index(rule)
    eng = first_tokens_markov(seed_kernel(), gamma, rule, np.random.SeedSequence([21, k, gamma]),
                              ENGINE_N, ctx, np.arange(V6), V6)
    assert eng.shape == (V6, V6) and eng.sum() == ENGINE_N
    ref = ref_first_two(seed_reference(), ctx, gamma, rule, REF_N_JOINT, _seed_int(22, k, gamma))
    exact = first_tokens_distribution(TARGET, GOOD_DRAFT, ctx, gamma, rule, n=2)
    _, _, p2 = two_sample_chi2(eng, ref)
    assert p2 > P_MIN
    assert gof_test(eng, exact).p_value > P_MIN
    assert gof_test(ref, exact).p_value > P_MIN
    truth = target_joint(TARGET, ctx, 2)
    if rule == "correct":  # lossless (Leviathan Thm 3.5 / Chen Thm 1)
        assert gof_test(eng, truth).p_value > P_MIN
        assert gof_test(ref, truth).p_value > P_MIN
    elif 0.5 * np.abs(exact - truth).sum() > 0.02:  # broken rules are detectably biased
        assert gof_test(eng, truth).p_value < 1e-9
        assert two_sample_chi2(eng, ENGINE_N * truth.ravel())[2] < 1e-6


@pytest.mark.parametrize("rule", RULES)
def test_first_emitted_token_per_start_context(rule: str) -> None:
    """All six start contexts at once: engine first token vs exact marginal (γ = 4)."""
    kern = seed_kernel()
    rng = np.random.default_rng(31 + RULES.index(rule))
    n = 60_000
    gamma = 4
    ctx = np.repeat(np.arange(V6), n // V6).astype(np.intp)
    res = kern.round(ctx, gamma, rule, rng.random((2 * gamma + 1, ctx.size)))
    first = res.emitted(0)
    for c in range(V6):
        exact = first_tokens_distribution(TARGET, GOOD_DRAFT, c, gamma, rule, n=1)
        counts = np.bincount(first[ctx == c], minlength=V6)
        assert gof_test(counts, exact).p_value > P_MIN
        if rule in ("correct", "continue"):
            np.testing.assert_allclose(exact, TARGET[c], atol=1e-12)


@pytest.mark.parametrize("rule", ["correct", "continue", "greedy"])
def test_long_run_after_burn_in_is_stationary_mixture(rule: str) -> None:
    """Independent chains, one counted round after burn-in: law = pi @ round_law.accepted."""
    gamma = 3
    law = round_law(TARGET, GOOD_DRAFT, gamma, rule)
    pi = stationary(law.next_state)
    h = long_run_markov(seed_kernel(), gamma, rule, np.random.SeedSequence(41), chains=100_000,
                        rounds=1, burn_in=25, batches=1, start=5)[0]
    assert gof_test(h, pi @ law.accepted).p_value > P_MIN
    # and it is not simply the law from the start context
    assert gof_test(h, law.accepted[5]).p_value < 1e-6 or np.allclose(
        pi @ law.accepted, law.accepted[5], atol=2e-3)


@pytest.mark.slow
@pytest.mark.parametrize("gamma", [2, 5])
@pytest.mark.parametrize("rule", RULES)
def test_slow_first_two_tokens_reference_larger(rule: str, gamma: int) -> None:
    k = RULES.index(rule)
    eng = first_tokens_markov(seed_kernel(), gamma, rule, np.random.SeedSequence([51, k, gamma]),
                              1_000_000, 2, np.arange(V6), V6)
    ref = ref_first_two(seed_reference(), 2, gamma, rule, 80_000, _seed_int(52, k, gamma))
    exact = first_tokens_distribution(TARGET, GOOD_DRAFT, 2, gamma, rule, n=2)
    assert two_sample_chi2(eng, ref)[2] > P_MIN
    assert gof_test(eng, exact).p_value > P_MIN
    assert gof_test(ref, exact).p_value > P_MIN


@pytest.mark.slow
@pytest.mark.parametrize("rule", RULES)
def test_slow_sparse_tables_engine_vs_reference(rule: str) -> None:
    """Tables with exact zeros (residual rows falling back to p, q = 0 cells)."""
    rng = np.random.default_rng(61)
    P = sparse_table(rng, 5, 0.4)
    Q = sparse_table(rng, 5, 0.4)
    Q[1] = P[1]  # residual has no mass in context 1
    ref = Reference(P, Q)
    kern = MarkovKernel(P, Q)
    for gamma in (2, 3):
        eng = first_tokens_markov(kern, gamma, rule, np.random.SeedSequence([62, gamma]),
                                  300_000, 1, np.arange(5), 5)
        rh = ref_first_two(ref, 1, gamma, rule, 40_000, 63 + gamma)
        exact = first_tokens_distribution(P, Q, 1, gamma, rule, n=2)
        assert two_sample_chi2(eng, rh)[2] > P_MIN
        assert gof_test(eng, exact).p_value > P_MIN
        assert gof_test(rh, exact).p_value > P_MIN


# ---------------------------------------------------------------------------------------------
# 3. invariants of a round
# ---------------------------------------------------------------------------------------------
def _own_residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    r = np.maximum(p - q, 0.0)
    s = r.sum()
    return r / s if s > 0 else p


@cache
def sparse_pair() -> tuple[np.ndarray, np.ndarray, MarkovKernel]:
    rng = np.random.default_rng(71)
    P = sparse_table(rng, 7, 0.5)
    Q = sparse_table(rng, 7, 0.5)
    Q[2] = P[2]  # residual without mass: falls back to p
    P[3] = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    Q[3] = [0.0, 0.0, 0.4, 0.0, 0.1, 0.5, 0.0]  # disjoint supports: every draft is rejected
    return P, Q, MarkovKernel(P, Q)


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("gamma", [1, 2, 5])
def test_round_invariants_on_sparse_tables(rule: str, gamma: int) -> None:
    P, Q, kern = sparse_pair()
    V = P.shape[0]
    rng = np.random.default_rng(72 + gamma)
    n = 6_000
    ctx = rng.integers(0, V, n).astype(np.intp)
    res = kern.round(ctx, gamma, rule, rng.random((2 * gamma + 1, n)))
    assert res.gamma == gamma
    assert res.x.shape == (gamma, n)
    acc = res.n_accepted
    assert acc.min() >= 0 and acc.max() <= gamma
    tok = res.tokens(rule)
    assert tok.min() >= 1 and tok.max() <= gamma + 1
    if rule == "continue":
        assert set(np.unique(tok)) <= {gamma, gamma + 1}
        assert np.array_equal(tok == gamma + 1, acc == gamma)
    else:
        assert np.array_equal(tok, acc + 1)
    prev = np.vstack([ctx, res.x[:-1]])  # context of every draft position
    # drafts come from Q's support
    assert np.all(Q[prev, res.x] > 0.0)
    # per chain: emitted sequence, its support and the next context
    residual_rows = np.array([_own_residual(P[c], Q[c]) for c in range(V)])
    nxt = res.next_context(rule)
    em_all = [res.emitted(j) for j in range(gamma + 1)]
    for i in range(0, n, 7):
        k = int(acc[i])
        drafts = [int(t) for t in res.x[:, i]]
        chain_prev = [int(ctx[i]), *drafts]
        for j in range(k):  # accepted drafts
            if rule == "greedy":
                assert drafts[j] == int(np.argmax(P[chain_prev[j]]))
            else:
                assert P[chain_prev[j], drafts[j]] > 0.0
        if rule == "greedy" and k < gamma:
            assert drafts[k] != int(np.argmax(P[chain_prev[k]]))
        stop = chain_prev[k]
        final = int(res.final[i])
        if k == gamma or rule == "no_resample":
            assert P[stop, final] > 0.0
        else:
            assert residual_rows[stop, final] > 0.0
        emitted = [int(em_all[j][i]) for j in range(int(tok[i]))]
        expected = [*drafts[:k], final]
        if rule == "continue" and k < gamma:
            expected += drafts[k + 1:]
        assert emitted == expected
        assert int(nxt[i]) == emitted[-1]


def test_identical_draft_accepts_everything() -> None:
    kern = MarkovKernel(TARGET, TARGET.copy())
    for rule in ("correct", "no_resample", "continue"):
        h = long_run_markov(kern, 4, rule, np.random.SeedSequence(3), 5000, 3, 0, 2)
        assert h[:, :4].sum() == 0 and h[:, 4].sum() == 15000


def test_kernel_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError):
        MarkovKernel(TARGET, TARGET[:5])
    with pytest.raises(ValueError):
        MarkovKernel(TARGET[:5], TARGET[:5])


# ---------------------------------------------------------------------------------------------
# 4. seeds, chunking, batch bookkeeping
# ---------------------------------------------------------------------------------------------
def _iid_spec(**kw) -> ModelSpec:
    base = {"name": "stub", "family": "iid", "vocab": 20, "draft": "noise"}
    base.update(kw)
    return ModelSpec(**base)


def test_same_seed_sequence_same_histograms() -> None:
    def ss() -> np.random.SeedSequence:
        return np.random.SeedSequence(entropy=1234, spawn_key=(3, 1, 4))

    for rule in RULES:  # identity is the claim: same seed, same operations in the same order
        a = long_run_markov(seed_kernel(), 3, rule, ss(), 5000, 4, 2, 5)
        b = long_run_markov(seed_kernel(), 3, rule, ss(), 5000, 4, 2, 5)
        assert np.array_equal(a, b)
        c = long_run_markov(seed_kernel(), 3, rule,
                            np.random.SeedSequence(entropy=1234, spawn_key=(3, 1, 5)),
                            5000, 4, 2, 5)
        assert not np.array_equal(a, c)
        j1 = first_tokens_markov(seed_kernel(), 3, rule, ss(), 5000, 0, np.arange(V6), V6)
        j2 = first_tokens_markov(seed_kernel(), 3, rule, ss(), 5000, 0, np.arange(V6), V6)
        assert np.array_equal(j1, j2)
    spec = _iid_spec(share="position")
    i1 = long_run_iid(spec, 1.0, None, 3, "correct", ss(), 3000, 2, 3)
    i2 = long_run_iid(spec, 1.0, None, 3, "correct", ss(), 3000, 2, 3)
    assert np.array_equal(i1, i2)


def _near_equal_blocks(sizes: np.ndarray, total: int) -> None:
    assert sizes.sum() == total
    assert sizes.max() - sizes.min() <= 1


@pytest.mark.parametrize("chunk", [1000, 4096])
def test_chunking_with_chains_not_a_multiple(monkeypatch, chunk: int) -> None:
    monkeypatch.setattr(engine, "CHUNK", chunk)
    chains, rounds, batches = 2 * chunk + 377, 3, 7
    for rule in RULES:
        h = long_run_markov(seed_kernel(), 4, rule, np.random.SeedSequence(8), chains, rounds,
                            2, batches, start=1)
        assert h.shape == (batches, 5)
        assert h.sum() == chains * rounds
        _near_equal_blocks(h.sum(axis=1) // rounds, chains)
        assert np.all(h.sum(axis=1) % rounds == 0)
    j = first_tokens_markov(seed_kernel(), 2, "correct", np.random.SeedSequence(9), chains, 0,
                            np.arange(V6), V6)
    assert j.sum() == chains
    h = long_run_iid(_iid_spec(share="position"), 1.0, None, 2, "correct",
                     np.random.SeedSequence(10), chains, 2, batches)
    assert h.shape == (batches, 3) and h.sum() == 2 * chains
    _near_equal_blocks(h.sum(axis=1) // 2, chains)


def test_small_chunk_still_samples_the_exact_law(monkeypatch) -> None:
    monkeypatch.setattr(engine, "CHUNK", 777)
    h = long_run_markov(seed_kernel(), 3, "correct", np.random.SeedSequence(12), 50_001, 1, 0, 1,
                        start=4)[0]
    assert gof_test(h, round_law(TARGET, GOOD_DRAFT, 3).accepted[4]).p_value > P_MIN
    j = first_tokens_markov(seed_kernel(), 3, "continue", np.random.SeedSequence(13), 50_001, 0,
                            np.arange(V6), V6)
    exact = first_tokens_distribution(TARGET, GOOD_DRAFT, 0, 3, "continue", n=2)
    assert gof_test(j, exact).p_value > P_MIN


def test_chunks_get_distinct_streams(monkeypatch) -> None:
    """Each chunk has its own child seed: chunks are not copies of one another."""
    monkeypatch.setattr(engine, "CHUNK", 1000)
    h = long_run_markov(seed_kernel(), 4, "correct", np.random.SeedSequence(14), 4000, 1, 0, 4)
    assert len({tuple(r) for r in h}) == 4


# ---------------------------------------------------------------------------------------------
# 5. the notebook's i.i.d. stub: iid_round / long_run_iid
# ---------------------------------------------------------------------------------------------
@cache
def stub_overlaps(n: int = 200_000, seed: int = 99) -> np.ndarray:
    """beta = sum min(p, q) of n independent notebook pairs (own implementation)."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(0.0, 1.0, (n, 20))
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    dl = np.log(p + 1e-12) + rng.normal(0.0, 0.3, (n, 20))
    q = np.exp(dl - dl.max(axis=1, keepdims=True))
    q /= q.sum(axis=1, keepdims=True)
    return np.minimum(p, q).sum(axis=1)


def _tokens_mean_se(hist: np.ndarray) -> tuple[float, float]:
    h = hist.sum(axis=0).astype(float)
    t = np.arange(1, h.size + 1, dtype=float)  # tokens = accepted + 1
    n = h.sum()
    m = float(h @ t / n)
    var = float(h @ (t - m) ** 2 / (n - 1))
    return m, math.sqrt(var / n)


@pytest.mark.parametrize("gamma", [1, 4])
def test_long_run_iid_share_position_matches_eq1(gamma: int) -> None:
    """Fresh pair per position => i.i.d. acceptances with rate E[beta] => Leviathan Eq. 1."""
    beta = stub_overlaps()
    b_mean = float(beta.mean())
    b_se = float(beta.std() / math.sqrt(beta.size))
    h = long_run_iid(_iid_spec(share="position"), 1.0, None, gamma, "correct",
                     np.random.SeedSequence([81, gamma]), 25_000, 2, 8)
    assert h.sum() == 50_000
    m, se = _tokens_mean_se(h)
    e = float(expected_tokens(b_mean, gamma))
    de = (float(expected_tokens(b_mean + 1e-6, gamma)) - e) / 1e-6
    mc.assert_close(m, math.hypot(se, de * b_se), e, assertions=2)  # ~5.3 SE; 7.6 SE fails
    # the whole histogram is the truncated geometric law of rate E[beta]
    k = np.arange(gamma + 1)
    law = np.where(k < gamma, b_mean**k * (1 - b_mean), b_mean**gamma)
    assert gof_test(h.sum(axis=0), law).p_value > mc.p_floor(2)


def test_long_run_iid_share_round_matches_mixture() -> None:
    """One pair per round: E[tokens] = E_pair[(1 - beta^(γ+1)) / (1 - beta)] (own MC)."""
    gamma = 4
    beta = stub_overlaps()
    per_pair = np.asarray(expected_tokens(beta, gamma))
    e, e_se = float(per_pair.mean()), float(per_pair.std() / math.sqrt(per_pair.size))
    h = long_run_iid(_iid_spec(share="round"), 1.0, None, gamma, "correct",
                     np.random.SeedSequence(82), 25_000, 2, 8)
    m, se = _tokens_mean_se(h)
    mc.assert_close(m, math.hypot(se, e_se), e)  # ~4.9 SE; a bias of 7.2 SE fails


@pytest.mark.parametrize("share", ["round", "position"])
def test_long_run_iid_calibrated_is_exact_geometric(share: str) -> None:
    gamma, alpha = 3, 0.7
    h = long_run_iid(_iid_spec(draft="calibrated", share=share), 1.0, alpha, gamma, "correct",
                     np.random.SeedSequence(83), 30_000, 2, 4).sum(axis=0)
    k = np.arange(gamma + 1)
    law = np.where(k < gamma, alpha**k * (1 - alpha), alpha**gamma)
    assert gof_test(h, law).p_value > P_MIN
    m, se = _tokens_mean_se(h[None])
    mc.assert_close(m, se, float(expected_tokens(alpha, gamma)), assertions=2)


@pytest.mark.parametrize("rule", RULES)
def test_iid_round_frozen_pairs_vs_exact_markov(rule: str) -> None:
    """Fixed pairs per position: iid_round = the frozen-position Markov model's round law."""
    gamma = 3
    spec = _iid_spec(seed=5)
    big_p, big_q, start = iid_frozen_markov(spec, 1.0, None, gamma + 1)
    p, q = iid_pairs(spec, 1.0, None, np.random.default_rng(5), (gamma + 1,))
    n = 50_000
    pp = np.broadcast_to(p, (n, gamma + 1, 20))
    qq = np.broadcast_to(q, (n, gamma + 1, 20))
    res = iid_round(pp, qq, gamma, rule, np.random.default_rng(84).random((2 * gamma + 1, n)))
    assert res.n_accepted.min() >= 0 and res.n_accepted.max() <= gamma
    law = round_law(big_p, big_q, gamma, rule)
    assert gof_test(np.bincount(res.n_accepted, minlength=gamma + 1),
                    law.accepted[start]).p_value > P_MIN
    first = np.bincount(res.emitted(0), minlength=20)
    exact_first = first_tokens_distribution(big_p, big_q, start, gamma, rule, n=1)
    folded = exact_first.reshape(-1)[: (gamma + 1) * 20].reshape(gamma + 1, 20).sum(axis=0)
    assert gof_test(first, folded).p_value > P_MIN
    if rule in ("correct", "continue"):
        np.testing.assert_allclose(folded, p[0], atol=1e-12)
    # and the Markov engine on the frozen tables agrees with iid_round
    h = long_run_markov(MarkovKernel(big_p, big_q), gamma, rule, np.random.SeedSequence(85),
                        n, 1, 0, 1, start=start)[0]
    assert two_sample_chi2(h, np.bincount(res.n_accepted, minlength=gamma + 1))[2] > P_MIN


def test_iid_round_single_pair_truncated_geometric() -> None:
    """positions = 1 (notebook's speculative_step): n_acc ~ truncated geometric of beta(p, q)."""
    gamma = 4
    p, q = iid_pairs(_iid_spec(), 1.0, None, np.random.default_rng(8), (1, 1))
    beta = float(np.minimum(p, q).sum())
    n = 80_000
    res = iid_round(np.broadcast_to(p, (n, 1, 20)), np.broadcast_to(q, (n, 1, 20)), gamma,
                    "correct", np.random.default_rng(86).random((2 * gamma + 1, n)))
    k = np.arange(gamma + 1)
    law = np.where(k < gamma, beta**k * (1 - beta), beta**gamma)
    assert gof_test(np.bincount(res.n_accepted, minlength=gamma + 1), law).p_value > P_MIN
    # every emitted token (not only the first) has law p: the pair is the same at all positions
    for j in range(gamma + 1):
        sel = res.tokens("correct") > j
        counts = np.bincount(res.emitted(j)[sel], minlength=20)
        assert gof_test(counts, p[0, 0]).p_value > P_MIN


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("npos", [1, 2, 4])
def test_iid_round_views_draw_what_copied_rows_draw(rule: str, npos: int) -> None:
    """iid_round reads p, q at positions min(i, npos - 1): through views (one pair
    broadcast, or a pair per position) or copies, the same drafts, accepts and final token
    as verify_uniforms on the rows copied out position by position; the long run's
    accepted_uniforms counts the same accepted drafts."""
    gamma, n = 3, 4000
    p, q = iid_pairs(_iid_spec(), 1.0, None, np.random.default_rng(npos), (n, npos))
    u = np.random.default_rng(9).random((2 * gamma + 1, n))
    pos = np.minimum(np.arange(gamma + 1), npos - 1)
    p_all, q_draft = p[:, pos].copy(), q[:, pos[:gamma]].copy()
    x = inverse_cdf_rows(normalised_cdf(q_draft), u[:gamma].T)
    want = verify_uniforms(p_all, q_draft, x, rule, u[gamma : 2 * gamma].T, u[2 * gamma])
    got = iid_round(p, q, gamma, rule, u)
    assert np.array_equal(got.x, x.T) and np.array_equal(got.final, want.final)
    assert np.array_equal(got.n_accepted, want.accepted)
    counted = accepted_uniforms(p_all, q_draft, x, rule, u[gamma : 2 * gamma].T)
    assert np.array_equal(counted, want.accepted)


# ---------------------------------------------------------------------------------------------
# 6. temperature 0: the correct rule reproduces the target's greedy path
# ---------------------------------------------------------------------------------------------
def _markov_spec(**kw) -> ModelSpec:
    base = {"name": "m", "family": "markov", "vocab": 6, "draft": "blend", "weight": 0.85,
            "other": TableSpec(seed=2, sharpness=2.5)}
    base.update(kw)
    return ModelSpec(**base)


@pytest.mark.parametrize("spec,alpha", [
    (_markov_spec(), None),
    (_markov_spec(draft="uniform"), None),
    (_markov_spec(draft="calibrated", other=TableSpec(special="far")), 0.4),
    (_markov_spec(draft="calibrated", other=TableSpec(special="uniform")), 0.6),
])
@pytest.mark.parametrize("gamma", [1, 4])
def test_temperature_zero_correct_rule_is_target_greedy_path(spec, alpha, gamma) -> None:
    P, Q = markov_pair(spec, 0.0, alpha)
    base = _seed_table(1, 2.5)
    succ = [int(np.argmax(base[c])) for c in range(6)]  # greedy successor of the raw target
    kern = MarkovKernel(P, Q)
    n_per = 300
    ctx = np.repeat(np.arange(6), n_per).astype(np.intp)
    seqs = [[int(c)] for c in ctx]
    rng = np.random.default_rng(91)
    cur = ctx.copy()
    for _ in range(6):
        res = kern.round(cur, gamma, "correct", rng.random((2 * gamma + 1, cur.size)))
        tok = res.tokens("correct")
        for j in range(gamma + 1):
            em = res.emitted(j)
            for i in np.flatnonzero(tok > j):
                seqs[i].append(int(em[i]))
        cur = res.next_context("correct")
    for s in seqs:
        assert len(s) >= 7
        for a, b in itertools.pairwise(s):
            assert b == succ[a]
    # first_tokens_markov puts all mass on (g(0), g(g(0)))
    j = first_tokens_markov(kern, gamma, "correct", np.random.SeedSequence(92), 20_000, 0,
                            np.arange(6), 6)
    assert j[succ[0], succ[succ[0]]] == 20_000


def test_temperature_zero_iid_emits_argmax_of_each_position() -> None:
    gamma = 4
    spec = _iid_spec(draft="calibrated")
    p, q = iid_pairs(spec, 0.0, 0.5, np.random.default_rng(93), (5000, gamma + 1))
    res = iid_round(p, q, gamma, "correct", np.random.default_rng(94).random((2 * gamma + 1, 5000)))
    am = p.argmax(axis=2)  # (n, γ+1)
    tok = res.tokens("correct")
    for j in range(gamma + 1):
        sel = tok > j
        assert np.array_equal(res.emitted(j)[sel], am[sel, j])
    # half the drafts are the argmax (calibrated alpha = 0.5): truncated geometric of 0.5
    k = np.arange(gamma + 1)
    law = np.where(k < gamma, 0.5**k * 0.5, 0.5**gamma)
    assert gof_test(np.bincount(res.n_accepted, minlength=gamma + 1), law).p_value > P_MIN


@pytest.mark.parametrize("vocab", [2, 6, 20])
@pytest.mark.parametrize("rule", ["correct", "greedy", "no_resample", "continue"])
def test_advance_equals_round_draw_for_draw(vocab: int, rule: str) -> None:
    """The long-run fast path (encoded states) makes exactly round()'s decisions."""
    rng = np.random.default_rng(vocab)
    for trial in range(3):
        p = rng.dirichlet(np.full(vocab, 0.7), size=vocab)
        q = rng.dirichlet(np.full(vocab, 0.7), size=vocab)
        if trial == 1:
            q[:, 0] = 0.0
            q /= q.sum(axis=1, keepdims=True)
        if trial == 2:
            q = p.copy()
        kernel = MarkovKernel(p, q)
        for gamma in (1, 3, 5):
            ctx = rng.integers(0, vocab, 4000).astype(np.intp)
            u = rng.random((2 * gamma + 1, ctx.size))
            res = kernel.round(ctx, gamma, rule, u)  # type: ignore[arg-type]
            n_acc, state = kernel.advance(kernel.encode(ctx), gamma, rule, u)  # type: ignore[arg-type]
            assert np.array_equal(n_acc, res.n_accepted)
            assert np.array_equal(state, kernel.encode(res.next_context(rule)))  # type: ignore[arg-type]


def test_seed_tables_draw_by_one_lookup() -> None:
    """The guide tables grow until at most IMPURE of the buckets need more than the lookup."""
    kernel = MarkovKernel(TARGET, 0.55 * TARGET + 0.45 * _seed_table(2, 2.5))
    for sampler, rows in ((kernel.draft_sampler, V6), (kernel.final_sampler, 2 * V6)):
        assert sampler.m == kernel.m == 1 << kernel.shift
        assert 0 < sampler.thr.size <= TableSampler.IMPURE * rows * sampler.m
        assert sampler.steps == 1  # the impure buckets hold one CDF value each
