"""specsim.schemes.multi_draft: k independent drafts, SpecInfer's multi-step speculative sampling.

The exact law is checked against a brute-force reference (every draft tuple, every accept
outcome, in exact rational arithmetic), against Algorithm 1 at k = 1, against the target
(lossless: first two tokens and the whole emitted sequence of a round), and the vectorised
round against the exact law by Monte Carlo (G-tests, Bonferroni-corrected, fixed seeds).
"""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction as Fr

import numpy as np
import pytest
from multi_draft_reference import (
    DRAFT,
    LEVEL,
    PAIRS,
    TARGET,
    assert_rounds_well_formed,
    assert_sequence_lossless,
    draft_tuples,
    residual,
    stub,
)
from scipy import stats

from specsim.exact import first_two_law, stationary_rates, target_joint, tv
from specsim.models.maths import random_table
from specsim.schemes import multi_draft
from specsim.schemes.multi_draft import law, play, sequence_law
from specsim.stats import gof_test


# ---------------------------------------------------------------------------------------------
# the brute-force reference: a scalar loop in exact rational arithmetic
# ---------------------------------------------------------------------------------------------
def reference_round(p: list[list[Fr]], q: list[list[Fr]], k: int, gamma: int,
                    s: int) -> dict[tuple[int, ...], Fr]:
    """P(one round from s emits exactly this sequence), by enumerating every tuple of k drafts
    and every outcome of every accept test, one at a time, as the algorithm is written."""
    out: dict[tuple[int, ...], Fr] = defaultdict(Fr)

    def depth(drafts: list[tuple[int, ...]], i: int, ctx: int, surv: list[int],
              emitted: tuple[int, ...], prob: Fr) -> None:
        if i == gamma:  # bonus token
            for b, pb in enumerate(p[ctx]):
                out[(*emitted, b)] += prob * pb
            return
        r = list(p[ctx])
        for idx in range(len(surv) + 1):
            if idx == len(surv):  # all rejected: one token from the final r
                for b, rb in enumerate(r):
                    out[(*emitted, b)] += prob * rb
                return
            y = drafts[surv[idx]][i]
            a = min(Fr(1), r[y] / q[ctx][y])
            if a > 0:
                keep = [d for d in surv if drafts[d][i] == y]
                depth(drafts, i + 1, y, keep, (*emitted, y), prob * a)
            prob *= 1 - a
            if prob == 0:
                return
            r = residual(r, q[ctx])

    for drafts, prob in draft_tuples(q, s, k, gamma):
        depth(drafts, 0, s, list(range(k)), (), prob)
    return {seq: pr for seq, pr in out.items() if pr > 0}


# ---------------------------------------------------------------------------------------------
# Algorithm 1 at k = 1, losslessness, monotonicity in k
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("gamma", [1, 2, 3, 4])
def test_lossless_on_tables(pair: str, k: int, gamma: int) -> None:
    p, q = PAIRS[pair]
    exact = law(p, q, gamma, {"drafts": k})
    for s in range(p.shape[0]):
        assert tv(first_two_law(exact, s), target_joint(p, s, 2)) <= 1e-12
    for s in (0, 3):
        assert_sequence_lossless(sequence_law, p, q, gamma, k, s)


@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("gamma", [1, 2, 3, 4])
def test_lossless_on_iid_stub(k: int, gamma: int) -> None:
    p, q, start = stub(gamma)
    exact = law(p, q, gamma, {"drafts": k})
    assert tv(first_two_law(exact, start), target_joint(p, start, 2)) <= 1e-12
    if gamma <= 3:
        assert_sequence_lossless(sequence_law, p, q, gamma, k, start)


@pytest.mark.parametrize("pair", ["blend", "sparse", "other"])
def test_tokens_per_round_grow_with_drafts(pair: str) -> None:
    """A (k+1)-th draft, tested last at each depth, can only extend a k-draft round."""
    p, q = PAIRS[pair]
    laws = [law(p, q, 4, {"drafts": k}) for k in (1, 2, 3, 4)]
    per_context = np.array([x.mean_tokens for x in laws])
    assert (np.diff(per_context, axis=0) >= -1e-12).all()
    rates = np.array([stationary_rates(x).tokens_per_round for x in laws])
    assert (np.diff(rates) > 1e-6).all()
    np.testing.assert_allclose([stationary_rates(x).drafted_per_round for x in laws],
                               [4, 8, 12, 16], rtol=1e-12)


