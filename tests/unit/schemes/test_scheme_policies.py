"""Token-wise rules under draft-length policies: :mod:`specsim.schemes.tokenwise`,
``confidence`` (transformers' assistant_confidence_threshold) and ``heuristic`` (transformers'
num_assistant_tokens_schedule="heuristic").

Exact laws are checked against an independent enumeration in rational arithmetic, against
:func:`specsim.exact.round_law`, against the target's own law (lossless) and against Monte Carlo
of the vectorised rounds (G-tests and CIs, false-alarm probability 1e-6 per test for any
stream: tests/mc.py).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import mc
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from specsim.exact import RoundLaw, first_two_law, round_law, stationary_rates, target_joint, tv
from specsim.models.maths import blend, random_table
from specsim.schemes import confidence, heuristic, tokenwise
from specsim.schemes.law import RoundSample

LEVEL = mc.FAIL_PROB  # false-alarm probability of each test, whatever its stream (tests/mc.py)

# A tiny pair in exact rationals (S = 3); Q has no entry equal to 1.
F = Fraction
P3 = [[F(1, 2), F(1, 3), F(1, 6)], [F(1, 5), F(3, 5), F(1, 5)], [F(1, 4), F(1, 4), F(1, 2)]]
Q3 = [[F(1, 3), F(1, 2), F(1, 6)], [F(1, 2), F(1, 4), F(1, 4)], [F(1, 8), F(5, 8), F(1, 4)]]


def _float(t: list[list[Fraction]]) -> np.ndarray:
    return np.array([[float(v) for v in row] for row in t])


def _correct_fractions(P: list[list[Fraction]], Q: list[list[Fraction]]
                       ) -> tuple[list[list[Fraction]], list[list[Fraction]]]:
    """min(1, p/q) and norm(max(p - q, 0)) (p where that has no mass), in exact arithmetic."""
    accept = [[min(F(1), p / q) if q else F(int(p > 0)) for p, q in zip(pr, qr, strict=True)]
              for pr, qr in zip(P, Q, strict=True)]
    reject = []
    for pr, qr in zip(P, Q, strict=True):
        r = [max(p - q, F(0)) for p, q in zip(pr, qr, strict=True)]
        reject.append([v / sum(r) for v in r] if sum(r) else list(pr))
    return accept, reject


def reference_round(P: list[list[Fraction]], Q: list[list[Fraction]], accept, reject,
                    stop, s: int, gamma: int) -> dict[str, object]:
    """One round from context s, enumerated as it runs: draft x_1.. (stopping after x in
    context c with probability stop[c][x], or after γ), then test the drafts in order."""
    size = len(P)
    out: dict[str, object] = {"tokens": [F(0)] * (gamma + 2), "next": [F(0)] * size,
                              "drafted": F(0), "single": [F(0)] * size,
                              "pair": [[F(0)] * size for _ in range(size)]}

    def record(emitted: tuple[int, ...], mass: Fraction, n_drafted: int) -> None:
        out["tokens"][len(emitted)] += mass
        out["next"][emitted[-1]] += mass
        out["drafted"] += mass * n_drafted
        if len(emitted) == 1:
            out["single"][emitted[0]] += mass
        else:
            out["pair"][emitted[0]][emitted[1]] += mass

    def verify(drafts: tuple[int, ...], mass: Fraction) -> None:
        ctx = (s, *drafts)
        alive = mass
        for k, x in enumerate(drafts):  # first k accepted, draft k+1 rejected
            c = ctx[k]
            for y in range(size):
                if alive * (1 - accept[c][x]) * reject[c][y]:
                    record((*drafts[:k], y), alive * (1 - accept[c][x]) * reject[c][y],
                           len(drafts))
            alive *= accept[c][x]
        for y in range(size):  # every draft accepted: the bonus token
            if alive * P[drafts[-1]][y]:
                record((*drafts, y), alive * P[drafts[-1]][y], len(drafts))

    def draft(drafts: tuple[int, ...], mass: Fraction) -> None:
        c = drafts[-1] if drafts else s
        for x in range(size):
            m = mass * Q[c][x]
            if not m:
                continue
            halt = F(1) if len(drafts) + 1 == gamma else stop[c][x]
            if halt:
                verify((*drafts, x), m * halt)
            if 1 - halt:
                draft((*drafts, x), m * (1 - halt))

    draft((), F(1))
    return out


def assert_matches_reference(law: RoundLaw, ref: Callable[[int], dict[str, object]]) -> None:
    for s in range(law.tokens.shape[0]):
        r = ref(s)
        np.testing.assert_allclose(law.tokens[s], [float(v) for v in r["tokens"]], atol=1e-14)
        np.testing.assert_allclose(law.next_state[s], [float(v) for v in r["next"]], atol=1e-14)
        assert law.drafted[s] == pytest.approx(float(r["drafted"]), abs=1e-13)
        np.testing.assert_allclose(law.single[s], [float(v) for v in r["single"]], atol=1e-14)
        np.testing.assert_allclose(law.pair[s], [[float(v) for v in row] for row in r["pair"]],
                                   atol=1e-14)


@pytest.mark.parametrize("gamma", [1, 2, 4])
@pytest.mark.parametrize("threshold", [F(0), F(1, 5), F(3, 10), F(11, 20), F(1)])
def test_confidence_equals_rational_enumeration(threshold: Fraction, gamma: int) -> None:
    accept, reject = _correct_fractions(P3, Q3)
    stop = [[F(int(q < threshold)) for q in row] for row in Q3]
    law = confidence.law(_float(P3), _float(Q3), _float(accept), _float(reject), gamma,
                         {"threshold": float(threshold)})
    assert_matches_reference(
        law, lambda s: reference_round(P3, Q3, accept, reject, stop, s, gamma))


def test_tokenwise_with_stop_probabilities_and_lenient_tables() -> None:
    """Any tables: an accept table that is not min(1, p/q), a reject table that is not the
    residual, and a stop table of probabilities."""
    accept = [[F(1, 2), F(1), F(1, 3)], [F(0), F(2, 3), F(1)], [F(1, 4), F(1, 2), F(3, 4)]]
    reject = [[F(0), F(1, 2), F(1, 2)], [F(1, 3), F(1, 3), F(1, 3)], [F(1), F(0), F(0)]]
    stop = [[F(1, 3), F(0), F(1)], [F(1, 2), F(1, 4), F(0)], [F(0), F(2, 5), F(1, 7)]]
    law = tokenwise.law(_float(P3), _float(Q3), _float(accept), _float(reject), 4, _float(stop))
    assert_matches_reference(law, lambda s: reference_round(P3, Q3, accept, reject, stop, s, 4))


# ---------------------------------------------------------------------------------------------
# Fixed γ, thresholds, losslessness
# ---------------------------------------------------------------------------------------------
def seed_med() -> tuple[np.ndarray, np.ndarray]:
    P = random_table(1, 2.5)
    return P, blend(P, random_table(2, 2.5), 0.55)


def sparse_pair() -> tuple[np.ndarray, np.ndarray]:
    """Zeros in both tables, a row where P = Q (no residual mass), a one-hot draft row."""
    P = np.array([[0.5, 0.5, 0.0, 0.0], [0.1, 0.2, 0.3, 0.4], [0.0, 0.0, 1.0, 0.0],
                  [0.25, 0.25, 0.25, 0.25]])
    Q = np.array([[0.0, 1.0, 0.0, 0.0], [0.1, 0.2, 0.3, 0.4], [0.2, 0.0, 0.5, 0.3],
                  [0.7, 0.0, 0.0, 0.3]])
    return P, Q


@pytest.mark.parametrize("pair", [seed_med, sparse_pair])
@pytest.mark.parametrize("gamma", range(1, 7))
def test_tokenwise_correct_equals_exact_round_law(pair, gamma: int) -> None:
    P, Q = pair()
    law = tokenwise.law(P, Q, *tokenwise.correct_tables(P, Q), gamma)
    ref = round_law(P, Q, gamma, "correct")
    np.testing.assert_allclose(law.tokens, ref.tokens, rtol=0, atol=1e-15)
    np.testing.assert_allclose(law.next_state, ref.next_state, rtol=0, atol=1e-15)
    # drafted = Σ_{i<γ} row sums of Q^i (BLAS products): each is 1 up to ~i S eps, so <= 1e-12
    np.testing.assert_allclose(law.drafted, float(gamma), rtol=1e-12, atol=0)


def test_threshold_zero_is_fixed_gamma_and_one_drafts_one() -> None:
    P, Q = seed_med()
    tables = tokenwise.correct_tables(P, Q)
    fixed = tokenwise.law(P, Q, *tables, 7)
    zero = confidence.law(P, Q, *tables, 7, {"threshold": 0.0})
    # identity is the claim: threshold 0 gives a stop table of exact zeros, so both sides run
    # tokenwise.law on bit-identical inputs, the same operations in the same order
    for name in ("tokens", "next_state", "drafted", "single", "pair", "context"):
        assert np.array_equal(getattr(zero, name), getattr(fixed, name)), name
    one = confidence.law(P, Q, *tables, 7, {"threshold": 1.0})
    # exact: threshold 1 stops after every draft (no q = 1 here), so Q(1 - stop) is exactly 0
    # and drafted is the row sum of the identity plus exact zeros
    assert np.array_equal(one.drafted, np.ones(6))
    assert one.tokens[:, 3:].sum() == 0  # one draft: 1 or 2 tokens
    Ps, Qs = sparse_pair()  # Q[0] is one-hot on 1: q(x) = 1 does not stop, Q[1] then does
    sparse = confidence.law(Ps, Qs, *tokenwise.correct_tables(Ps, Qs), 5, {"threshold": 1.0})
    np.testing.assert_allclose(sparse.drafted, [2.0, 1.0, 1.0, 1.0])


def first_two_tv(law: RoundLaw, P: np.ndarray, start: Callable[[int], int]) -> float:
    return max(tv(first_two_law(law, start(c)), target_joint(P, c, 2))
               for c in range(P.shape[0]))


def scheme_laws(P: np.ndarray, Q: np.ndarray, accept: np.ndarray, reject: np.ndarray
                ) -> list[tuple[str, RoundLaw, Callable[[int], int]]]:
    size = P.shape[0]
    out = [(f"fixed {g}", tokenwise.law(P, Q, accept, reject, g), int) for g in (1, 3, 6)]
    out += [(f"confidence {t}", confidence.law(P, Q, accept, reject, 5, {"threshold": t}), int)
            for t in (0.1, 0.3, 0.6, 1.0)]
    for g, cap in ((1, 3), (3, 8), (5, 64)):
        out.append((f"heuristic {g}/{cap}", heuristic.law(P, Q, accept, reject, g, {"cap": cap}),
                    lambda c, g=g: heuristic.start_state(c, g, size)))
    return out


@pytest.mark.parametrize("pair", [seed_med, sparse_pair])
def test_lossless_with_correct_tables_and_lossy_without(pair) -> None:
    P, Q = pair()
    accept, reject = tokenwise.correct_tables(P, Q)
    for name, law, start in scheme_laws(P, Q, accept, reject):
        assert first_two_tv(law, P, start) <= 1e-12, name
    if pair is seed_med:  # reject = P instead of the residual: every scheme is visibly lossy
        for name, law, start in scheme_laws(P, Q, accept, P):
            assert first_two_tv(law, P, start) > 1e-3, name


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(2, 5), gamma=st.integers(1, 6),
       threshold=st.floats(0.0, 1.0))
def test_laws_are_laws_and_lossless(seed: int, size: int, gamma: int, threshold: float) -> None:
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.full(size, 0.5), size)
    Q = rng.dirichlet(np.full(size, 0.5), size)
    tables = tokenwise.correct_tables(P, Q)
    cap = gamma + 3
    laws = [(confidence.law(P, Q, *tables, gamma, {"threshold": threshold}), int, gamma),
            (heuristic.law(P, Q, *tables, gamma, {"cap": cap}),
             lambda c: heuristic.start_state(c, gamma, size), cap)]
    for law, start, longest in laws:
        np.testing.assert_allclose(law.tokens.sum(axis=1), 1.0, atol=1e-12)
        np.testing.assert_allclose(law.next_state.sum(axis=1), 1.0, atol=1e-12)
        np.testing.assert_allclose(law.single.sum(axis=1) + law.pair.sum(axis=(1, 2)), 1.0,
                                   atol=1e-12)
        assert law.tokens[:, 0].max() == 0 and law.tokens.shape[1] == longest + 2
        assert ((law.drafted >= 1 - 1e-12) & (law.drafted <= longest + 1e-12)).all()
        assert first_two_tv(law, P, start) <= 1e-12


# ---------------------------------------------------------------------------------------------
# Monte Carlo of the vectorised rounds against the exact laws
# ---------------------------------------------------------------------------------------------
def g_test(counts: np.ndarray, probs: np.ndarray) -> float:
    """p-value of a G-test of counts against probs, cells with expected count < 5 merged;
    a count in a cell of probability 0 fails outright."""
    counts, probs = np.asarray(counts, float).ravel(), np.asarray(probs, float).ravel()
    assert counts[probs < 1e-13].sum() == 0
    expected = probs * counts.sum()
    big = expected >= 5
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    obs, exp = obs[exp > 0], exp[exp > 0]
    if obs.size < 2:
        return 1.0
    return float(stats.power_divergence(obs, exp * obs.sum() / exp.sum(),
                                        lambda_="log-likelihood").pvalue)


def check_sample(sample: RoundSample, law: RoundLaw, s: int, tests: int) -> None:
    """The n rounds from state s against law's row s: tokens, next state, first two tokens
    (G-tests) and the mean drafts, Bonferroni over the caller's ``tests`` assertions (four
    here per call), and the sample's own shape."""
    size = law.pair.shape[1]
    n, width = sample.tokens.shape
    j = np.arange(width)
    assert (sample.tokens[j < sample.n_emitted[:, None]] >= 0).all()
    assert (sample.tokens[j >= sample.n_emitted[:, None]] == -1).all()
    last = sample.tokens[np.arange(n), sample.n_emitted - 1]
    assert np.array_equal(law.context[sample.next_state], last)
    two = sample.n_emitted >= 2
    cells = np.where(two, sample.tokens[:, 0] * size + np.where(two, sample.tokens[:, 1], 0),
                     size * size + sample.next_state)
    n_states = law.next_state.shape[0]
    first_two = np.concatenate([law.pair[s].ravel(), law.single[s]])
    for counts, probs in (
        (np.bincount(sample.n_emitted, minlength=law.tokens.shape[1]), law.tokens[s]),
        (np.bincount(sample.next_state, minlength=n_states), law.next_state[s]),
        (np.bincount(cells, minlength=size * size + n_states), first_two),
    ):
        assert g_test(counts, probs) > LEVEL / tests
    se = sample.drafted.std() / np.sqrt(n)
    mc.assert_close(sample.drafted.mean(), se, law.drafted[s], assertions=tests, slack=1e-12)


