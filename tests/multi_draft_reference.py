"""What the tests of the k-draft rules and of the scheme contract share (test_scheme_contract.py,
test_scheme_multi_draft.py, _spectr, _optimal, _wor, _tree, _traversal): their tables, the
brute-force enumeration of draft tuples their references walk, and the comparisons of a rule's
exact law with a reference, of its emitted sequence with the target's, and of its Monte Carlo
rounds with its law.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction as Fr
from typing import Any

import numpy as np
from mc import FAIL_PROB

from specsim.exact import RoundLaw, first_two_law, target_joint, tv
from specsim.models.iid import iid_frozen_markov
from specsim.models.maths import blend, one_hot_argmin, random_table, temper
from specsim.models.spec import ModelSpec
from specsim.schemes.law import RoundSample
from specsim.stats import gof_test

LEVEL = FAIL_PROB  # family-wise false-alarm probability of every Monte Carlo test (tests/mc.py)

TARGET = random_table(1, 2.5)
DRAFT = blend(TARGET, one_hot_argmin(TARGET), 0.55)  # the seed program's blended draft


def sparse_draft() -> np.ndarray:
    """A draft with zeros (tokens it never proposes) and rows unlike the target."""
    q = random_table(3, 4.0)
    q[q < 0.05] = 0.0
    return q / q.sum(axis=1, keepdims=True)


def stub(gamma: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The default config's ``stub`` (iid family) as its frozen position-indexed chain."""
    spec = ModelSpec(name="stub", family="iid", vocab=20, draft="noise", sigma=1.0, noise=0.3,
                     share="round", seed=7)
    return iid_frozen_markov(spec, 1.0, None, gamma + 1)


PAIRS = {"blend": (TARGET, DRAFT), "sparse": (TARGET, sparse_draft()),
         "other": (random_table(2, 1.0), random_table(5, 1.5)), "identical": (TARGET, TARGET),
         # a draft tempered near T = 0: entries down to ~1e-300, products of two underflow
         "cold": (TARGET, temper(TARGET, 0.01))}

# ---------------------------------------------------------------------------------------------
# the brute-force references' tables and steps, in exact rational arithmetic
# ---------------------------------------------------------------------------------------------
P3 = [[Fr(1, 2), Fr(1, 3), Fr(1, 6)], [Fr(1, 5), Fr(0), Fr(4, 5)], [Fr(1, 3), Fr(1, 3), Fr(1, 3)]]
Q3 = [[Fr(1, 4), Fr(1, 2), Fr(1, 4)], [Fr(1, 2), Fr(1, 2), Fr(0)], [Fr(1, 3), Fr(1, 3), Fr(1, 3)]]
Q3B = [[Fr(0), Fr(1, 10), Fr(9, 10)], [Fr(1, 3), Fr(1, 3), Fr(1, 3)], [Fr(3, 5), Fr(2, 5), Fr(0)]]


def residual(r: list[Fr], q: list[Fr]) -> list[Fr]:
    """norm(max(r - q, 0)), or r itself when that has no mass."""
    d = [max(a - b, Fr(0)) for a, b in zip(r, q, strict=True)]
    z = sum(d)
    return [x / z for x in d] if z > 0 else list(r)


def draft_paths(q: Any, ctx: int, n: int) -> Iterator[tuple[tuple[int, ...], Any]]:
    """Every draft path of n tokens from ``ctx`` with its probability under ``q`` (rows of
    Fractions or floats), positive-mass paths only."""
    if n == 0:
        yield (), 1
        return
    for y, qy in enumerate(q[ctx]):
        if qy > 0:
            for rest, pr in draft_paths(q, y, n - 1):
                yield (y, *rest), qy * pr


def draft_tuples(q: Any, s: int, k: int,
                 gamma: int) -> Iterator[tuple[list[tuple[int, ...]], Any]]:
    """Every tuple of k independent draft paths of length γ from ``s``, with its probability."""
    for combo in itertools.product(list(draft_paths(q, s, gamma)), repeat=k):
        yield [c[0] for c in combo], math.prod(c[1] for c in combo)


# ---------------------------------------------------------------------------------------------
# comparisons
# ---------------------------------------------------------------------------------------------
def assert_law_matches(exact: RoundLaw, s: int, ref: Mapping[tuple[int, ...], Any]) -> None:
    """Row ``s`` of the exact law (tokens, next state, first tokens) equals that of the
    reference's sequences (Fractions or floats) to 1e-12."""
    size = exact.next_state.shape[1]
    tokens, nxt = np.zeros(exact.tokens.shape[1]), np.zeros(size)
    single, pair = np.zeros(size), np.zeros((size, size))
    for seq, pr in ref.items():
        tokens[len(seq)] += float(pr)
        nxt[seq[-1]] += float(pr)
        if len(seq) == 1:
            single[seq[0]] += float(pr)
        else:
            pair[seq[0], seq[1]] += float(pr)
    np.testing.assert_allclose(exact.tokens[s], tokens, rtol=0, atol=1e-12)
    np.testing.assert_allclose(exact.next_state[s], nxt, rtol=0, atol=1e-12)
    np.testing.assert_allclose(exact.single[s], single, rtol=0, atol=1e-12)
    np.testing.assert_allclose(exact.pair[s], pair, rtol=0, atol=1e-12)