def test_tokens_per_call_reported_numbers() -> None:
    """Target random_table(1, 2.5), draft blend weight 0.55 with 'far', γ = 4 (k = 1..4)."""
    rates = [stationary_rates(law(TARGET, DRAFT, 4, {"drafts": k})).tokens_per_round
             for k in (1, 2, 3, 4)]
    np.testing.assert_allclose(rates, [2.1171444958, 2.6738824439, 2.9776210221,
                                       3.1609956783], rtol=0, atol=1e-9)
    assert rates[0] == pytest.approx(
        stationary_rates(law(TARGET, DRAFT, 4, {"drafts": 1})).tokens_per_round, abs=1e-12)


# ---------------------------------------------------------------------------------------------
# Monte Carlo: play against law
# ---------------------------------------------------------------------------------------------
def test_play_matches_law_on_iid_stub() -> None:
    gamma, k = 3, 3
    p, q, start = stub(gamma)
    state = np.full(100_000, start)
    sample = play(p, q, state, gamma, {"drafts": k}, np.random.default_rng(77))
    assert_rounds_well_formed(sample, k * gamma, gamma, state)
    exact = law(p, q, gamma, {"drafts": k})
    tokens = np.bincount(sample.n_emitted, minlength=gamma + 2)
    nxt = np.bincount(sample.next_state, minlength=p.shape[0])
    assert gof_test(tokens, exact.tokens[start]).p_value > LEVEL / 2
    assert gof_test(nxt, exact.next_state[start]).p_value > LEVEL / 2


def test_long_run_tokens_per_call_inside_monte_carlo_ci() -> None:
    """Chains started from the exact stationary round-start law and run for many rounds: the
    mean tokens per round (= per target call) covers long_run's value at level 1e-3."""
    k, gamma, chains, rounds = 3, 4, 20_000, 15
    exact = law(TARGET, DRAFT, gamma, {"drafts": k})
    rates = stationary_rates(exact)
    rate, pi = rates.tokens_per_round, rates.weights
    rng = np.random.default_rng(11)
    state = rng.choice(TARGET.shape[0], size=chains, p=pi)
    total = np.zeros(chains)
    for _ in range(rounds):
        sample = play(TARGET, DRAFT, state, gamma, {"drafts": k}, rng)
        total += sample.n_emitted
        state = sample.next_state
    per_chain = total / rounds
    se = per_chain.std(ddof=1) / np.sqrt(chains)
    assert abs(per_chain.mean() - rate) <= stats.norm.isf(LEVEL / 2) * se


def test_play_is_reproducible() -> None:
    state = np.arange(1000) % 6
    a = play(TARGET, DRAFT, state, 3, {"drafts": 2}, np.random.default_rng(5))
    b = play(TARGET, DRAFT, state, 3, {"drafts": 2}, np.random.default_rng(5))
    # identity is the claim: same seed, same operations in the same order
    assert np.array_equal(a.tokens, b.tokens) and np.array_equal(a.next_state, b.next_state)


# ---------------------------------------------------------------------------------------------
# refusals
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("knobs", "needle"), [
    ({}, "drafts"), ({"drafts": 2, "width": 3}, "width"), ({"draft": 2}, "draft"),
    ({"drafts": 0}, "drafts"), ({"drafts": -1}, "drafts"), ({"drafts": 1.5}, "drafts"),
    ({"drafts": 2.0}, "drafts"), ({"drafts": True}, "drafts"), ({"drafts": "2"}, "drafts"),
    ({"drafts": None}, "drafts"), ([("drafts", 2)], "mapping"),
])
def test_bad_knobs_refused(knobs: object, needle: str) -> None:
    for call in (lambda: law(TARGET, DRAFT, 2, knobs),
                 lambda: play(TARGET, DRAFT, np.zeros(3, dtype=int), 2, knobs,
                              np.random.default_rng(0)),
                 lambda: sequence_law(TARGET, DRAFT, 2, knobs, 0)):
        with pytest.raises(ValueError, match=needle) as err:
            call()
        assert "\n" not in str(err.value)