def test_confidence_and_tokenwise_play_match_their_laws() -> None:
    P, Q = seed_med()
    tables = tokenwise.correct_tables(P, Q)
    rng = np.random.default_rng(20240611)
    stop = np.random.default_rng(7).uniform(0, 0.5, P.shape)
    knobs = {"threshold": 0.3}
    law_c = confidence.law(P, Q, *tables, 6, knobs)
    law_t = tokenwise.law(P, Q, *tables, 4, stop)
    for s in (0, 2, 5):
        state = np.full(20_000, s)
        check_sample(confidence.play(P, Q, *tables, state, 6, knobs, rng), law_c, s, 24)
        check_sample(tokenwise.play(P, Q, *tables, state, 4, rng, stop), law_t, s, 24)


def _cdf_round(P, Q, accept, reject, ctx, gammas, stop, u, u_final, width):
    """One token-wise round drawn row by row from normalised CDFs, #{k: cdf_k <= u} (the
    definition :mod:`specsim.sampling` states), as plainly as it reads: a reference for
    :func:`tokenwise.play_rows`, whose samplers must draw exactly these tokens."""
    def draw(table, rows, v):
        cdf = np.cumsum(table, axis=1)
        cdf = cdf / cdf[:, -1:]
        return np.minimum((cdf[rows] <= v[:, None]).sum(axis=1), table.shape[1] - 1)
    n = ctx.size
    tokens = np.full((n, width + 1), -1)
    n_emitted, final, drafted = (np.zeros(n, dtype=int) for _ in range(3))
    for k in range(n):
        c, emitted, stopped = ctx[k], [], False
        drafts = []
        for i in range(gammas[k]):
            x = int(draw(Q, np.array([c]), u[0, i, k : k + 1])[0])
            drafts.append((c, x, u[2, i, k] < accept[c, x]))
            c = x
            if u[1, i, k] < stop[drafts[-1][0], x]:
                break
        for c, x, ok in drafts:
            if not ok:
                last, rows = c, reject
                stopped = True
                break
            emitted.append(x)
        if not stopped:
            last, rows = (drafts[-1][1] if drafts else ctx[k]), P
        y = int(draw(rows, np.array([last]), u_final[k : k + 1])[0])
        tokens[k, : len(emitted) + 1] = [*emitted, y]
        n_emitted[k], final[k], drafted[k] = len(emitted) + 1, y, len(drafts)
    return tokens, n_emitted, final, drafted