def assert_lossless_law(exact: RoundLaw, p: np.ndarray) -> None:
    """Every row of the exact law is a law (tokens, next state) and the first two emitted
    tokens from every context have the target's law, two-token TV <= 1e-12."""
    np.testing.assert_allclose(exact.tokens.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(exact.next_state.sum(axis=1), 1.0, atol=1e-12)
    for s in range(p.shape[0]):
        assert tv(first_two_law(exact, s), target_joint(p, s, 2)) <= 1e-12


def assert_sequences_match(paths: np.ndarray, probs: np.ndarray,
                           ref: Mapping[tuple[int, ...], Any], support: bool = True) -> None:
    """A rule's sequence law equals the reference's to 1e-12 per sequence; ``support``: and
    the sequences of mass above 1e-15 are the same on both sides."""
    got = {tuple(int(t) for t in row if t >= 0): float(pr)
           for row, pr in zip(paths, probs, strict=True)}
    if support:
        got = {seq: pr for seq, pr in got.items() if pr > 1e-15}
        ref = {seq: pr for seq, pr in ref.items() if pr > Fr(1, 10**15)}
        assert got.keys() == ref.keys()
    for seq in set(got) | set(ref):
        assert abs(got.get(seq, 0.0) - float(ref.get(seq, 0.0))) < 1e-12


def _completed(paths: np.ndarray, probs: np.ndarray, p: np.ndarray, start: int,
               length: int) -> dict[int, float]:
    """The law of ``length`` tokens when each sequence is continued by the target's own
    sampling from its last token (from ``start`` if empty), keyed by the sequence's code
    sum_j (t_j + 1) (S + 1)^j."""
    rows = np.full((paths.shape[0], length), -1)
    rows[:, : paths.shape[1]] = paths
    for pos in range(length):
        short = rows[:, pos] < 0
        if not short.any():
            continue
        ctx = np.full(int(short.sum()), start) if pos == 0 else rows[short, pos - 1]
        item, nxt = np.nonzero(p[ctx])  # only the target's positive transitions
        ext = rows[short][item]
        ext[:, pos] = nxt
        rows = np.concatenate([rows[~short], ext])
        probs = np.concatenate([probs[~short], probs[short][item] * p[ctx][item, nxt]])
    codes = (rows + 1) @ (p.shape[0] + 1) ** np.arange(length)
    keys, inverse = np.unique(codes, return_inverse=True)
    return dict(zip(keys.tolist(), np.bincount(inverse, weights=probs).tolist(), strict=True))


def assert_sequence_lossless(sequence_law: Callable[..., tuple[np.ndarray, np.ndarray]],
                             p: np.ndarray, q: np.ndarray, gamma: int, k: int,
                             start: int) -> None:
    """A round's emitted sequence, continued by the target to γ+1 tokens, has the target's law
    of γ+1 tokens: each emitted token has the target's law given the ones before it."""
    paths, probs = sequence_law(p, q, gamma, {"drafts": k}, start)
    assert abs(probs.sum() - 1.0) < 1e-12
    ours = _completed(paths, probs, p, start, gamma + 1)
    target = _completed(np.empty((1, 0), dtype=np.intp), np.ones(1), p, start, gamma + 1)
    tv = 0.5 * sum(abs(ours.get(key, 0.0) - target.get(key, 0.0))
                   for key in ours.keys() | target.keys())
    assert tv < 1e-12


def assert_play_matches_law(sample: RoundSample, exact: RoundLaw, state: np.ndarray,
                            next_state: bool = False) -> None:
    """G-tests per start context, Bonferroni-corrected at :data:`LEVEL`: the rounds' token
    counts and first two tokens (or first token and "round over"), with ``next_state`` their
    next states too, against the exact law."""
    size = exact.next_state.shape[1]
    tests = (3 if next_state else 2) * size
    for s in range(size):
        mine = state == s
        tokens = np.bincount(sample.n_emitted[mine], minlength=exact.tokens.shape[1])
        assert gof_test(tokens, exact.tokens[s]).p_value > LEVEL / tests
        if next_state:
            nxt = np.bincount(sample.next_state[mine], minlength=size)
            assert gof_test(nxt, exact.next_state[s]).p_value > LEVEL / tests
        # the first two tokens, or the first and "round over": cells pair (S*S) then single (S)
        first, second = sample.tokens[mine, 0], sample.tokens[mine, 1]
        cell = np.where(second >= 0, first * size + second, size * size + first)
        joint = np.concatenate([exact.pair[s].ravel(), exact.single[s]])
        assert gof_test(np.bincount(cell, minlength=size * (size + 1)), joint).p_value > \
            LEVEL / tests


def assert_rounds_well_formed(sample: RoundSample, drafted: int, gamma: int,
                              state: Sequence[int] | np.ndarray) -> None:
    """n rounds of at most γ+1 tokens, -1 after the last, the next state the last token,
    ``drafted`` tokens proposed per round."""
    n = len(state)
    width = np.arange(gamma + 1)
    assert sample.tokens.shape == (n, gamma + 1)
    assert ((sample.n_emitted >= 1) & (sample.n_emitted <= gamma + 1)).all()
    assert ((sample.tokens >= 0) == (width < sample.n_emitted[:, None])).all()
    last = sample.tokens[np.arange(n), sample.n_emitted - 1]
    assert np.array_equal(sample.next_state, last)
    assert (sample.drafted == drafted).all()
