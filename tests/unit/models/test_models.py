"""Tests for specsim.models against verbatim copies of the seeds and independent references.

References used here:

* the seed program's ``random_table`` / ``blend`` / ``temper`` pasted verbatim below (they read
  the module-level ``VOCAB``), compared bit for bit with ``np.array_equal``;
* hard-coded digits printed by the seed program's demo 1;
* the notebook's ``target_dist`` / ``draft_dist`` stub re-implemented here from its text, both
  vectorised (for Monte Carlo) and row by row (for bit-exact comparison of frozen pairs).
"""

from __future__ import annotations

import mc
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specsim.families import family_of, markov_pair, model_identity
from specsim.models.iid import iid_frozen_markov, iid_pairs
from specsim.models.maths import (
    blend,
    calibrate,
    calibrate_far,
    calibration_weights,
    one_hot_argmax,
    one_hot_argmin,
    overlap,
    random_table,
    softmax,
    temper,
)
from specsim.models.spec import ModelSpec, TableSpec

# ---------------------------------------------------------------------------------------------
# VERBATIM copy of the seed program (speculative_decoding_from_scratch.py, STAGE 0).
# Do not "tidy" these: they are the reference the package must reproduce bit for bit.
# ---------------------------------------------------------------------------------------------
VOCAB = 6


