"""k independent drafts verified by multi-step speculative sampling (a scheme of :mod:`.base`).

Miao et al. 2023, "SpecInfer" (arXiv 2305.09781), §4 "multi-step speculative sampling" (MSS),
cited as [M]; compare Sun et al. 2023, "SpecTr" (arXiv 2310.15141), and recursive rejection
sampling (RRS). Knob ``drafts`` = k >= 1.

One round from context s (order-1 Markov target P, draft Q, rows = context):

1. k draft sequences of length γ are drawn independently from Q, each an order-1 Markov path
   from s.
2. Depth by depth, i = 0..γ-1: the *survivors* are the drafts whose first i tokens equal the i
   tokens accepted so far (all k at depth 0); c is the last accepted token (s at depth 0).
   Their depth-i tokens y_1..y_m, in draft-index order, duplicates included, are tested by RRS
   ([M] §4, MSS): r <- P(.|c); for j = 1..m accept y_j iff u Q(y_j|c) < r(y_j), u ~ U[0, 1)
   (:func:`specsim.verify.accept`, i.e. with probability min(1, r/Q)); on a rejection
   r <- norm(max(r - Q(.|c), 0)), or r itself when that has no mass
   (:func:`specsim.verify.residual`; that happens only when r = Q, where no rejection can
   happen in exact arithmetic). An accepted token is emitted, the survivors become those of
   the m drafts whose depth-i token equals it, and the next depth starts from it. If all m are
   rejected, one token is drawn from the final r and the round ends.
3. Past depth γ a bonus token is drawn from P(.|last accepted token).

Every emitted token has the target's law given the ones before it ([M] §4; RRS), so the scheme
is lossless; k = 1 is Leviathan et al.'s Algorithm 1 (the ``correct`` rule) exactly. Drafted
tokens per round are k γ: every drafted token is charged a draft call's share (a round costs
1 + k γ c), even though k drafts could share one batched draft call.

The exact law needs no enumeration of the m-tuples of candidates: the residual update does not
depend on which token was rejected, so the j-th test at context c uses the fixed row r_{j-1}(c)
(r_0 = P(.|c), r_j = residual(r_{j-1}, Q(.|c))), the candidates are i.i.d. Q(.|c), and
"rejected j-1 times, then a accepted" has mass prod_{l<j} rho_l(c) * min(Q(a|c), r_{j-1}(a)),
rho_l(c) = sum_x max(Q(x|c) - r_l(x), 0). The untested candidates j+1..m are still i.i.d.
Q(.|c), so m' - 1 ~ Binomial(m - j, Q(a|c)) of them survive with a. A rejected candidate never
equals a later accepted token (its r entry is 0 from then on). So a round is a Markov chain on
(context c, survivors m); :func:`law` is a forward DP over depths on it and
``tests/unit/schemes/test_scheme_multi_draft.py`` checks it against a brute-force enumeration of all
draft tuples and accept outcomes in exact rational arithmetic.
"""

from __future__ import annotations

from math import comb
from typing import Final, cast

import numpy as np
from numpy.typing import ArrayLike

from specsim.sampling import TableSampler
from specsim.schemes import survivors
from specsim.schemes.base import Knobs
from specsim.schemes.law import BoolArray, FloatArray, IntArray, LawSize, RoundSample
from specsim.schemes.survivors import BUDGET, Kernel, checked_drafts
from specsim.verify import accept, residual

__all__ = ["BUDGET", "KNOBS", "footprint", "law", "play", "residuals", "rrs", "sequence_law"]

KNOBS: Final = ("drafts",)


def residuals(P: FloatArray, Q: FloatArray, k: int) -> FloatArray:
    """r_0 = P, r_{j+1} = residual(r_j, Q), j < k, per context: (k+1, S, S) ([M] §4)."""
    res = np.empty((k + 1, *P.shape))
    res[0] = P
    for j in range(k):
        res[j + 1] = residual(res[j], Q)
    return res


def rrs(P: FloatArray, Q: FloatArray, k: int) -> tuple[FloatArray, FloatArray, FloatArray]:
    """RRS with i.i.d. candidates at every row (context) of P, Q (R, V): the residuals r_j
    (k+1, R, V), acc[j, c, a] = min(Q, r_j) (candidate j+1 is a and accepted given j
    rejections, (k, R, V)) and reach_j = prod_{l<j} rho_l (P(the first j rejected), (k+1, R))."""
    res = residuals(P, Q, k)
    acc = np.minimum(Q, res[:k])
    rho = np.maximum(Q - res[:k], 0.0).sum(axis=-1)  # (k, R): candidate j+1 rejected
    reach = np.concatenate([np.ones((1, P.shape[0])), np.cumprod(rho, axis=0)])
    return res, acc, reach


def _binomials(Q: FloatArray, k: int) -> FloatArray:
    """binom[t, x, c, a] = P(Binomial(t, Q[c, a]) = x), t, x = 0..k-1: how many of t untested
    candidates carry the accepted token a (each power (1 - Q)^e computed once, e < k)."""
    t, x = np.arange(k)[:, None], np.arange(k)[None, :]
    coef = np.array([[comb(a, b) for b in range(k)] for a in range(k)], dtype=np.float64)
    miss = (1.0 - Q) ** np.arange(k)[:, None, None]
    return cast(FloatArray,
                coef[..., None, None] * Q ** x[..., None, None] * miss[np.maximum(t - x, 0)])