def test_tokenwise_rounds_draw_the_tokens_of_the_rows_cdfs() -> None:
    rng = np.random.default_rng(5)
    size, n, width = 7, 3000, 6
    P = blend(random_table(1, 2.5, size), np.eye(size)[rng.integers(0, size, size)], 0.8)
    Q = random_table(2, 2.5, size)
    Q[Q < 0.05] = 0.0  # zero-width cells, never drawn
    Q[1] = np.eye(size)[3]  # a one-hot row
    Q /= Q.sum(axis=1, keepdims=True)
    accept, reject = tokenwise.correct_tables(P, Q)
    stop = np.where(rng.random((size, size)) < 0.5, rng.uniform(0, 0.6, (size, size)), 0.0)
    ctx, gammas = rng.integers(0, size, n), rng.integers(0, width + 1, n)
    seed = 11
    got = tokenwise.play_rows(P, Q, accept, reject, ctx, gammas, stop,
                              np.random.default_rng(seed), width)
    again = np.random.default_rng(seed)
    reach = int(gammas.max())
    u = again.random((3, reach, n))
    want = _cdf_round(P, Q, accept, reject, ctx, gammas, stop, u, again.random(n), width)
    for name, a, b in zip(("tokens", "n_emitted", "next_state", "drafted"),
                          (got.tokens, got.n_emitted, got.next_state, got.drafted), want,
                          strict=True):
        assert np.array_equal(a, b), name


