"""specsim.schemes.multi_draft_wor: k drafts whose tokens are distinct at each depth (RSD-C with
branching (k, 1, ..., 1)), recursive rejection sampling without replacement.

The exact law against a brute-force reference in exact rational arithmetic (every ordered tuple
of distinct first tokens, every continuation, every coin), Algorithm 1 at k = 1, losslessness,
play against law, refusals.
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
    residual,
)

from specsim.exact import first_two_law, round_law, target_joint, tv
from specsim.schemes.multi_draft_wor import law, limit


def reference_round(p, q, k: int, gamma: int, s: int) -> dict[tuple[int, ...], Fr]:
    """P(one round from s emits exactly this sequence), as [J] writes the round."""
    out: dict[tuple[int, ...], Fr] = defaultdict(Fr)

    def alg1(ctx: int, i: int, emitted: tuple[int, ...], prob: Fr) -> None:
        if i == gamma:
            for b, pb in enumerate(p[ctx]):
                out[(*emitted, b)] += prob * pb
            return
        for y, qy in enumerate(q[ctx]):
            if qy == 0:
                continue
            a = min(Fr(1), p[ctx][y] / qy)
            if a > 0:
                alg1(y, i + 1, (*emitted, y), prob * qy * a)
            if a < 1:
                for b, rb in enumerate(residual(p[ctx], q[ctx])):
                    out[(*emitted, b)] += prob * qy * (1 - a) * rb

    def first(r: list[Fr], left: list[Fr], prob: Fr, j: int) -> None:
        z = sum(left)
        if j == k or z == 0:
            for b, rb in enumerate(r):
                out[(b,)] += prob * rb
            return
        qj = [x / z for x in left]
        for y, qy in enumerate(qj):
            if qy == 0:
                continue
            a = min(Fr(1), r[y] / qy)
            if a > 0:
                alg1(y, 1, (y,), prob * qy * a)
            if a < 1:
                rest = list(left)
                rest[y] = Fr(0)
                first(residual(r, qj), rest, prob * qy * (1 - a), j + 1)

    if gamma >= 1:
        first(list(p[s]), list(q[s]), Fr(1), 0)
    return {seq: pr for seq, pr in out.items() if pr > 0}


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("gamma", [1, 3])
def test_lossless_and_algorithm_1_at_one_draft(pair: str, k: int, gamma: int) -> None:
    p, q = PAIRS[pair]
    exact = law(p, q, gamma, {"drafts": k})
    np.testing.assert_allclose(exact.tokens.sum(axis=1), 1.0, atol=1e-12)
    for s in range(p.shape[0]):
        assert tv(first_two_law(exact, s), target_joint(p, s, 2)) <= 1e-12
    if k == 1:
        np.testing.assert_allclose(exact.tokens, round_law(p, q, gamma, "correct").tokens,
                                   rtol=0, atol=1e-12)


def test_limit_and_bad_knobs_refused() -> None:
    assert limit(6, {"drafts": 4}) is None
    why = limit(64, {"drafts": 4})
    assert why is not None and "15249024" in why and "\n" not in why
    for knobs in ({}, {"drafts": 0}, {"drafts": 1.5}, {"drafts": 2, "z": 1}):
        with pytest.raises(ValueError, match="multi_draft_wor") as err:
            law(TARGET, DRAFT, 2, knobs)
        assert "\n" not in str(err.value)
