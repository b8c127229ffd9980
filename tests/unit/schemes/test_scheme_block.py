"""Tests for specsim.schemes.block: block verification (Sun et al. 2024, arXiv 2403.10444, Alg. 2).

The references here are independent of the module: a plain scalar loop of Algorithm 2 in exact
rational arithmetic over every draft and every η-outcome (which also proves the algorithm
lossless on its tables, exactly), the target's own law (exact.target_joint), token-wise
verification's exact round law (exact.round_law) and Monte Carlo runs of :func:`play` judged
with G-tests and confidence intervals at false-alarm probability 1e-6 per test (tests/mc.py).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from mc import FAIL_PROB
from numpy.typing import NDArray
from scipy import stats

from specsim import exact
from specsim.configfile import read_config
from specsim.exact import RoundLaw, first_two_law, stationary_rates
from specsim.families import family_of
from specsim.models.iid import iid_frozen_markov
from specsim.models.maths import blend, one_hot_argmin, random_table
from specsim.schemes.block import law, path_law, play

FloatArray = NDArray[np.float64]
ROOT = Path(__file__).resolve().parents[3]
LEVEL = FAIL_PROB  # false-alarm probability of each test, whatever its stream (tests/mc.py)
F = Fraction

# A tiny pair with every corner of Alg. 2: Q = 0 branches (Q[1, 2]), a drafted token the target
# never emits (P[0, 1] = 0: p_i = 0 from there on), and a context whose rows agree (row 2), so
# drafting 0 -> 2 gives p_1 = 1, S_1 = 0: the 0/0 of h_1.
TINY_P = [[F(1, 2), F(0), F(1, 2)], [F(1, 4), F(1, 2), F(1, 4)], [F(1, 5), F(2, 5), F(2, 5)]]
TINY_Q = [[F(1, 3), F(1, 2), F(1, 6)], [F(1, 2), F(1, 2), F(0)], [F(1, 5), F(2, 5), F(2, 5)]]


def _tables() -> dict[str, tuple[FloatArray, FloatArray]]:
    p1 = random_table(1, 2.5)
    p3 = random_table(3, 1.0)
    return {
        "blend55": (p1, blend(p1, random_table(2, 2.5), 0.55)),
        "far": (p1, blend(p1, one_hot_argmin(p1), 0.3)),
        "independent": (p3, random_table(4, 1.0)),
    }


TABLES = _tables()


def _stub() -> tuple[FloatArray, FloatArray, int, int]:
    """The default config's ``stub`` model frozen for 3 positions: (P, Q, start, vocab)."""
    spec = family_of("iid").build("stub", read_config(ROOT / "config.yaml")["models"]["stub"])
    big_p, big_q, start = iid_frozen_markov(spec, 1.0, None, 3)
    return big_p, big_q, start, spec.vocab


# ---------------------------------------------------------------------------------------------
# 1. exact rational reference: Alg. 2 as a scalar loop
# ---------------------------------------------------------------------------------------------
def _alg2(P: list[list[F]], Q: list[list[F]], s: int, gamma: int,
          zero_zero: int = 1) -> tuple[dict[tuple[int, ...], F], int]:
    """Law of the emitted sequence of one round from s (and how often h hit 0/0)."""
    size = len(P)
    out: dict[tuple[int, ...], F] = defaultdict(F)
    hits = 0
    for xs in itertools.product(range(size), repeat=gamma):
        ctx = (s, *xs)
        w = F(1)
        for i in range(gamma):
            w *= Q[ctx[i]][ctx[i + 1]]
        if w == 0:
            continue
        p, h = [F(1)], [F(1)]
        for i in range(1, gamma + 1):
            p.append(min(p[-1] * P[ctx[i - 1]][ctx[i]] / Q[ctx[i - 1]][ctx[i]], F(1)))
            if i == gamma:
                h.append(p[i])
                continue
            mass = sum((max(p[i] * P[ctx[i]][y] - Q[ctx[i]][y], F(0)) for y in range(size)),
                       F(0))
            if mass + 1 - p[i] == 0:
                hits += 1
                h.append(F(zero_zero))
            else:
                h.append(mass / (mass + 1 - p[i]))
        for ok in itertools.product((True, False), repeat=gamma):
            prob = w
            for i, o in enumerate(ok, start=1):
                prob *= h[i] if o else 1 - h[i]
            if prob == 0:
                continue
            tau = max((i for i, o in enumerate(ok, start=1) if o), default=0)
            c = ctx[tau]
            if tau == gamma:
                y_law = list(P[c])
            else:
                r = [max(p[tau] * P[c][y] - Q[c][y], F(0)) for y in range(size)]
                y_law = [ri / sum(r) for ri in r] if sum(r) else list(P[c])
            for y, py in enumerate(y_law):
                if py:
                    out[(*xs[:tau], y)] += prob * py
    return dict(out), hits


