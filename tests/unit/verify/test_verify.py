"""Tests for specsim.verify (one round of Leviathan et al. 2022, arXiv 2211.17192, Algorithm 1
on given probabilities) and its exact law, specsim.exact.verify_law / verify_law_tree.

The draw-for-draw reference is a plain scalar loop of Algorithm 1 in exact rational arithmetic
(fractions.Fraction): given the same uniforms it must emit the same tokens as the vectorised
core, which rounds -- they can only differ when a uniform lies within rounding (~1e-16) of a
decision boundary, which the fixed seeds here never hit. Statistical comparisons use tolerances
derived from the sample size: per-cell normal intervals, Bonferroni-corrected to a family-wise
level ``LEVEL``, or the G-test of specsim.stats at the same level (tests/mc.py: at most 1e-6 per
test for any random stream).
"""

from __future__ import annotations

from fractions import Fraction

import mc
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import specsim
from specsim import engine, exact, stats
from specsim.exact import round_law, verify_law, verify_law_tree
from specsim.models.maths import blend, random_table
from specsim.sampling import inverse_cdf_blocked, sample_rows
from specsim.verify import (
    BLOCK,
    CLASSIC_RULES,
    PLACEHOLDER,
    RULES,
    VerifyResult,
    accept,
    acceptance_probability,
    check_round,
    residual,
    rule_spec,
    verify,
    verify_uniforms,
)

# false-alarm probability of each statistical assertion: no test here makes more than 8, so
# each test fails with probability <= mc.FAIL_PROB (1e-6) whatever its random stream
LEVEL = mc.FAIL_PROB / 8
ALL_RULES = CLASSIC_RULES  # the rules verify() and the engine play (schemes: test_schemes)


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def random_rows(rng: np.random.Generator, shape: tuple[int, ...], v: int,
                zero_frac: float = 0.3) -> np.ndarray:
    """Probability rows (*shape, v) with some exact zeros (never an all-zero row)."""
    t = rng.exponential(size=(*shape, v))
    t[rng.random(t.shape) < zero_frac] = 0.0
    t[..., rng.integers(0, v)] += 1e-3  # keep one column alive so no row is empty
    return t / t.sum(axis=-1, keepdims=True)


def within_ci(counts: np.ndarray, probs: np.ndarray, level: float = LEVEL) -> bool:
    """Every cell's frequency within its normal interval, Bonferroni over the cells.

    |f - p| <= z sqrt(p (1 - p) / n) + 1/(2n) with z the (1 - level / (2 cells)) normal quantile;
    a zero-probability cell must have no observation.
    """
    counts = np.asarray(counts, dtype=float).ravel()
    probs = np.asarray(probs, dtype=float).ravel()
    n = counts.sum()
    z = float(stats.normal_quantile(1.0 - level / (2 * counts.size)))
    half = z * np.sqrt(probs * (1.0 - probs) / n) + 0.5 / n
    return bool(np.all(np.abs(counts / n - probs) <= half) and np.all(counts[probs == 0] == 0))


def lossless(counts: np.ndarray, probs: np.ndarray) -> bool:
    return stats.gof_test(counts, probs).p_value > LEVEL


# --- the reference: Algorithm 1, one round, one row, exact rational arithmetic ---------------
def _norm(row: list[Fraction]) -> list[Fraction]:
    s = sum(row)
    return [v / s for v in row]


def _inverse_cdf(dist: list[Fraction], u: Fraction) -> int:
    """The first k with cdf_k > u, i.e. #{k: cdf_k <= u} (never a zero-probability token)."""
    total, c = sum(dist), Fraction(0)
    for k, v in enumerate(dist):
        c += v
        if c / total > u:
            return k
    return len(dist) - 1