def test_heuristic_play_matches_its_law_per_state() -> None:
    P, Q = seed_med()
    tables = tokenwise.correct_tables(P, Q)
    law = heuristic.law(P, Q, *tables, 5, {})
    rng = np.random.default_rng(99)
    for c, g in ((0, 1), (3, 5), (5, 12)):
        s = heuristic.start_state(c, g, 6)
        sample = heuristic.play(P, Q, *tables, np.full(20_000, s), 5, {}, rng)
        assert (sample.drafted == g).all()
        check_sample(sample, law, s, 12)


def test_heuristic_long_run_matches_monte_carlo() -> None:
    """Chains started from the exact stationary law stay in it, so every round's mean is the
    exact long-run mean; per-chain averages are independent, hence the CI."""
    P, Q = seed_med()
    tables = tokenwise.correct_tables(P, Q)
    law = heuristic.law(P, Q, *tables, 5, {})
    rates = stationary_rates(law)
    tokens, drafted, pi = rates.tokens_per_round, rates.drafted_per_round, rates.weights
    rng = np.random.default_rng(5)
    chains, rounds = 4000, 40
    state = rng.choice(pi.size, size=chains, p=pi)
    emitted, proposed = np.zeros(chains), np.zeros(chains)
    for _ in range(rounds):
        sample = heuristic.play(P, Q, *tables, state, 5, {}, rng)
        emitted += sample.n_emitted
        proposed += sample.drafted
        state = sample.next_state
    for exact, per_chain in ((tokens, emitted / rounds), (drafted, proposed / rounds)):
        se = per_chain.std() / np.sqrt(chains)
        mc.assert_close(per_chain.mean(), se, exact, assertions=2)  # ~5.2 SE; 7.5 SE fails