def test_bad_inputs_refused() -> None:
    ok = {"drafts": 2}
    cases = [
        (lambda: law(TARGET, DRAFT, 0, ok), "gamma"),
        (lambda: law(TARGET, DRAFT, 1.0, ok), "gamma"),
        (lambda: law(TARGET, DRAFT[:5], 2, ok), "Q"),
        (lambda: law(TARGET, random_table(1, 1.0, 5), 2, ok), "shapes"),
        (lambda: law(TARGET * 2, DRAFT, 2, ok), "P"),
        (lambda: law(TARGET, DRAFT, 2, {"drafts": 400}), "budget"),
        (lambda: law(TARGET, DRAFT, 2, ok, budget=100), r"\(6\*2\)\*\*2 = 144"),
        (lambda: sequence_law(TARGET, DRAFT, 2, ok, 6), "start"),
        (lambda: sequence_law(TARGET, DRAFT, 4, ok, 0, budget=1000), "budget"),
        (lambda: play(TARGET, DRAFT, np.array([0, 6]), 2, ok, np.random.default_rng(0)),
         "state"),
        (lambda: play(TARGET, DRAFT, np.array([0.0]), 2, ok, np.random.default_rng(0)),
         "state"),
    ]
    for call, needle in cases:
        with pytest.raises(ValueError, match=needle) as err:
            call()
        assert "\n" not in str(err.value)


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_window_step_is_the_kernel_summed_over_tokens_to_the_bit(k: int) -> None:
    """The window law's per-row step without the (R, k, V, k) transition: the same numbers as
    the kernel's trans summed over the emitted token, and its stop, bit for bit."""
    rng = np.random.default_rng(k)
    a = rng.random((2, 300, 27)) ** 3
    a[a < 0.1] = 0.0
    a[..., 0] += 1e-3
    p, q = a / a.sum(axis=-1, keepdims=True)
    go, stop = multi_draft.RULE.window_step(p, q, k)  # type: ignore[misc]
    kern = multi_draft._kernel(p, q, k)
    np.testing.assert_array_equal(go, kern.trans.sum(axis=2))
    np.testing.assert_array_equal(stop, kern.stop)


def test_first_accepted_tests_present_candidates_in_order_until_one_passes() -> None:
    """The shared test loop of multi_draft, spectr and tree (:func:`survivors.first_accepted`):
    on live chains the present candidates are tested in column order, the first that passes
    is taken (its label), the tests failed before it are counted, and one uniform per chain
    and column is drawn whether or not a test happens."""
    from specsim.schemes.survivors import first_accepted

    tokens = np.array([[4, 5, 6], [4, 5, 6], [4, 5, 6], [4, 5, 6]])
    present = np.array([[True, True, True], [False, True, True], [True, True, True],
                        [True, False, True]])
    live = np.array([True, True, True, False])
    seen: list[tuple[int, list[int]]] = []

    def test(u: np.ndarray, y: np.ndarray, j: np.ndarray) -> np.ndarray:
        seen.append((int(y[0]), j.tolist()))
        return y == np.array([5, 4, 7, 4])  # chain 0 passes 5, chain 1 never 4, 2 never
    rng = np.random.default_rng(3)
    taken, rejected = first_accepted(live, present, tokens, test, rng,
                                     labels=tokens * 10)
    assert taken.tolist() == [50, -1, -1, -1]
    assert rejected.tolist() == [1, 2, 3, 0]
    # the rejections each test saw: before column 0, 1, 2
    assert seen == [(4, [0, 0, 0, 0]), (5, [1, 0, 1, 0]), (6, [1, 1, 2, 0])]
    fresh = np.random.default_rng(3)
    fresh.random((3, 4))
    assert rng.random() == fresh.random()  # 3 columns x 4 chains of uniforms, no more