def reference_round(p: np.ndarray, q: np.ndarray, x: np.ndarray, rule: str,
                    u: np.ndarray) -> tuple[int, list[int]]:
    """(accepted, emitted tokens) of one round; u[i] tests draft i, u[γ] draws the last token."""
    gamma = len(x)
    P = [_norm([Fraction(float(v)) for v in row]) for row in p]
    Q = [_norm([Fraction(float(v)) for v in row]) for row in q]
    U = [Fraction(float(v)) for v in u]
    out: list[int] = []
    for i in range(gamma):
        xi = int(x[i])
        if rule == "greedy":
            ok = xi == max(range(len(P[i])), key=lambda k: (P[i][k], -k))
        else:
            ok = U[i] * Q[i][xi] < P[i][xi]  # r < p(x)/q(x), r ~ U[0, 1)
        if ok:
            out.append(xi)
            continue
        if rule == "no_resample":
            dist = P[i]
        else:
            r = [max(a - b, Fraction(0)) for a, b in zip(P[i], Q[i], strict=True)]
            dist = _norm(r) if sum(r) > 0 else P[i]
        out.append(_inverse_cdf(dist, U[gamma]))
        if rule == "continue":
            out.extend(int(t) for t in x[i + 1 :])
        return i, out
    out.append(_inverse_cdf(P[gamma], U[gamma]))
    return gamma, out