def seed_random_table(seed, sharpness=1.0):
    """A row-stochastic (VOCAB, VOCAB) table. Higher sharpness = peakier."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, sharpness, (VOCAB, VOCAB))
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def seed_blend(target, other, alpha):
    """Draft = alpha*target + (1-alpha)*other. alpha=1 -> perfect draft."""
    return alpha * target + (1.0 - alpha) * other


def seed_temper(table, temperature):
    """Re-sharpen or flatten a table. T<1 peakier, T>1 flatter."""
    logits = np.log(np.clip(table, 1e-12, None)) / temperature
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


SEED_TARGET = seed_random_table(seed=1, sharpness=2.5)
SEED_GOOD_DRAFT = seed_blend(SEED_TARGET, seed_random_table(seed=2, sharpness=2.5), 0.85)
SEED_MED_DRAFT = seed_blend(SEED_TARGET, seed_random_table(seed=2, sharpness=2.5), 0.55)
SEED_POOR_DRAFT = seed_blend(SEED_TARGET, seed_random_table(seed=3, sharpness=2.5), 0.20)


# ---------------------------------------------------------------------------------------------
# the notebook's stub, re-implemented from its text
# ---------------------------------------------------------------------------------------------
NB_VOCAB = 20


def nb_target_dist(rng: np.random.Generator) -> np.ndarray:
    logits = rng.normal(0, 1.0, size=NB_VOCAB)
    probs = np.exp(logits - logits.max())
    return probs / probs.sum()


def nb_draft_dist(target: np.ndarray, rng: np.random.Generator, noise: float = 0.3) -> np.ndarray:
    perturbation = rng.normal(0, noise, size=NB_VOCAB)
    logits = np.log(target + 1e-12) + perturbation
    p = np.exp(logits - logits.max())
    return p / p.sum()


def iid_spec(**kw) -> ModelSpec:
    base = {"name": "stub", "family": "iid", "vocab": NB_VOCAB, "draft": "noise"}
    base.update(kw)
    return ModelSpec(**base)


def markov_spec(**kw) -> ModelSpec:
    base = {"name": "m", "family": "markov", "vocab": 6, "draft": "blend", "weight": 0.85,
            "other": TableSpec(seed=2, sharpness=2.5)}
    base.update(kw)
    return ModelSpec(**base)


def assert_row_stochastic(t: np.ndarray, tol: float = 1e-12) -> None:
    assert np.all(np.isfinite(t))
    assert np.all(t >= 0.0)
    np.testing.assert_allclose(t.sum(axis=-1), 1.0, rtol=0, atol=tol)


# ---------------------------------------------------------------------------------------------
# 1. bit-exact reproduction of the seed program
# ---------------------------------------------------------------------------------------------
# Identity is the claim in this section: package and seed copy run the same numpy operations in
# the same order on the same machine, so np.array_equal is right (not a cross-machine value).
@pytest.mark.parametrize("seed", [0, 1, 2, 3, 7, 12345, 2**31 + 5])
@pytest.mark.parametrize("sharpness", [0.3, 1.0, 2.5, 4.0])
def test_random_table_bit_exact_vs_seed(seed: int, sharpness: float) -> None:
    ours = random_table(seed, sharpness)
    ref = seed_random_table(seed, sharpness)
    assert ours.shape == (6, 6)
    assert ours.dtype == np.float64
    assert np.array_equal(ours, ref)
    assert np.array_equal(random_table(seed, sharpness, vocab=6), ref)


def test_random_table_default_sharpness_matches_seed_default() -> None:
    assert np.array_equal(random_table(5), seed_random_table(5))


@pytest.mark.parametrize("weight", [0.0, 0.2, 0.55, 0.85, 1.0])
def test_blend_bit_exact_vs_seed(weight: float) -> None:
    other = seed_random_table(seed=2, sharpness=2.5)
    ours = blend(random_table(1, 2.5), random_table(2, 2.5), weight)
    assert np.array_equal(ours, seed_blend(SEED_TARGET, other, weight))


def test_seed_demo_drafts_bit_exact() -> None:
    t = random_table(1, 2.5)
    assert np.array_equal(t, SEED_TARGET)
    assert np.array_equal(blend(t, random_table(2, 2.5), 0.85), SEED_GOOD_DRAFT)
    assert np.array_equal(blend(t, random_table(2, 2.5), 0.55), SEED_MED_DRAFT)
    assert np.array_equal(blend(t, random_table(3, 2.5), 0.20), SEED_POOR_DRAFT)


@pytest.mark.parametrize("temperature", [0.25, 0.5, 1.3, 2.0, 7.0])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_temper_bit_exact_vs_seed(temperature: float, seed: int) -> None:
    table = seed_random_table(seed, 2.5)
    assert np.array_equal(temper(table, temperature), seed_temper(table, temperature))
    # demo 3's temperature-mismatched draft
    assert np.array_equal(temper(SEED_TARGET, temperature), seed_temper(SEED_TARGET, temperature))


def test_target_row0_digits_from_seed_demo1() -> None:
    """Demo 1 prints ``target p(.|ctx) : [0.0943 0.31 0.0908 0.0015 0.3821 0.1213]``."""
    p = random_table(seed=1, sharpness=2.5)[0]
    expected = np.array([0.0943, 0.3100, 0.0908, 0.0015, 0.3821, 0.1213])
    # printed with 4 decimals: |p - printed| <= half a unit of the 4th decimal
    np.testing.assert_allclose(p, expected, rtol=0, atol=5e-5)
    # demo 1's accept probabilities for x = 'b' (1) and 'e' (4)
    q = blend(random_table(1, 2.5), random_table(2, 2.5), 0.85)[0]
    ref = min(1.0, SEED_TARGET[0, 1] / SEED_GOOD_DRAFT[0, 1])
    assert min(1.0, p[1] / q[1]) == ref  # identity: bit-identical tables (above), same division


def test_random_table_other_vocab_is_seed_recipe() -> None:
    """vocab != 6: same recipe (one normal draw of shape (V, V), row softmax)."""
    for v in (2, 20, 37):
        rng = np.random.default_rng(9)
        logits = rng.normal(0, 1.7, (v, v))
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        # identity is the claim: the recipe's operations in the recipe's order
        assert np.array_equal(random_table(9, 1.7, vocab=v), e / e.sum(axis=1, keepdims=True))


# ---------------------------------------------------------------------------------------------
# 2. temper / softmax edge cases
# ---------------------------------------------------------------------------------------------
def test_temper_t1_is_identity_exactly_and_a_copy() -> None:
    for table in (SEED_TARGET, SEED_GOOD_DRAFT, np.array([[0.0, 1.0], [0.5, 0.5]])):
        out = temper(table, 1.0)
        assert np.array_equal(out, table)
        assert out is not table
        out[0, 0] = 123.0
        assert table[0, 0] != 123.0
    # the seed's own temper at T=1 is NOT bit-exact (log/exp round trip): the package's
    # identity is the stronger property
    assert temper(SEED_TARGET, 1) is not SEED_TARGET


def test_temper_t0_is_one_hot_argmax() -> None:
    table = SEED_TARGET
    out = temper(table, 0.0)
    assert out.shape == table.shape
    assert set(np.unique(out)) == {0.0, 1.0}
    assert np.array_equal(out.sum(axis=1), np.ones(6))
    for r in range(6):
        assert out[r, int(np.argmax(table[r]))] == 1.0


def test_one_hot_ties_pick_first_index() -> None:
    t = np.array([[0.4, 0.4, 0.2], [0.1, 0.45, 0.45], [1 / 3, 1 / 3, 1 / 3]])
    assert np.array_equal(one_hot_argmax(t), np.array([[1, 0, 0], [0, 1, 0], [1, 0, 0]], float))
    assert np.array_equal(temper(t, 0), one_hot_argmax(t))
    assert np.array_equal(one_hot_argmin(t), np.array([[0, 0, 1], [1, 0, 0], [1, 0, 0]], float))


def test_small_temperature_approaches_argmax() -> None:
    out = temper(SEED_TARGET, 1e-3)  # row 4 has a near tie (0.715 at T=0.01)
    assert np.array_equal(out.argmax(axis=1), SEED_TARGET.argmax(axis=1))
    assert np.all(out.max(axis=1) > 0.999)
    flat = temper(SEED_TARGET, 1e6)
    np.testing.assert_allclose(flat, 1 / 6, atol=1e-4)


@pytest.mark.parametrize("bad", [-0.5, -1e-300, np.inf, np.nan])
def test_temper_rejects_bad_temperature(bad: float) -> None:
    with pytest.raises(ValueError):
        temper(SEED_TARGET, bad)


def test_softmax_matches_direct_formula() -> None:
    rng = np.random.default_rng(3)
    z = rng.normal(size=(4, 9))
    for t in (0.5, 1.0, 3.0):
        ref = np.exp(z / t) / np.exp(z / t).sum(axis=-1, keepdims=True)
        np.testing.assert_allclose(softmax(z, t), ref, rtol=1e-13, atol=0)
    assert np.array_equal(softmax(z, 0), one_hot_argmax(z))


# ---------------------------------------------------------------------------------------------
# 3. calibrate
# ---------------------------------------------------------------------------------------------
def _sparse_or_dense(rng: np.random.Generator, v: int, zero_frac: float) -> np.ndarray:
    t = rng.exponential(size=(v, v))
    t[rng.random((v, v)) < zero_frac] = 0.0
    empty = t.sum(axis=1) == 0
    t[empty, 0] = 1.0
    return t / t.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("seed", range(8))
def test_calibrate_hits_alpha_in_every_context(seed: int) -> None:
    rng = np.random.default_rng(seed)
    v = int(rng.integers(2, 40))
    target = _sparse_or_dense(rng, v, 0.3 * (seed % 2))
    for other in (_sparse_or_dense(rng, v, 0.5), one_hot_argmin(target),
                  np.full((v, v), 1.0 / v)):
        beta0 = np.minimum(target, other).sum(axis=1)  # own computation of the overlap
        lo = float(beta0.max())
        for alpha in (lo, lo + 0.3 * (1 - lo), 0.5 * (lo + 1), 1 - 1e-9, 1.0):
            q = calibrate(target, other, alpha)
            assert_row_stochastic(q, 1e-12)
            achieved = np.minimum(target, q).sum(axis=1)
            np.testing.assert_allclose(achieved, alpha, rtol=0, atol=1e-12)
        assert np.allclose(calibrate(target, other, 1.0), target, rtol=0, atol=1e-15)


@pytest.mark.parametrize("seed", range(4))
def test_calibrate_far_is_calibrate_on_the_one_hot_bit_for_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    v = int(rng.integers(2, 40))
    target = _sparse_or_dense(rng, v, 0.3 * (seed % 2))  # zeros: ties at the minimum
    target = np.stack([target, np.eye(v)[rng.integers(0, v, v)]])  # and one-hot rows
    lo = float(target.min(axis=-1).max())
    for alpha in (lo, 0.5 * (lo + 1), 0.7 * (lo + 1) / 1.4 + 0.3, 1.0):
        want = calibrate(target, one_hot_argmin(target), alpha)
        assert calibrate_far(target, alpha).tobytes() == want.tobytes()
    with pytest.raises(ValueError, match="below"):
        calibrate_far(SEED_TARGET, float(SEED_TARGET.min(axis=-1).max()) - 1e-6)


def test_calibrate_at_lower_end_keeps_the_base_in_the_argmax_context() -> None:
    target = SEED_TARGET
    other = seed_random_table(2, 2.5)
    beta0 = np.minimum(target, other).sum(axis=1)
    k = int(np.argmax(beta0))
    q = calibrate(target, other, float(beta0[k]))
    np.testing.assert_allclose(q[k], other[k], rtol=0, atol=1e-15)
    w = calibration_weights(target, other, float(beta0[k]))
    # exact: overlap() sums the same minima in the same order as beta0 here, so alpha - beta0 = 0
    assert w[k] == 0.0
    assert np.all((w >= 0) & (w <= 1))


def test_calibrate_raises_below_reachable_range() -> None:
    target = SEED_TARGET
    other = seed_random_table(2, 2.5)
    beta0 = np.minimum(target, other).sum(axis=1)
    with pytest.raises(ValueError, match="below"):
        calibrate(target, other, float(beta0.max()) - 1e-6)
    with pytest.raises(ValueError):
        calibrate(target, other, 0.0)
    # the far base (one-hot on the argmin) has overlap = min row entry, so tiny alphas work
    far = one_hot_argmin(target)
    alpha = float(target.min(axis=1).max()) + 1e-3
    np.testing.assert_allclose(np.minimum(target, calibrate(target, far, alpha)).sum(1), alpha,
                               rtol=0, atol=1e-12)


@pytest.mark.parametrize("alpha", [1.2, float("nan")])
def test_calibrate_rejects_alpha_outside_unit_interval(alpha: float) -> None:
    with pytest.raises(ValueError):
        calibrate(SEED_TARGET, one_hot_argmin(SEED_TARGET), alpha)


def test_overlap_is_sum_min() -> None:
    ref = np.array([sum(min(a, b) for a, b in zip(SEED_TARGET[r], SEED_GOOD_DRAFT[r],
                                                       strict=True)) for r in range(6)])
    np.testing.assert_allclose(overlap(SEED_TARGET, SEED_GOOD_DRAFT), ref, rtol=1e-15, atol=0)


@pytest.mark.parametrize("temperature", [0.0, 0.5, 1.0, 2.0])
@pytest.mark.parametrize("other", [TableSpec(special="far"), TableSpec(special="uniform"),
                                   TableSpec(seed=2, sharpness=2.5)])
def test_markov_pair_calibrated_exact_alpha_at_every_temperature(temperature, other) -> None:
    spec = markov_spec(draft="calibrated", other=other)
    alpha = 0.93
    if temperature == 0.0 and other.seed is not None:
        # tempered base is a one-hot argmax: it may coincide with the target's argmax (overlap 1)
        base = temper(random_table(2, 2.5), 0)
        tgt = temper(random_table(1, 2.5), 0)
        if np.any(np.minimum(base, tgt).sum(1) > alpha):
            with pytest.raises(ValueError):
                markov_pair(spec, temperature, alpha)
            return
    p, q = markov_pair(spec, temperature, alpha)
    # identity is the claim: markov_pair's target is temper(random_table), same operations
    assert np.array_equal(p, temper(random_table(1, 2.5), temperature))
    assert_row_stochastic(q)
    np.testing.assert_allclose(np.minimum(p, q).sum(axis=1), alpha, rtol=0, atol=1e-12)


def test_markov_pair_seed_drafts_are_tempered_after_building() -> None:
    spec = markov_spec()
    p, q = markov_pair(spec, 1.0, None)
    # identity is the claim (section 1): the seed's operations in the seed's order
    assert np.array_equal(p, SEED_TARGET)
    assert np.array_equal(q, SEED_GOOD_DRAFT)
    p2, q2 = markov_pair(spec, 0.5, None)
    assert np.array_equal(p2, seed_temper(SEED_TARGET, 0.5))
    assert np.array_equal(q2, seed_temper(SEED_GOOD_DRAFT, 0.5))
    with pytest.raises(ValueError):
        markov_pair(markov_spec(draft="calibrated"), 1.0, None)
    with pytest.raises(ValueError):
        markov_pair(iid_spec(), 1.0, None)


def test_model_spec_dict_round_trip() -> None:
    for spec in (markov_spec(), markov_spec(draft="calibrated"),
                 markov_spec(draft="temper", draft_temperature=1.3),
                 iid_spec(), iid_spec(share="position", seed=4, noise=0.5)):
        again = family_of(spec).build(spec.name, model_identity(spec))
        assert model_identity(again) == model_identity(spec)


# ---------------------------------------------------------------------------------------------
# 4. the notebook's stub: iid_pairs and iid_frozen_markov
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("draft", ["noise", "temper", "calibrated", "identical", "uniform"])
@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.0, 1.5])
@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 1, 3)])
def test_iid_pairs_shapes_and_rows(draft: str, temperature: float, shape) -> None:
    spec = iid_spec(draft=draft, draft_temperature=1.3)
    alpha = 0.8 if draft == "calibrated" else None
    p, q = iid_pairs(spec, temperature, alpha, np.random.default_rng(1), shape)
    assert p.shape == q.shape == (*shape, NB_VOCAB)
    assert_row_stochastic(p)
    assert_row_stochastic(q)
    if temperature == 0.0:
        assert np.array_equal(p, one_hot_argmax(p))
    if draft == "calibrated":
        np.testing.assert_allclose(np.minimum(p, q).sum(-1), alpha, rtol=0, atol=1e-12)
    if draft == "identical":
        assert np.array_equal(p, q)
    if draft == "uniform":
        assert np.all(q == 1.0 / NB_VOCAB)


def test_iid_pairs_bad_draft_and_missing_alpha() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError):
        iid_pairs(iid_spec(draft="blend"), 1.0, None, rng, (2,))
    with pytest.raises(ValueError):
        iid_pairs(iid_spec(draft="calibrated"), 1.0, None, rng, (2,))


def test_iid_pairs_noise_zero_gives_identical_pairs() -> None:
    p, q = iid_pairs(iid_spec(noise=0.0), 1.0, None, np.random.default_rng(2), (50,))
    np.testing.assert_allclose(q, p, rtol=1e-9, atol=1e-15)


def test_iid_pairs_bit_exact_vs_notebook_rowwise() -> None:
    """One pair at a time, the notebook's draws in the notebook's order give the same pair."""
    spec = iid_spec()
    for seed in range(5):
        p, q = iid_pairs(spec, 1.0, None, np.random.default_rng(seed), (1,))
        rng = np.random.default_rng(seed)
        t = nb_target_dist(rng)
        d = nb_draft_dist(t, rng)
        np.testing.assert_allclose(p[0], t, rtol=1e-15, atol=0)
        np.testing.assert_allclose(q[0], d, rtol=1e-13, atol=1e-300)


def test_notebook_stub_mean_overlap_is_0889() -> None:
    """The notebook's α: E[Σ min(p, q)] with noise 0.3 ≈ 0.889 (own vectorised stub)."""
    n = 200_000
    rng = np.random.default_rng(2024)
    logits = rng.normal(0, 1.0, (n, NB_VOCAB))
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    dl = np.log(p + 1e-12) + rng.normal(0, 0.3, (n, NB_VOCAB))
    q = np.exp(dl - dl.max(axis=1, keepdims=True))
    q /= q.sum(axis=1, keepdims=True)
    beta = np.minimum(p, q).sum(axis=1)
    se = beta.std() / np.sqrt(n)
    assert se < 1e-4
    assert abs(beta.mean() - 0.889) < 0.002
    # the package's stub has the same law: two-sample z-test on the means
    pp, qq = iid_pairs(iid_spec(), 1.0, None, np.random.default_rng(7), (n,))
    beta2 = overlap(pp, qq)
    mc.assert_close(beta2.mean(), np.hypot(se, beta2.std() / np.sqrt(n)), beta.mean())
    # and more noise means less overlap
    pp, qq = iid_pairs(iid_spec(noise=1.0), 1.0, None, np.random.default_rng(7), (20_000,))
    assert overlap(pp, qq).mean() < 0.8