# ---------------------------------------------------------------------------------------------
# The heuristic schedule and the confidence threshold's effect
# ---------------------------------------------------------------------------------------------
def test_heuristic_schedule_by_hand() -> None:
    assert heuristic.next_length([1, 2, 5, 63, 64, 1, 2, 5],
                                 [True, True, True, True, True, False, False, False],
                                 64).tolist() == [3, 4, 7, 64, 64, 1, 1, 4]
    P, Q = seed_med()
    size, cap = 6, 9
    rng = np.random.default_rng(3)
    for accept, grow in ((np.ones_like(P), True), (np.zeros_like(P), False)):
        law = heuristic.law(P, Q, accept, P, 3, {"cap": cap})
        for g in range(1, cap + 1):
            rows = slice((g - 1) * size, g * size)
            g_next = min(g + 2, cap) if grow else max(1, g - 1)
            cols = slice((g_next - 1) * size, g_next * size)
            np.testing.assert_allclose(law.next_state[rows, cols].sum(axis=1), 1.0)
            assert law.tokens[rows, g + 1 if grow else 1].min() == pytest.approx(1.0)
            sample = heuristic.play(P, Q, accept, P, heuristic.start_state(np.arange(size), g,
                                                                           size), 3,
                                    {"cap": cap}, rng)
            assert (heuristic.decode(sample.next_state, size)[1] == g_next).all()
            assert (sample.n_emitted == (g + 1 if grow else 1)).all()