def mixed_case(rng: np.random.Generator, n: int, gamma: int, v: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n rounds mixing the edge cases: generic rows with zeros, p = q, disjoint supports, and
    drafts that q never proposes (q(x) = 0) -- drafts are arbitrary tokens, not samples of q."""
    p = random_rows(rng, (n, gamma + 1), v)
    q = random_rows(rng, (n, gamma), v)
    third = n // 3
    q[:third] = p[:third, :gamma]  # p = q
    half = v // 2
    p[third : 2 * third, :, :half] = 0.0  # disjoint supports
    p[third : 2 * third, :, half] += 1.0
    q[third : 2 * third, :, half:] = 0.0
    q[third : 2 * third, :, 0] += 1.0
    p /= p.sum(axis=-1, keepdims=True)
    q /= q.sum(axis=-1, keepdims=True)
    x = sample_rows(q, rng.random((n, gamma)))
    wild = rng.random((n, gamma)) < 0.2  # some arbitrary drafts, q(x) = 0 among them
    x[wild] = rng.integers(0, v, int(wild.sum()))
    return p, q, x


# ---------------------------------------------------------------------------------------------
# 1. draw for draw against the scalar reference
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rule", ALL_RULES)
@pytest.mark.parametrize("gamma", [1, 4])
def test_verify_equals_scalar_reference_draw_for_draw(rule: str, gamma: int) -> None:
    rng = np.random.default_rng(100 + gamma)
    n, v = 900, 7
    p, q, x = mixed_case(rng, n, gamma, v)
    res = verify(p, q, x, rule, rng=np.random.default_rng(5))
    u = np.random.default_rng(5).random((n, gamma + 1))  # verify's documented consumption
    for i in range(n):
        acc, toks = reference_round(p[i], q[i], x[i], rule, u[i])
        assert res.accepted[i] == acc, i
        assert res.n_emitted[i] == len(toks), i
        assert res.tokens[i].tolist() == toks + [PLACEHOLDER] * (gamma + 1 - len(toks)), i


def test_batched_leading_axes_equal_a_loop_over_rows_with_the_same_stream() -> None:
    rng = np.random.default_rng(2)
    gamma, v = 3, 6
    p = random_rows(rng, (3, 4, gamma + 1), v)
    q = random_rows(rng, (3, 4, gamma), v)
    x = sample_rows(q, rng.random((3, 4, gamma)))
    for rule in ALL_RULES:
        batch = verify(p, q, x, rule, rng=np.random.default_rng(9))
        gen = np.random.default_rng(9)
        for idx in np.ndindex(3, 4):  # C order
            one = verify(p[idx], q[idx], x[idx], rule, rng=gen)
            assert one.accepted.shape == () and one.tokens.shape == (gamma + 1,)
            assert batch.accepted[idx] == one.accepted
            assert np.array_equal(batch.tokens[idx], one.tokens)
            assert batch.n_emitted[idx] == one.n_emitted
        # identity is the claim: the batch consumed exactly the uniforms of the loop, in order
        assert gen.random() == np.random.default_rng(9).random(3 * 4 * (gamma + 1) + 1)[-1]


def test_a_seed_is_a_generator_of_that_seed() -> None:
    rng = np.random.default_rng(3)
    p, q = random_rows(rng, (50, 3), 5), random_rows(rng, (50, 2), 5)
    x = sample_rows(q, rng.random((50, 2)))
    a = verify(p, q, x, rng=11)
    b = verify(p, q, x, rng=np.random.default_rng(11))
    # identity is the claim: same seed, same operations in the same order
    assert all(np.array_equal(getattr(a, f), getattr(b, f))
               for f in ("accepted", "tokens", "n_emitted"))


def test_result_layout_and_padding() -> None:
    rng = np.random.default_rng(4)
    gamma = 4
    p, q, x = mixed_case(rng, 600, gamma, 6)
    for rule in ALL_RULES:
        res = verify(p, q, x, rule, rng=rng)
        assert isinstance(res, VerifyResult)
        assert res.tokens.shape == (600, gamma + 1) and res.accepted.shape == (600,)
        j = np.arange(gamma + 1)
        real = j < res.n_emitted[:, None]
        assert (res.tokens[real] >= 0).all() and (res.tokens[~real] == PLACEHOLDER).all()
        assert np.array_equal(res.tokens[:, :gamma][j[:gamma] < res.accepted[:, None]],
                              x[j[:gamma] < res.accepted[:, None]])
        expected_n = (np.where(res.accepted < gamma, gamma, gamma + 1) if rule == "continue"
                      else res.accepted + 1)
        assert np.array_equal(res.n_emitted, expected_n)
        assert np.array_equal(res.final, res.tokens[np.arange(600), res.accepted])


def test_gamma_zero_is_plain_sampling_from_p() -> None:
    rng = np.random.default_rng(5)
    p = np.broadcast_to(np.array([[0.2, 0.5, 0.3]]), (40_000, 1, 3))
    res = verify(p, np.zeros((40_000, 0, 3)), np.zeros((40_000, 0), dtype=int), rng=rng)
    assert (res.accepted == 0).all() and (res.n_emitted == 1).all()
    assert lossless(np.bincount(res.tokens[:, 0], minlength=3), p[0, 0])


# ---------------------------------------------------------------------------------------------
# 2. production semantics (Hugging Face _speculative_sampling, vLLM rejection sampler)
# ---------------------------------------------------------------------------------------------
def test_p_equal_q_accepts_every_draft_and_the_bonus_comes_from_p() -> None:
    rng = np.random.default_rng(6)
    n, gamma, v = 60_000, 3, 8
    p = random_rows(rng, (gamma + 1,), v)
    q = p[:gamma]
    x = sample_rows(np.broadcast_to(q, (n, gamma, v)), rng.random((n, gamma)))
    for rule in ("correct", "no_resample", "continue"):
        res = verify(np.broadcast_to(p, (n, gamma + 1, v)), np.broadcast_to(q, (n, gamma, v)),
                     x, rule, rng=rng)
        assert (res.accepted == gamma).all() and (res.n_emitted == gamma + 1).all()
        assert np.array_equal(res.tokens[:, :gamma], x)
        assert lossless(np.bincount(res.tokens[:, gamma], minlength=v), p[gamma])


def test_disjoint_supports_reject_everything_and_still_emit_from_p() -> None:
    rng = np.random.default_rng(7)
    n, gamma, v = 50_000, 4, 8
    p = np.zeros((gamma + 1, v))
    p[:, :4] = rng.dirichlet(np.ones(4), gamma + 1)
    q = np.zeros((gamma, v))
    q[:, 4:] = rng.dirichlet(np.ones(4), gamma)
    pb, qb = np.broadcast_to(p, (n, gamma + 1, v)), np.broadcast_to(q, (n, gamma, v))
    x = sample_rows(qb, rng.random((n, gamma)))
    for rule in ("correct", "continue"):
        res = verify(pb, qb, x, rule, rng=rng)
        assert (res.accepted == 0).all()
        assert lossless(np.bincount(res.tokens[:, 0], minlength=v), p[0])  # residual = p
    law = verify_law(p, q)
    np.testing.assert_allclose(law.accepted, np.eye(gamma + 1)[0], atol=0)
    np.testing.assert_allclose(law.first_token, p[0], rtol=1e-15)


def test_q_zero_on_tokens_p_likes_is_still_lossless() -> None:
    """The draft never proposes tokens it gives 0; the residual supplies their mass."""
    rng = np.random.default_rng(8)
    n, gamma, v = 80_000, 2, 6
    p = rng.dirichlet(np.ones(v), gamma + 1)
    q = rng.dirichlet(np.ones(v), gamma)
    q[:, :3] = 0.0  # p's mass on tokens 0..2 comes only from the residual
    q /= q.sum(axis=1, keepdims=True)
    pb, qb = np.broadcast_to(p, (n, gamma + 1, v)), np.broadcast_to(q, (n, gamma, v))
    x = sample_rows(qb, rng.random((n, gamma)))
    assert not np.isin(x, [0, 1, 2]).any()
    res = verify(pb, qb, x, rng=rng)
    for j in range(gamma + 1):
        there = res.n_emitted > j
        assert lossless(np.bincount(res.tokens[there, j], minlength=v), p[j]), j
    np.testing.assert_allclose(verify_law(p, q).first_token, p[0], rtol=1e-14)


def test_a_draft_with_q_zero_is_accepted_when_p_likes_it_and_rejected_when_not() -> None:
    """Hugging Face's r <= p/q accepts at p/q = inf; p(x) = 0 is never accepted, even at u = 0
    (vLLM rejects every q(x) = 0 draft; our choice is documented in specsim.verify.accept)."""
    p = np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]])
    q = np.array([[1.0, 0.0, 0.0]])
    for seed in range(50):
        assert verify(p, q, np.array([1]), rng=seed).accepted == 1
        assert verify(p, q, np.array([2]), rng=seed).accepted == 0
    assert accept(np.array(0.0), np.array(0.0), np.array(0.0)) == np.False_
    assert accept(np.array(0.0), np.array(0.0), np.array(0.3)) == np.False_
    u = np.nextafter(1.0, 0.0)
    assert accept(np.array(u), np.array(0.4), np.array(0.4)) == np.True_  # p >= q: always


def test_residual_without_mass_falls_back_to_p() -> None:
    """p = q: the residual has no mass; a rejection (here forced by the greedy rule on a
    non-argmax draft) samples p, as the engine does."""
    rng = np.random.default_rng(9)
    p = np.array([0.1, 0.6, 0.3])
    assert np.array_equal(residual(p, p), p)
    n = 40_000
    pb = np.broadcast_to(np.stack([p, p]), (n, 2, 3))
    res = verify(pb, pb[:, :1], np.zeros((n, 1), dtype=int), "greedy", rng=rng)
    assert (res.accepted == 0).all()
    assert lossless(np.bincount(res.tokens[:, 0], minlength=3), p)


# ---------------------------------------------------------------------------------------------
# 3. the output law equals the target's (and the broken rules' does not)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rule", ALL_RULES)
def test_every_emitted_position_has_the_targets_law_only_under_the_correct_rule(
        rule: str) -> None:
    rng = np.random.default_rng(10)
    n, gamma, v = 100_000, 3, 6
    p = random_rows(rng, (gamma + 1,), v, zero_frac=0.2)
    q = random_rows(rng, (gamma,), v, zero_frac=0.2)
    pb, qb = np.broadcast_to(p, (n, gamma + 1, v)), np.broadcast_to(q, (n, gamma, v))
    x = sample_rows(qb, rng.random((n, gamma)))
    res = verify(pb, qb, x, rule, rng=rng)
    verdicts = []
    for j in range(gamma + 1):
        there = res.n_emitted > j
        verdicts.append(lossless(np.bincount(res.tokens[there, j], minlength=v), p[j]))
    if RULES[rule].lossless:
        assert all(verdicts), verdicts
    else:
        assert not all(verdicts), verdicts  # the breakage is visible at this sample size


# ---------------------------------------------------------------------------------------------
# 4. the exact law
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rule", ALL_RULES)
def test_exact_law_matches_monte_carlo(rule: str) -> None:
    rng = np.random.default_rng(11)
    n, gamma, v = 120_000, 3, 5
    p = random_rows(rng, (gamma + 1,), v)
    q = random_rows(rng, (gamma,), v)
    law = verify_law(p, q, rule)
    assert law.accepted.sum() == pytest.approx(1.0, abs=1e-14)
    assert law.n_emitted.sum() == pytest.approx(1.0, abs=1e-14)
    assert law.final.sum() == pytest.approx(1.0, abs=1e-14)
    pb, qb = np.broadcast_to(p, (n, gamma + 1, v)), np.broadcast_to(q, (n, gamma, v))
    x = sample_rows(qb, rng.random((n, gamma)))
    res = verify(pb, qb, x, rule, rng=rng)
    assert within_ci(np.bincount(res.accepted, minlength=gamma + 1), law.accepted)
    assert within_ci(np.bincount(res.n_emitted, minlength=gamma + 2), law.n_emitted)
    assert within_ci(np.bincount(res.accepted * v + res.final, minlength=(gamma + 1) * v),
                     law.final)
    for j in range(gamma + 1):  # the j-th emitted token, with "not emitted" as one more cell
        tok = np.where(res.n_emitted > j, res.tokens[:, j], v)
        cells = np.append(law.emitted[j], 1.0 - law.emitted[j].sum())
        assert within_ci(np.bincount(tok, minlength=v + 1), cells), j


def test_exact_first_token_is_p0_for_the_correct_rule() -> None:
    rng = np.random.default_rng(12)
    for gamma in (1, 2, 5):
        p = random_rows(rng, (7, gamma + 1), 9)
        q = random_rows(rng, (7, gamma), 9)
        law = verify_law(p, q)  # leading axes: seven rounds at once
        np.testing.assert_allclose(law.first_token, p[:, 0], rtol=1e-13, atol=1e-16)
        reach = np.concatenate([np.ones((7, 1)), np.cumprod(np.minimum(p[:, :gamma], q).sum(-1),
                                                             axis=-1)], axis=-1)
        np.testing.assert_allclose(law.emitted, reach[..., None] * p, rtol=1e-12, atol=1e-16)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 4), st.integers(1, 5), st.sampled_from(ALL_RULES), st.integers(0, 2**31))
def test_exact_law_is_a_law_and_the_tree_agrees(gamma: int, v: int, rule: str,
                                                  seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = random_rows(rng, (gamma + 1,), v)
    q = random_rows(rng, (gamma,), v)
    law = verify_law(p, q, rule)
    for arr in (law.accepted, law.n_emitted, law.final, law.emitted):
        assert (arr >= -1e-15).all()
    assert law.accepted.sum() == pytest.approx(1.0, abs=1e-12)
    assert law.n_emitted[0] == 0.0
    tail = law.n_emitted[::-1].cumsum()[::-1]  # P(n_emitted >= m)
    np.testing.assert_allclose(law.emitted.sum(axis=-1), tail[1:], atol=1e-12)
    np.testing.assert_allclose(law.final.sum(axis=-1), law.accepted, atol=1e-12)
    tree = verify_law_tree(lambda pre: p[len(pre)], lambda pre: q[len(pre)], gamma, rule)
    for f in ("accepted", "n_emitted", "final", "emitted"):
        np.testing.assert_allclose(getattr(tree, f), getattr(law, f), atol=1e-12, err_msg=f)
    mean = law.accepted @ np.arange(gamma + 1)
    assert law.mean_accepted == pytest.approx(mean, abs=1e-12)


@pytest.mark.parametrize("rule", ALL_RULES)
@pytest.mark.parametrize("gamma", [1, 3])
def test_tree_law_with_markov_rows_is_the_round_law(rule: str, gamma: int) -> None:
    """Rows that depend on the drafted prefix: a Markov target and draft (the last drafted
    token is the context) -- the tree must give exact.round_law's numbers."""
    P = random_table(1, 2.5)
    Q = blend(P, random_table(2, 2.5), 0.7)
    Q[:, 0] = 0.0  # the draft never proposes token 0
    Q /= Q.sum(axis=1, keepdims=True)
    for start in range(P.shape[0]):
        def row(table: np.ndarray, start: int = start):
            return lambda pre: table[pre[-1] if pre else start]
        tree = verify_law_tree(row(P), row(Q), gamma, rule)
        law = round_law(P, Q, gamma, rule)
        np.testing.assert_allclose(tree.accepted, law.accepted[start], atol=1e-13)
        np.testing.assert_allclose(tree.n_emitted, law.tokens[start], atol=1e-13)
        first = exact.first_tokens_distribution(P, Q, start, gamma, rule, 2).sum(axis=1)
        np.testing.assert_allclose(tree.first_token, first, atol=1e-13)


def test_tree_refuses_to_grow_past_max_rows() -> None:
    p = np.full(4, 0.25)
    with pytest.raises(ValueError, match="max_rows"):
        verify_law_tree(lambda pre: p, lambda pre: p, 6, max_rows=100)


# ---------------------------------------------------------------------------------------------
# 5. one core: the pieces, the rules, and the engine's tabulated path
# ---------------------------------------------------------------------------------------------
def test_rules_registry() -> None:
    assert CLASSIC_RULES == engine.RULES == exact.RULES
    assert [r for r in CLASSIC_RULES if RULES[r].lossless] == ["correct"]
    assert [r for r, s in RULES.items() if s.scheme is not None] == ["correct", *list(RULES)[4:]]
    for name, spec in RULES.items():
        assert spec.name == name and "\n" not in spec.meaning and spec.meaning
        assert rule_spec(name) is spec and rule_spec(spec) is spec
    with pytest.raises(ValueError, match="unknown rule"):
        rule_spec("nucleus")


def test_accept_is_u_below_the_acceptance_probability() -> None:
    """The division-free test (rows) and the tabulated probability (Markov cells) agree."""
    rng = np.random.default_rng(13)
    p = random_rows(rng, (2000,), 6)
    q = random_rows(rng, (2000,), 6)
    a = acceptance_probability(p, q)
    assert ((a >= 0) & (a <= 1)).all()
    np.testing.assert_array_equal(a[(q == 0) & (p > 0)], 1.0)
    np.testing.assert_array_equal(a[p == 0], 0.0)
    u = rng.random(p.shape)
    assert np.array_equal(accept(u, p, q), u < a)
    g = acceptance_probability(p, q, "greedy")
    assert np.array_equal(g.argmax(axis=-1), p.argmax(axis=-1)) and (g.sum(-1) == 1).all()


@pytest.mark.parametrize("rule", ALL_RULES)
def test_markov_engine_round_is_the_core_on_the_kernels_rows(rule: str) -> None:
    """The engine tabulates the core per (context, token) cell; on the same uniforms it
    accepts the same drafts and draws the same final token as verify_uniforms on the rows."""
    P = random_table(1, 2.5)
    Q = blend(P, random_table(2, 2.5), 0.6)
    kernel = engine.MarkovKernel(P, Q)
    rng = np.random.default_rng(14)
    n, gamma = 20_000, 3
    ctx = rng.integers(0, P.shape[0], n)
    u = rng.random((2 * gamma + 1, n))
    res = kernel.round(ctx, gamma, rule, u)
    contexts = np.vstack([ctx, res.x[:-1]])  # (γ, n): context of each drafted position
    rows_p = P[np.vstack([contexts, res.x[-1:]]).T]  # (n, γ+1, V)
    rows_q = Q[contexts.T]
    core = verify_uniforms(rows_p, rows_q, res.x.T, rule, u[gamma : 2 * gamma].T, u[2 * gamma])
    assert np.array_equal(core.accepted, res.n_accepted)
    assert np.array_equal(core.final, res.final)


# ---------------------------------------------------------------------------------------------
# 6. bad inputs: one-line ValueErrors
# ---------------------------------------------------------------------------------------------
_P = np.array([[0.5, 0.5], [0.3, 0.7]])
_Q = np.array([[0.6, 0.4]])
_X = np.array([1])


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"p": _P[0]}, "at least 2 axes"),
    ({"q": np.vstack([_Q, _Q])}, r"\(\.\.\., γ\+1, V\)"),
    ({"q": np.array([[0.5, 0.25, 0.25]])}, "vocabulary axis"),
    ({"p": _P[None], "q": _Q[None, None]}, "same leading"),
    ({"p": np.array([[0.5, 0.5], [-0.1, 1.1]])}, "negative entry"),
    ({"q": np.array([[np.nan, 1.0]])}, "non-finite"),
    ({"p": np.array([[np.inf, 0.0], [0.3, 0.7]])}, "non-finite"),
    ({"p": np.array([[2.0, 1.0], [0.3, 0.7]])}, "sums to 3"),
    ({"q": np.array([[0.6, 0.399]])}, "sums to 0.999"),
    ({"x": np.array([1.0])}, "integers"),
    ({"x": np.array([True])}, "integers"),
    ({"x": np.array([[1]])}, "shape"),
    ({"x": np.array([2])}, "outside 0..1"),
    ({"x": np.array([-1])}, "outside 0..1"),
    ({"rule": "nucleus"}, "unknown rule"),
    ({"rule": "typical"}, "played by specsim.schemes.typical"),
    ({"rng": None}, "rng is required"),
    ({"row_tol": -1.0}, "row_tol"),
    ({"p": "abc"}, "at least 2 axes|probabilities"),
    ({"p": _P.astype(str)}, r"real probabilities, got dtype <U\d+ \(text\)"),
    ({"q": _Q.astype(str)}, r"q must be an array of real probabilities.*text"),
    ({"p": _P.astype(bytes)}, r"real probabilities.*\(bytes\)"),
    ({"p": _P + 0.5j}, r"real probabilities, got dtype complex128 \(complex numbers\)"),
    ({"q": _Q + 0j}, r"q must be an array of real probabilities.*complex"),
    ({"q": [[0.6, 0.4j]]}, "complex"),
    ({"p": _P.astype(object)}, r"got dtype object \(Python objects\)"),
    ({"p": [["0.5", "0.5"], ["0.3", "0.7"]]}, r"\(text\)"),
])
def test_bad_inputs_raise_one_line_value_errors(kwargs: dict, match: str) -> None:
    args = {"p": _P, "q": _Q, "x": _X, "rule": "correct", "rng": 0, "row_tol": 1e-4} | kwargs
    with pytest.raises(ValueError, match=match) as err:
        verify(args["p"], args["q"], args["x"], args["rule"], rng=args["rng"],
               row_tol=args["row_tol"])
    assert "\n" not in str(err.value)