def _nb_frozen_pairs(seed: int, positions: int, noise: float) -> tuple[np.ndarray, np.ndarray]:
    """Frozen pairs from one generator: all target logits first, then all draft noise."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(0.0, 1.0, (positions, NB_VOCAB))
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    dl = np.log(p + 1e-12) + rng.normal(0.0, noise, (positions, NB_VOCAB))
    q = np.exp(dl - dl.max(axis=1, keepdims=True))
    q /= q.sum(axis=1, keepdims=True)
    return p, q


@pytest.mark.parametrize("positions", [1, 2, 4])
def test_iid_frozen_markov_structure_and_joint(positions: int) -> None:
    spec = iid_spec(seed=11)
    big_p, big_q, start = iid_frozen_markov(spec, 1.0, None, positions)
    v = NB_VOCAB
    n_states = positions * v + 1
    assert big_p.shape == big_q.shape == (n_states, n_states)
    assert start == positions * v
    assert_row_stochastic(big_p)
    assert_row_stochastic(big_q)
    # nothing ever returns to the start state
    assert np.all(big_p[:, start] == 0) and np.all(big_q[:, start] == 0)
    p, q = _nb_frozen_pairs(11, positions, 0.3)
    np.testing.assert_allclose(big_p[start, :v], p[0], rtol=1e-14, atol=0)
    np.testing.assert_allclose(big_q[start, :v], q[0], rtol=1e-12, atol=1e-300)
    # every state at position t moves to position t+1 with the frozen pair of t+1
    for t in range(positions):
        nxt = min(t + 1, positions - 1)
        for x in (0, 7, v - 1):
            s = t * v + x
            row = big_p[s]
            np.testing.assert_allclose(row[nxt * v:(nxt + 1) * v], p[nxt], rtol=1e-14, atol=0)
            outside = np.delete(row, np.arange(nxt * v, (nxt + 1) * v))
            assert np.all(outside == 0.0)
    # target joint of the first two TOKENS (states folded mod V) = p_0 ⊗ p_1
    joint = np.zeros((v, v))
    first = big_p[start]
    for s1 in np.flatnonzero(first):
        for s2 in np.flatnonzero(big_p[s1]):
            joint[s1 % v, s2 % v] += first[s1] * big_p[s1, s2]
    p1 = p[min(1, positions - 1)]
    np.testing.assert_allclose(joint, np.outer(p[0], p1), rtol=1e-12, atol=1e-300)


def test_iid_frozen_markov_calibrated_and_temperature() -> None:
    spec = iid_spec(draft="calibrated", seed=3)
    big_p, big_q, start = iid_frozen_markov(spec, 0.5, 0.75, 3)
    assert_row_stochastic(big_p)
    assert_row_stochastic(big_q)
    reach = np.minimum(big_p, big_q).sum(axis=1)
    np.testing.assert_allclose(reach, 0.75, rtol=0, atol=1e-12)
    # T = 0.5 target = softmax(logits / 0.5)
    rng = np.random.default_rng(3)
    logits = rng.normal(0.0, 1.0, (3, NB_VOCAB))
    np.testing.assert_allclose(big_p[start, :NB_VOCAB], softmax(logits[0], 0.5), rtol=1e-13)


# ---------------------------------------------------------------------------------------------
# 5. property tests
# ---------------------------------------------------------------------------------------------
seeds = st.integers(min_value=0, max_value=2**63 - 1)
sharp = st.floats(min_value=0.0, max_value=8.0, allow_nan=False)
vocabs = st.integers(min_value=1, max_value=40)


@settings(max_examples=80, deadline=None)
@given(seed=seeds, sharpness=sharp, vocab=vocabs)
def test_prop_random_table_row_stochastic(seed: int, sharpness: float, vocab: int) -> None:
    t = random_table(seed, sharpness, vocab)
    assert t.shape == (vocab, vocab)
    assert_row_stochastic(t, 1e-12)
    if vocab == 6:
        assert np.array_equal(t, seed_random_table(seed, sharpness))


@settings(max_examples=60, deadline=None)
@given(seed=seeds, s1=sharp, s2=sharp, w=st.floats(0.0, 1.0),
       temperature=st.one_of(st.just(0.0), st.floats(0.05, 20.0)))
def test_prop_blend_temper_row_stochastic(seed, s1, s2, w, temperature) -> None:
    a = random_table(seed, s1)
    b = random_table(seed ^ 0x5A5A, s2)
    d = blend(a, b, w)
    assert_row_stochastic(d, 1e-12)
    t = temper(d, temperature)
    assert_row_stochastic(t, 1e-12)
    # tempering keeps the argmax (order-preserving map of the clipped logits) in exact
    # arithmetic; SIMD log/exp need not be monotone at the ulp, so a near tie in d may swap by
    # the rounding of log amplified by 1/T: <= 20 * |log 1e-12| * few eps ~ 1e-13 relative
    np.testing.assert_allclose(t[np.arange(6), d.argmax(axis=1)], t.max(axis=1), rtol=1e-12,
                               atol=0)


@settings(max_examples=60, deadline=None)
@given(seed=seeds, vocab=st.integers(2, 30), frac=st.floats(0.0, 1.0),
       zero_frac=st.floats(0.0, 0.8))
def test_prop_calibrate(seed: int, vocab: int, frac: float, zero_frac: float) -> None:
    rng = np.random.default_rng(seed)
    target = _sparse_or_dense(rng, vocab, zero_frac)
    other = _sparse_or_dense(rng, vocab, zero_frac)
    lo = float(np.minimum(target, other).sum(axis=1).max())
    alpha = lo + frac * (1.0 - lo)
    q = calibrate(target, other, alpha)
    assert_row_stochastic(q, 1e-12)
    np.testing.assert_allclose(np.minimum(target, q).sum(axis=1), alpha, rtol=0, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(seed=seeds, temperature=st.one_of(st.just(0.0), st.floats(0.05, 5.0)),
       draft=st.sampled_from(["noise", "temper", "identical", "uniform", "calibrated"]),
       sigma=st.floats(0.0, 4.0), noise=st.floats(0.0, 3.0))
def test_prop_iid_pairs_row_stochastic(seed, temperature, draft, sigma, noise) -> None:
    spec = iid_spec(draft=draft, sigma=sigma, noise=noise, draft_temperature=0.8)
    p, q = iid_pairs(spec, temperature, 0.9 if draft == "calibrated" else None,
                     np.random.default_rng(seed), (7, 2))
    assert_row_stochastic(p, 1e-12)
    assert_row_stochastic(q, 1e-12)


def test_temper_is_softmax_of_logits_over_t() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 7))
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    for t in (0.5, 1.0, 2.0):
        want = np.exp(logits / t) / np.exp(logits / t).sum(1, keepdims=True)
        assert np.allclose(temper(p, t), want, atol=1e-12)