def _floats(t: list[list[F]]) -> FloatArray:
    return np.array([[float(v) for v in row] for row in t])


@pytest.mark.parametrize("gamma", [1, 2, 3, 4])
def test_law_equals_rational_alg2(gamma: int) -> None:
    P, Q = TINY_P, TINY_Q
    size = len(P)
    lw = law(_floats(P), _floats(Q), gamma, {})
    for s in range(size):
        seqs, hits = _alg2(P, Q, s, gamma)
        assert sum(seqs.values()) == 1
        if gamma >= 2 and s == 0:
            assert hits > 0  # the 0/0 case is exercised...
        assert _alg2(P, Q, s, gamma, zero_zero=0)[0] == seqs  # ...and its value never matters
        tokens, nxt, single = np.zeros(gamma + 2), np.zeros(size), np.zeros(size)
        pair = np.zeros((size, size))
        for seq, pr in seqs.items():
            tokens[len(seq)] += pr
            nxt[seq[-1]] += pr
            if len(seq) == 1:
                single[seq[0]] += pr
            else:
                pair[seq[0], seq[1]] += pr
        np.testing.assert_allclose(lw.tokens[s], tokens, rtol=0, atol=1e-12)
        np.testing.assert_allclose(lw.next_state[s], nxt, rtol=0, atol=1e-12)
        np.testing.assert_allclose(lw.single[s], single, rtol=0, atol=1e-12)
        np.testing.assert_allclose(lw.pair[s], pair, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(lw.drafted, gamma)
    np.testing.assert_array_equal(lw.context, np.arange(size))


@pytest.mark.parametrize("gamma", [1, 2, 3])
def test_rational_alg2_is_lossless_exactly(gamma: int) -> None:
    """The round's sequence continued by the target to γ+1 tokens has the target's law, in
    exact arithmetic: the transcription of Alg. 2 above (and so the module) is correct."""
    P, Q = TINY_P, TINY_Q
    size = len(P)
    for s in range(size):
        joint: dict[tuple[int, ...], F] = defaultdict(F)
        for seq, pr in _alg2(P, Q, s, gamma)[0].items():
            for tail in itertools.product(range(size), repeat=gamma + 1 - len(seq)):
                full = (*seq, *tail)
                mass = pr
                for i in range(len(seq), gamma + 1):
                    mass *= P[full[i - 1]][full[i]]
                joint[full] += mass
        for full in itertools.product(range(size), repeat=gamma + 1):
            want = P[s][full[0]]
            for i in range(1, gamma + 1):
                want *= P[full[i - 1]][full[i]]
            assert joint.get(full, F(0)) == want


# ---------------------------------------------------------------------------------------------
# 2. lossless: whole round composed with the target, and the first two tokens
# ---------------------------------------------------------------------------------------------
def _round_then_target(P: FloatArray, Q: FloatArray, s: int, gamma: int) -> FloatArray:
    """Joint law (S,)*(γ+1) of the round's tokens from s continued by the target, built from
    :func:`path_law` with the residual written out here."""
    size = P.shape[0]
    b = path_law(P, Q, gamma, s)
    ctx = np.concatenate([np.full((b.weight.size, 1), s), b.drafts], axis=1)
    out = np.zeros((size,) * (gamma + 1))
    for tau in range(gamma + 1):
        c = ctx[:, tau]
        if tau == gamma:
            y = P[c]
        else:
            r = np.maximum(b.p[:, tau, None] * P[c] - Q[c], 0.0)
            tot = r.sum(axis=1, keepdims=True)
            y = np.where(tot > 0, r / np.where(tot > 0, tot, 1.0), P[c])
        vals = (b.weight * b.tau[:, tau])[:, None] * y  # (paths, S): kept X^tau, then Y
        g = np.zeros((size,) * (tau + 1))
        if tau == 0:
            g += vals.sum(axis=0)
        else:
            np.add.at(g, tuple(b.drafts[:, j] for j in range(tau)), vals)
        for _ in range(gamma - tau):
            g = g[..., None] * P
        out += g
    return out


@pytest.mark.parametrize("name", list(TABLES))
@pytest.mark.parametrize("gamma", [1, 2, 3, 4, 5])
def test_lossless_random_tables(name: str, gamma: int) -> None:
    P, Q = TABLES[name]
    lw = law(P, Q, gamma, {})
    for s in range(P.shape[0]):
        assert exact.tv(first_two_law(lw, s), exact.target_joint(P, s, 2)) <= 1e-12
        assert exact.tv(_round_then_target(P, Q, s, gamma),
                        exact.target_joint(P, s, gamma + 1)) <= 1e-12


@pytest.mark.parametrize("gamma", [1, 2, 3])
def test_lossless_iid_frozen_stub(gamma: int) -> None:
    P, Q, start, _ = _stub()
    lw = law(P, Q, gamma, {})
    for s in range(P.shape[0]):
        assert exact.tv(first_two_law(lw, s), exact.target_joint(P, s, 2)) <= 1e-12
    if gamma <= 2:
        assert exact.tv(_round_then_target(P, Q, start, gamma),
                        exact.target_joint(P, start, gamma + 1)) <= 1e-12


@st.composite
def _sparse_pair(draw: st.DrawFn) -> tuple[FloatArray, FloatArray]:
    size = draw(st.integers(2, 4))
    cells = st.lists(st.sampled_from([0.0, 0.0, 0.1, 0.5, 1.0, 3.0]), min_size=size,
                     max_size=size).filter(lambda r: sum(r) > 0)
    P, Q = (np.array(draw(st.lists(cells, min_size=size, max_size=size))) for _ in range(2))
    return P / P.sum(axis=1, keepdims=True), Q / Q.sum(axis=1, keepdims=True)


@settings(max_examples=40, deadline=None)
@given(pair=_sparse_pair(), gamma=st.integers(1, 4))
@example(pair=(np.array([[0.0, 0.0, 0.0, 1.0]] * 4),  # found by hypothesis: P(τ >= 2 | X^2)
               np.array([[0.0, 0.0, 0.0, 1.0]] * 3    # rounded to -1.6e-16 before it was
                        + [[0.0, 1 / 41, 30 / 41, 10 / 41]])),  # clipped to [0, 1]
         gamma=3)
def test_property_sparse_pairs(pair: tuple[FloatArray, FloatArray], gamma: int) -> None:
    """Any (sparse) pair: laws are distributions, lossless, never fewer tokens than token-wise."""
    P, Q = pair
    lw = law(P, Q, gamma, {})
    np.testing.assert_allclose(lw.tokens.sum(axis=1), 1.0, atol=1e-12)
    assert lw.tokens[:, 0].max() == 0.0
    np.testing.assert_allclose(lw.next_state.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(lw.single.sum(axis=1) + lw.pair.sum(axis=(1, 2)), 1.0, atol=1e-12)
    assert lw.next_state.min() >= 0 and lw.pair.min() >= 0 and lw.single.min() >= 0
    for s in range(P.shape[0]):
        assert exact.tv(first_two_law(lw, s), exact.target_joint(P, s, 2)) <= 1e-12
        assert exact.tv(_round_then_target(P, Q, s, gamma),
                        exact.target_joint(P, s, gamma + 1)) <= 1e-12
    tw = exact.round_law(P, Q, gamma, "correct").mean_tokens
    assert np.all(lw.mean_tokens >= tw - 1e-12)


# ---------------------------------------------------------------------------------------------
# 3. against token-wise verification
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(TABLES))
def test_gamma_one_is_tokenwise(name: str) -> None:
    P, Q = TABLES[name]
    lw, tw = law(P, Q, 1, {}), exact.round_law(P, Q, 1, "correct")
    np.testing.assert_allclose(lw.tokens, tw.tokens, rtol=0, atol=1e-15)
    np.testing.assert_allclose(lw.next_state, tw.next_state, rtol=0, atol=1e-15)
    for s in range(P.shape[0]):  # per draft: kept with probability min(1, P/Q), as [L] Alg. 1
        b = path_law(P, Q, 1, s)
        x = b.drafts[:, 0]
        np.testing.assert_allclose(b.tau[:, 1], np.minimum(1.0, P[s, x] / Q[s, x]), atol=1e-15)


@pytest.mark.parametrize("name", list(TABLES))
def test_more_tokens_than_tokenwise(name: str) -> None:
    """[B]'s claim: E[tokens per round] >= token-wise's from every context, > somewhere
    (in expectation only: for single draft paths block can keep fewer, see path_law test)."""
    P, Q = TABLES[name]
    for gamma in range(1, 7):
        lw, tw = law(P, Q, gamma, {}), exact.round_law(P, Q, gamma, "correct")
        assert np.all(lw.mean_tokens >= tw.mean_tokens - 1e-12)
        if gamma >= 2:
            assert np.max(lw.mean_tokens - tw.mean_tokens) > 1e-3


def test_more_tokens_than_tokenwise_stub() -> None:
    P, Q, _, _ = _stub()
    for gamma in (1, 2, 3):
        diff = law(P, Q, gamma, {}).mean_tokens - exact.round_law(P, Q, gamma).mean_tokens
        assert diff.min() >= -1e-12 and (gamma == 1 or diff.max() > 1e-3)


def test_path_law_averages_to_law() -> None:
    P, Q = TABLES["blend55"]
    gamma = 4
    lw = law(P, Q, gamma, {})
    some_path_worse = False
    for s in range(P.shape[0]):
        b = path_law(P, Q, gamma, s)
        assert b.weight.sum() == pytest.approx(1.0, abs=1e-12)
        np.testing.assert_allclose(b.tau.sum(axis=1), 1.0, atol=1e-12)
        np.testing.assert_allclose(b.weight @ b.tau, lw.tokens[s, 1:], atol=1e-12)
        ctx = np.concatenate([np.full((b.weight.size, 1), s), b.drafts], axis=1)
        kept = np.cumprod(np.minimum(1.0, P[ctx[:, :-1], ctx[:, 1:]] / Q[ctx[:, :-1], ctx[:, 1:]]),
                          axis=1).sum(axis=1)  # token-wise E[accepted | drafts]
        some_path_worse |= bool(np.any(b.tau @ np.arange(gamma + 1) < kept - 1e-9))
    assert some_path_worse  # block dominates in expectation, not path by path


# ---------------------------------------------------------------------------------------------
# 4. Monte Carlo: play vs law
# ---------------------------------------------------------------------------------------------
def _g_test(counts: NDArray[np.int64], probs: FloatArray) -> float:
    """G-test p-value; cells expected < 5 pooled; a count where the law has no mass fails."""
    counts, probs = counts.ravel(), probs.ravel()
    assert counts[probs <= 1e-15].sum() == 0
    n = counts.sum()
    big = probs * n >= 5
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(probs[big], probs[~big].sum()) * n
    keep = exp > 0
    if keep.sum() < 2:
        return 1.0
    exp = exp[keep] * obs[keep].sum() / exp[keep].sum()
    return float(stats.power_divergence(obs[keep], exp, lambda_="log-likelihood").pvalue)


def _check_sample(P: FloatArray, Q: FloatArray, gamma: int, lw: RoundLaw,
                  starts: NDArray[np.intp], seed: int) -> None:
    size = P.shape[0]
    state = np.repeat(starts, 200_000 // starts.size)
    res = play(P, Q, state, gamma, {}, np.random.default_rng(seed))
    n_emit = res.n_emitted
    assert res.tokens.shape == (state.size, gamma + 1)
    assert n_emit.min() >= 1 and n_emit.max() <= gamma + 1
    j = np.arange(gamma + 1)
    assert np.all((res.tokens >= 0) == (j < n_emit[:, None]))
    assert np.all(res.next_state == res.tokens[np.arange(state.size), n_emit - 1])
    np.testing.assert_array_equal(res.drafted, gamma)
    prev = np.concatenate([state[:, None], res.tokens[:, :-1]], axis=1)
    drafted = j < n_emit[:, None] - 1
    assert np.all(Q[prev[drafted], res.tokens[drafted]] > 0)
    tests = []
    for s in starts:
        on = state == s
        tests.append(_g_test(np.bincount(n_emit[on], minlength=gamma + 2), lw.tokens[s]))
        tests.append(_g_test(np.bincount(res.next_state[on], minlength=size), lw.next_state[s]))
        two = np.where(n_emit[on] >= 2, res.tokens[on, 0] * size + res.tokens[on, 1],
                       size * size + res.tokens[on, 0])  # first two tokens, or the only one
        law_two = np.concatenate([lw.pair[s].ravel(), lw.single[s]])
        tests.append(_g_test(np.bincount(two, minlength=size * size + size), law_two))
    assert min(tests) > LEVEL / len(tests), tests


def test_play_matches_law_random_table() -> None:
    P, Q = TABLES["blend55"]
    _check_sample(P, Q, 4, law(P, Q, 4, {}), np.arange(P.shape[0]), seed=11)


def test_play_matches_law_sparse_tiny() -> None:
    P, Q = _floats(TINY_P), _floats(TINY_Q)
    _check_sample(P, Q, 3, law(P, Q, 3, {}), np.arange(3), seed=12)


def test_play_matches_law_stub() -> None:
    P, Q, start, vocab = _stub()
    _check_sample(P, Q, 3, law(P, Q, 3, {}), np.array([start, vocab + 5]), seed=13)


def test_play_same_seed_same_round() -> None:
    P, Q = TABLES["far"]
    state = np.arange(600) % 6
    a, b = (play(P, Q, state, 3, {}, np.random.default_rng(5)) for _ in range(2))
    # identity is the claim: same seed, same operations in the same order
    np.testing.assert_array_equal(a.tokens, b.tokens)
    np.testing.assert_array_equal(a.next_state, b.next_state)


@pytest.mark.parametrize("name", ["blend55", "independent"])
def test_long_run_vs_monte_carlo(name: str) -> None:
    """Tokens per target call: renewal-reward on the exact law vs stationary chains of play."""
    P, Q = TABLES[name]
    gamma, chains, rounds = 4, 4000, 60
    lw = law(P, Q, gamma, {})
    rates = stationary_rates(lw)
    exact_rate, drafted, pi = rates.tokens_per_round, rates.drafted_per_round, rates.weights
    # pi @ (γ, ..., γ) = γ Σ pi: Σ pi = 1 up to the rounding of S sums, so rel error <= ~2S eps
    assert drafted == pytest.approx(gamma, rel=1e-12)
    rng = np.random.default_rng(21)
    state = np.searchsorted(np.cumsum(pi), rng.random(chains) * pi.sum(), side="right")
    total = np.zeros(chains)
    for _ in range(rounds):
        res = play(P, Q, state, gamma, {}, rng)
        total += res.n_emitted
        state = res.next_state
    per_chain = total / rounds
    se = per_chain.std(ddof=1) / np.sqrt(chains)
    z = stats.norm.isf(LEVEL / 2)
    assert abs(per_chain.mean() - exact_rate) <= z * se, (per_chain.mean(), exact_rate, se)
    assert exact_rate > exact.long_run(P, Q, gamma).tokens_per_round


# ---------------------------------------------------------------------------------------------
# 5. bad input
# ---------------------------------------------------------------------------------------------
def _one_line_error(fn, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=match) as info:
        fn()
    assert "\n" not in str(info.value)


def test_bad_input() -> None:
    P, Q = TABLES["blend55"]
    rng = np.random.default_rng(0)
    _one_line_error(lambda: law(P[:, :5], Q[:, :5], 2, {}), "square")
    _one_line_error(lambda: law(P, random_table(4, 1.0, vocab=5), 2, {}), "shapes differ")
    _one_line_error(lambda: play(P[:5], Q[:5], np.zeros(3, int), 2, {}, rng), "square")
    for gamma in (0, -1, 1.5):
        _one_line_error(lambda g=gamma: law(P, Q, g, {}), "gamma")
        _one_line_error(lambda g=gamma: play(P, Q, np.zeros(3, int), g, {}, rng), "gamma")
    _one_line_error(lambda: law(P, Q, 2, {"tau": 1}), "no knobs")
    _one_line_error(lambda: play(P, Q, np.zeros(3, int), 2, {"tau": 1}, rng), "no knobs")
    _one_line_error(lambda: law(P, Q, 5, {}, max_paths=1000), "46656 draft paths")
    _one_line_error(lambda: path_law(P, Q, 5, 0, max_paths=1000), "7776 draft paths")
    _one_line_error(lambda: play(P, Q, np.array([0, 6]), 2, {}, rng), "state")
    _one_line_error(lambda: path_law(P, Q, 2, 6), "start")


def test_default_budget_refuses_a_huge_tree() -> None:
    P, Q, _, _ = _stub()
    _one_line_error(lambda: law(P, Q, 6, {}), "max_paths=4194304")