def test_rows_within_tolerance_are_renormalised() -> None:
    p32 = np.array([[0.3, 0.7], [0.5, 0.5]], dtype=np.float32) * np.float32(1.00001)
    pa, _ = check_round(p32, _Q)
    assert pa.dtype == np.float64
    np.testing.assert_allclose(pa.sum(axis=-1), 1.0, rtol=0, atol=4e-16)
    same, _ = check_round(_P, _Q)
    # rows summing to exactly 1 are untouched (two-term sums: one IEEE addition, 0.3 + 0.7 = 1)
    assert np.array_equal(same, _P)
    with pytest.raises(ValueError, match="sums to"):
        verify(_P * 1.001, _Q, _X, rng=0)
    assert verify(_P * 1.001, _Q, _X, rng=0, row_tol=1e-2).n_emitted.shape == ()


def test_exact_laws_validate_like_verify() -> None:
    with pytest.raises(ValueError, match="negative"):
        verify_law(np.array([[1.5, -0.5], [0.5, 0.5]]), _Q)
    with pytest.raises(ValueError, match="unknown rule"):
        verify_law(_P, _Q, "typical")
    with pytest.raises(ValueError, match=r"draft\(\)"):
        verify_law_tree(lambda pre: _P[0], lambda pre: np.array([0.5, 0.6]), 1)
    with pytest.raises(ValueError, match="V=2"):
        verify_law_tree(lambda pre: _P[0] if not pre else np.ones(3) / 3, lambda pre: _Q[0], 1)