def test_heuristic_chain_stays_within_one_to_cap() -> None:
    P = random_table(1, 2.5)
    Q = blend(P, random_table(2, 2.5), 0.9)  # accepts often enough to hit the cap
    tables = tokenwise.correct_tables(P, Q)
    cap, size = 4, 6
    law = heuristic.law(P, Q, *tables, 2, {"cap": cap})
    assert law.next_state.shape == (size * cap, size * cap)
    np.testing.assert_allclose(law.next_state.sum(axis=1), 1.0, atol=1e-12)
    rng = np.random.default_rng(11)
    state = np.full(1000, heuristic.start_state(0, 2, size))
    seen = set()
    for _ in range(100):
        state = heuristic.play(P, Q, *tables, state, 2, {"cap": cap}, rng).next_state
        g = heuristic.decode(state, size)[1]
        assert ((g >= 1) & (g <= cap)).all()
        seen.update(g.tolist())
    assert seen == {1, 2, 3, 4}


def test_drafted_decreases_with_threshold() -> None:
    P, Q = seed_med()
    tables = tokenwise.correct_tables(P, Q)
    thresholds = np.linspace(0, 1, 21)
    per_state = np.array([confidence.law(P, Q, *tables, 8, {"threshold": t}).drafted
                          for t in thresholds])
    assert (np.diff(per_state, axis=0) <= 1e-12).all()
    # threshold 0: Σ_{i<8} row sums of Q^i (BLAS products), each 1 up to ~8 S eps
    np.testing.assert_allclose(per_state[0], 8.0, rtol=1e-12, atol=0)
    assert np.array_equal(per_state[-1], np.ones(6))  # exact, as in the threshold-1 test above
    runs = [stationary_rates(confidence.law(P, Q, *tables, 8, {"threshold": t})).drafted_per_round
            for t in (0.0, 0.2, 0.4, 1.0)]
    assert runs[0] > runs[1] > runs[2] > runs[3]