def _kernel(P: FloatArray, Q: FloatArray, k: int) -> Kernel:
    """[M] §4 MSS (RRS with i.i.d. candidates) at every context, for 1..k candidates."""
    size = P.shape[0]
    res, acc, reach = rrs(P, Q, k)
    binom = _binomials(Q, k)
    trans = np.zeros((size, k, P.shape[1], k))  # rows may be any contexts (a trace's)
    for m in range(1, k + 1):
        for j in range(1, m + 1):  # rejected j-1 times, then accepted; m-j untested remain
            hit = reach[j - 1][:, None] * acc[j - 1]  # (S, S)
            trans[:, m - 1] += np.moveaxis(hit * binom[m - j], 0, -1)
    # final[c, m-1] = r_m(c), the law RRS holds after m rejections
    return Kernel(trans=trans, stop=reach[1:].T.copy(), final=np.moveaxis(res[1:], 0, 1))


def _window_step(P: FloatArray, Q: FloatArray, k: int) -> tuple[FloatArray, FloatArray]:
    """:func:`_kernel`'s ``trans`` summed over the emitted token, (R, k, k), and its ``stop``
    (R, k), without the (R, k, V, k) transition: each entry is the same sum in the same order
    (over the rejections j, then over the tokens one at a time), so the numbers are the
    kernel's to the bit. One candidate has no (V, k) blow-up: the kernel's own (numpy sums
    its token axis pairwise there, the contiguous one)."""
    if k == 1:
        kern = _kernel(P, Q, k)
        return kern.trans.sum(axis=2), kern.stop
    _, acc, reach = rrs(P, Q, k)
    binom = _binomials(Q, k)
    go = np.empty((P.shape[0], k, k))
    for m in range(1, k + 1):
        carried = np.zeros((k, *P.shape))  # [n-1, c, a]: m candidates, n carry the token a
        for j in range(1, m + 1):
            carried += reach[j - 1][:, None] * acc[j - 1] * binom[m - j]
        total = carried[..., 0].copy()
        for a in range(1, P.shape[1]):
            total += carried[..., a]
        go[:, m - 1] = total.T
    return go, reach[1:].T.copy()


# MSS ([M] §4) on the chain of :mod:`.survivors`: the round's law, sequence law and window law
RULE: Final = survivors.Rule("multi_draft", _kernel, window_step=_window_step)
law: Final = RULE.law
sequence_law: Final = RULE.sequence_law


def play(P: ArrayLike, Q: ArrayLike, state: ArrayLike, gamma: int, knobs: Knobs,
         rng: np.random.Generator) -> RoundSample:
    """One MSS round ([M] §4) for n chains at once from contexts ``state`` (n,).

    Loops over depth and candidate index only. Uniforms per round: k γ for the drafts, k γ
    for the tests (drawn whether or not a test happens), γ for the rejection tokens, 1 bonus.
    """
    P, Q, s, g, k = survivors.checked_round(P, Q, state, gamma, knobs, "multi_draft")
    size, n = P.shape[0], s.size
    res = residuals(P, Q, k)
    draw_r = TableSampler.of(res.reshape((k + 1) * size, size))

    def depth(cur: IntArray, live: BoolArray, alive: BoolArray, y: IntArray,
              rng: np.random.Generator) -> tuple[IntArray, BoolArray]:
        taken, rejected = survivors.first_accepted(  # the j-th test holds r_j
            live, alive, y, lambda u, t, j: accept(u, res[j, cur, t], Q[cur, t]), rng)
        ended = live & (taken < 0)
        return np.where(ended, draw_r(rejected * size + cur, rng.random(n)), taken), ended

    return survivors.play_depths(P, Q, s, g, k, depth, rng)


def footprint(size: int, support: int, gamma: int, knobs: Knobs | None,
              chains: int) -> LawSize:
    """What :func:`law` and :func:`play` cost with k = ``drafts`` on S = ``size`` contexts:
    the (S k)^2 transition (None beyond :data:`BUDGET`, where :func:`law` refuses), k^2 (S, S)
    binomials and the k + 1 residuals, the carried (S, S k) law and its product, the
    (S, S, S) pair law by einsum -- γ (S, S k) x (S k, S k) products. A round holds the
    residuals' samplers (built by the first call, :meth:`TableSampler.of`), k γ drafts per chain."""
    k = checked_drafts(knobs or {}, "multi_draft")
    sk, s2, n = float(size * k), float(size) ** 2, float(chains)
    law = (2 * sk * sk + (3 * k * k + 3 * (k + 1)) * s2 + 4 * size * sk + 3 * s2 * k
           + 2.0 * size**3, survivors.law_work(size, k, gamma))
    samplers = (TableSampler.cells((k + 1) * size, size), TableSampler.work((k + 1) * size, size)
                + 2 * TableSampler.work(size, size))  # built by every call
    return survivors.law_size("multi_draft", size, k, chains, law if sk * sk <= BUDGET else None,
                              (2 * (k + 1) * s2 + samplers[0] + 3 * n * k * gamma
                               + 2 * n * (gamma + 1) + 12 * n,
                               samplers[1] + 10 * n * gamma * (6 * k + 10)))