def test_specsim_exports_verify_and_imports_light() -> None:
    import subprocess
    import sys

    assert specsim.verify is verify and specsim.VerifyResult is VerifyResult
    code = ("import sys, specsim; bad = [m for m in sys.modules if m.split('.')[0] in "
            "('pandas', 'scipy', 'matplotlib', 'yaml', 'pyarrow', 'torch')]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"



# ---------------------------------------------------------------------------------------------
# 7. the fast paths: long rows drawn by blocks, float32 read as it is, check=False
# ---------------------------------------------------------------------------------------------
def test_blocked_inverse_cdf_is_sample_rows_draw_for_draw_and_never_returns_a_zero() -> None:
    rng = np.random.default_rng(15)
    v = 5 * 64 + 13  # a ragged last block
    probs = random_rows(rng, (300,), v, zero_frac=0.6)
    probs[:100, -3 * 64 :] = 0.0  # trailing empty blocks
    probs[100:200, :2 * 64] = 0.0  # leading empty blocks
    u = rng.random(300)
    u[:20] = np.nextafter(1.0, 0.0)  # u T may round up to T: clamped to the last positive token
    u[20:40] = 0.0
    for dtype in (np.float64, np.float32):
        rows = (probs * 3.0).astype(dtype)  # unnormalised rows
        got, total = inverse_cdf_blocked(rows, u, 64)
        # identity is the claim: the same cells up to rounding, which these uniforms never hit
        assert np.array_equal(got, sample_rows(rows.astype(np.float64), u))
        assert (rows[np.arange(300), got] > 0).all()
        np.testing.assert_allclose(total, rows.sum(axis=-1, dtype=np.float64), rtol=1e-12)


@pytest.mark.parametrize("rule", ALL_RULES)
def test_long_rows_equal_the_scalar_reference_draw_for_draw(rule: str) -> None:
    """V above BLOCK: the stop rows are drawn by blocks, from float32 rows read as they are."""
    rng = np.random.default_rng(16)
    n, gamma, v = 8, 2, BLOCK + 37
    p, q, x = mixed_case(rng, n, gamma, v)
    for dtype in (np.float64, np.float32):
        pd, qd = p.astype(dtype), q.astype(dtype)
        res = verify(pd, qd, x, rule, rng=np.random.default_rng(5))
        u = np.random.default_rng(5).random((n, gamma + 1))
        for i in range(n):
            acc, toks = reference_round(pd[i], qd[i], x[i], rule, u[i])
            assert res.accepted[i] == acc, (dtype, i)
            assert res.tokens[i].tolist() == toks + [PLACEHOLDER] * (gamma + 1 - len(toks))


@pytest.mark.parametrize("v", [7, 2 * BLOCK + 5])
def test_unchecked_valid_input_gives_the_checked_result(v: int) -> None:
    rng = np.random.default_rng(17)
    p, q, x = mixed_case(rng, 60, 3, v)
    for dtype in (np.float64, np.float32):
        for rule in ALL_RULES:
            a = verify(p.astype(dtype), q.astype(dtype), x, rule, rng=3)
            b = verify(p.astype(dtype), q.astype(dtype), x, rule, rng=3, check=False)
            # identity is the claim: check=False skips reads of the values, not arithmetic
            assert all(np.array_equal(getattr(a, f), getattr(b, f))
                       for f in ("accepted", "tokens", "n_emitted"))


def test_unchecked_bad_input_is_undefined_but_does_not_crash_the_process() -> None:
    """check=False on NaN, infinite, negative, unnormalised or all-zero rows: some tokens in
    0..V-1 (or -1 padding), no error -- in a child process, so a crash would show here."""
    import subprocess
    import sys

    code = """
import numpy as np, specsim
for v in (5, 5000):
    rng = np.random.default_rng(0)
    p = rng.random((8, 3, v)); q = rng.random((8, 2, v))
    bad = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf, "neg": -0.5, "big": 1e300}
    for name, value in bad.items():
        for where in ("p", "q"):
            a, b = p.copy(), q.copy()
            (a if where == "p" else b)[1, 0, :3] = value
            for dtype in (np.float64, np.float32):
                for rule in ("correct", "greedy", "no_resample", "continue"):
                    r = specsim.verify(a.astype(dtype), b.astype(dtype),
                                       np.zeros((8, 2), int), rule, rng=1, check=False)
                    assert ((r.tokens >= -1) & (r.tokens < v)).all(), (name, v)
    z = specsim.verify(np.zeros((4, 3, v)), np.zeros((4, 2, v)), np.zeros((4, 2), int),
                       rng=1, check=False)
    assert ((z.tokens >= -1) & (z.tokens < v)).all()
print("alive")
"""
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True,
                         text=True, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "alive"


def test_checks_read_float32_as_it_is_and_refuse_like_float64() -> None:
    p32, q32 = _P.astype(np.float32), _Q.astype(np.float32)
    assert verify(p32, q32, _X, rng=0).tokens.shape == (2,)
    for bad, match in ((np.array([[0.5, 0.5], [np.nan, 1.0]]), "non-finite entry nan"),
                       (np.array([[0.5, 0.5], [-0.25, 1.25]]), "negative entry -0.25"),
                       (np.array([[0.5, 0.5], [0.3, 0.6]]), r"row \(1,\) of p sums to 0.9")):
        for dtype in (np.float64, np.float32):
            with pytest.raises(ValueError, match=match) as err:
                verify(bad.astype(dtype), q32, _X, rng=0)
            assert "\n" not in str(err.value)
    big = np.full((2, 3, 70_000), 1 / 70_000)  # long rows: the checks go slice by slice
    big[1, 2, 5] = -1e-9
    with pytest.raises(ValueError, match=r"negative entry .* at index \(1, 2, 5\)"):
        verify(big, big[:, :2], np.zeros((2, 2), int), rng=0)