# ---------------------------------------------------------------------------------------------
# Refusals
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("knobs", "match"), [
    ({}, "needs the knob 'threshold'"),
    (None, "needs the knob 'threshold'"),
    ({"threshold": 0.2, "gamma": 3}, "no knob 'gamma'.*gamma=3"),
    ({"threshold": 1.5}, "'threshold'.*threshold=1.5"),
    ({"threshold": -0.1}, "threshold=-0.1"),
    ({"threshold": float("nan")}, "threshold=nan"),
    ({"threshold": True}, "threshold=True"),
    ({"threshold": "0.3"}, "threshold='0.3'"),
])
def test_confidence_refuses_bad_knobs(knobs, match: str) -> None:
    P, Q = seed_med()
    with pytest.raises(ValueError, match=match):
        confidence.law(P, Q, *tokenwise.correct_tables(P, Q), 4, knobs)


@pytest.mark.parametrize(("knobs", "match"), [
    ({"cap": 3}, "'cap'.*cap=3"),
    ({"cap": 6.5}, "cap=6.5"),
    ({"cap": True}, "cap=True"),
    ({"cap": 8, "threshold": 0.1}, "no knob 'threshold'.*threshold=0.1"),
])
def test_heuristic_refuses_bad_knobs(knobs, match: str) -> None:
    P, Q = seed_med()
    with pytest.raises(ValueError, match=match):
        heuristic.law(P, Q, *tokenwise.correct_tables(P, Q), 4, knobs)


def test_tables_and_states_are_checked() -> None:
    P, Q = seed_med()
    accept, reject = tokenwise.correct_tables(P, Q)
    with pytest.raises(ValueError, match="accept"):
        tokenwise.law(P, Q, accept * 2, reject, 3)
    with pytest.raises(ValueError, match="reject"):
        tokenwise.law(P, Q, accept, reject * 0.5, 3)
    with pytest.raises(ValueError, match="stop"):
        tokenwise.law(P, Q, accept, reject, 3, -np.ones_like(P))
    with pytest.raises(ValueError, match="gamma"):
        tokenwise.law(P, Q, accept, reject, 0)
    with pytest.raises(ValueError, match=r"0\.\.5"):
        tokenwise.play(P, Q, accept, reject, np.array([6]), 3, np.random.default_rng(0))


@pytest.mark.parametrize(("rule", "policy", "knobs"), [
    ("correct", "fixed", {}), ("correct", "confidence", {"threshold": 0.3}),
    ("lenient", "confidence", {"lenience": 0.5, "threshold": 0.3}),
    ("typical", "fixed", {})])
def test_the_first_two_tokens_need_two_drafts(rule: str, policy: str, knobs: dict) -> None:
    """Scheme.first_two_gamma: the law of a generation's first two tokens at γ = 6 equals the
    one at the γ it names (2) for token-wise rules under fixed and confidence (the lossless
    check of a trace's point plays that γ); a first draft accepted then a bonus token (γ = 1)
    is another law, so it stays 1."""
    from specsim.schemes import POLICIES, Scheme
    from specsim.verify import rule_spec

    names = {k.name for k in rule_spec(rule).knobs}
    scheme = Scheme.build(rule, {k: v for k, v in knobs.items() if k in names}, policy,
                          {k: v for k, v in knobs.items()
                           if k in {s.name for s in POLICIES[policy].knobs}})
    P = random_table(1, 2.5)
    Q = blend(P, random_table(2, 2.5), 0.6)
    assert scheme.first_two_gamma(6) == 2 and scheme.first_two_gamma(1) == 1
    full = first_two_law(scheme.law(P, Q, 6), 0)
    np.testing.assert_allclose(first_two_law(scheme.law(P, Q, 2), 0), full, rtol=0, atol=1e-14)
    assert tv(first_two_law(scheme.law(P, Q, 1), 0), full) > 1e-3 or scheme.lossless


def test_whole_draft_rules_and_stateful_policies_keep_their_gamma() -> None:
    from specsim.schemes import Scheme

    assert Scheme.build("block").first_two_gamma(5) == 5
    assert Scheme.build("correct", {}, "heuristic", {"cap": 8}).first_two_gamma(5) == 5
    assert Scheme.build("correct", {}, "optimal", {"c": 0.1}).first_two_gamma(5) == 5
