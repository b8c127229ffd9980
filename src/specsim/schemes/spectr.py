"""k independent drafts verified by SpecTr's K-SEQ draft selection (a scheme of :mod:`.base`).

Sun, Suresh, Ro, Beirami, Jain & Yu 2023, "SpecTr: Fast Speculative Decoding via Optimal
Transport" (arXiv 2310.15141), cited as [S]: the draft selection algorithm K-SEQ, applied at
every depth to the drafts that survive (SpecTr's token-tree decoding). Knob ``drafts`` = k >= 1.

K-SEQ on one step, m candidates y_1..y_m i.i.d. q, target p, division factor ρ in [1, m]:
β(ρ) = Σ_x min(q(x), p(x)/ρ); for j = 1..m accept y_j with probability
min(1, p(y_j)/(ρ q(y_j))) (:func:`specsim.verify.accept` on p/ρ) and stop; if all m are
rejected (probability (1 - β)^m) emit a token of the residual
p_res(x) = (p(x) - min(q(x), p(x)/ρ) (1 - (1 - β)^m)/β) / (1 - β)^m. The accepted token has law
min(q, p/ρ) (1 - (1-β)^m)/β, so the output has law p whenever (1 - (1-β)^m)/β <= ρ; [S] takes
ρ* the root of 1 - (1 - β(ρ))^m = ρ β(ρ) (ρ β(ρ) = Σ min(ρ q, p) grows with ρ, 1 - (1-β)^m
falls: one root in [1, m]), where the acceptance 1 - (1 - β)^m is largest among valid ρ, and
p_res vanishes wherever q >= p/ρ*. Here ρ* is found by bisection to the last bit (the upper end
of the bracket, so the selection stays valid), per context and per m; the residual is clipped
at 0 and renormalised (rounding only). m = 1 gives ρ* = 1: Algorithm 1 ([L], the ``correct``
rule) exactly.

Multi-step ([S] §5, SpecTr): depth by depth the survivors -- the drafts whose tokens so far
equal the emitted ones, m of them, their next tokens i.i.d. Q(.|c) -- go through K-SEQ with m
candidates in draft-index order. An accepted token is emitted; its survivors are *all* m drafts
carrying it, including earlier candidates rejected by their coin (unlike recursive rejection
sampling, K-SEQ's test does not change after a rejection, so a rejected token can be accepted
later). If all are rejected, the residual token ends the round; past depth γ a bonus token from
P. Lossless: each emitted token has the target's law given the ones before it.

Exact law: the (context, survivors) chain of :mod:`.survivors`. Accepting a at the j-th test
has mass (1-β)^{j-1} min(q(a), p(a)/ρ); given that, each of the j-1 rejected candidates carries a
with probability (q(a) - min(q(a), p(a)/ρ))/(1-β) and each of the m-j untested ones with q(a),
independently, so the survivors are 1 + Binomial(j-1, .) + Binomial(m-j, q(a)).
``tests/unit/schemes/test_scheme_spectr.py`` checks it against a brute-force enumeration of draft
tuples and coin outcomes in exact rational arithmetic (at the float ρ*).
"""

from __future__ import annotations

import hashlib
from math import comb
from typing import Final

import numpy as np
from numpy.typing import ArrayLike

from specsim.sampling import TableSampler
from specsim.schemes import survivors
from specsim.schemes.base import Knobs
from specsim.schemes.law import BoolArray, FloatArray, IntArray, LawSize, RoundSample
from specsim.schemes.survivors import BUDGET, Kernel, checked_drafts
from specsim.verify import accept

__all__ = ["BUDGET", "division_factor", "footprint", "law", "play", "selection",
           "sequence_law"]

_BISECTIONS: Final = 80  # [1, m] halved 80 times: below the float spacing near m <= 64


def division_factor(P: FloatArray, Q: FloatArray, m: int) -> FloatArray:
    """ρ* per row of (P, Q) for m candidates ([S] K-SEQ): the smallest ρ in [1, m] with
    ρ β(ρ) >= 1 - (1 - β(ρ))^m, by bisection (the bracket's upper end: always valid)."""
    lo, hi = np.ones(P.shape[0]), np.full(P.shape[0], float(m))
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        beta = np.minimum(Q, P / mid[:, None]).sum(axis=1)
        ok = mid * beta >= 1.0 - (1.0 - beta) ** m
        hi, lo = np.where(ok, mid, hi), np.where(ok, lo, mid)
    ok_low = np.minimum(Q, P).sum(axis=1) >= 1.0 - (1.0 - np.minimum(Q, P).sum(axis=1)) ** m
    return np.where(ok_low, 1.0, hi)


def selection(P: FloatArray, Q: FloatArray, k: int) -> tuple[FloatArray, FloatArray, FloatArray]:
    """For m = 1..k candidates at every context: (ρ* (k, S), accepted mass per candidate
    min(Q, P/ρ*) (k, S, S), residual law (k, S, S))."""
    rho = np.stack([division_factor(P, Q, m) for m in range(1, k + 1)])
    acc = np.minimum(Q, P / rho[..., None])
    beta = acc.sum(axis=-1, keepdims=True)
    m = np.arange(1, k + 1, dtype=np.float64)[:, None, None]
    p_acc = 1.0 - (1.0 - beta) ** m
    scale = np.divide(p_acc, beta, out=np.zeros_like(beta), where=beta > 0)
    left = np.clip(P - acc * scale, 0.0, None)
    z = left.sum(axis=-1, keepdims=True)
    res = np.where(z > 0, left / np.where(z > 0, z, 1.0), P)
    return rho, acc, res


def _kernel(P: FloatArray, Q: FloatArray, k: int) -> Kernel:
    size = P.shape[0]
    _, acc, res = selection(P, Q, k)
    beta = acc.sum(axis=-1)  # (k, S)
    trans = np.zeros((size, k, P.shape[1], k))  # rows may be any contexts (a trace's)
    for m in range(1, k + 1):
        a = acc[m - 1]  # (S, S)
        u = Q - a  # a candidate rejected and carrying this token
        v = np.clip(1.0 - beta[m - 1][:, None] - u, 0.0, None)  # rejected, another token
        for j in range(1, m + 1):  # j-1 rejections, then a accepted; m-j untested
            for x in range(j):
                before = comb(j - 1, x) * u**x * v ** (j - 1 - x)
                for y in range(m - j + 1):
                    after = comb(m - j, y) * Q**y * (1.0 - Q) ** (m - j - y)
                    trans[:, m - 1, :, x + y] += a * before * after
    stop = ((1.0 - beta) ** np.arange(1, k + 1)[:, None]).T.copy()
    return Kernel(trans=trans, stop=stop, final=np.moveaxis(res, 0, 1).copy())


# K-SEQ on the chain of :mod:`.survivors`: the round's law, sequence law and window law
RULE: Final = survivors.Rule("spectr", _kernel,  # K-SEQ's bisection per m, its (j, x, y) loops
                             row_seconds=lambda v, k: 5e-7 * v * k + 5e-8 * v * k**3)
law: Final = RULE.law
sequence_law: Final = RULE.sequence_law


_PLAYED: dict[tuple[bytes, int], tuple[FloatArray, FloatArray]] = {}


def _played_selection(P: FloatArray, Q: FloatArray, k: int) -> tuple[FloatArray, FloatArray]:
    """(ρ*, residual laws) of :func:`selection` for :func:`play`, computed once for equal
    tables among the last few asked for: a point job plays every round on the same tables
    (as :meth:`specsim.sampling.TableSampler.of` keeps its samplers)."""
    key = (hashlib.blake2b(np.ascontiguousarray(P).tobytes() + b"|" +
                           np.ascontiguousarray(Q).tobytes(), digest_size=16).digest()
           + repr(P.shape).encode(), k)
    got = _PLAYED.pop(key, None)
    if got is None:
        rho, _, res = selection(P, Q, k)
        rho.setflags(write=False)
        res.setflags(write=False)
        got = (rho, res)
        while len(_PLAYED) >= 4:
            _PLAYED.pop(next(iter(_PLAYED)))
    _PLAYED[key] = got
    return got


def play(P: ArrayLike, Q: ArrayLike, state: ArrayLike, gamma: int, knobs: Knobs,
         rng: np.random.Generator) -> RoundSample:
    """One SpecTr round for n chains at once from contexts ``state`` (n,): K-SEQ at every
    depth on the survivors, in draft-index order. Uniforms per round: k γ for the drafts, k γ
    for the tests (drawn whether or not a test happens), γ for the residual tokens, 1 bonus."""
    P, Q, s, g, k = survivors.checked_round(P, Q, state, gamma, knobs, "spectr")
    size, n = P.shape[0], s.size
    rho, res = _played_selection(P, Q, k)
    draw_r = TableSampler.of(res.reshape(k * size, size))

    def depth(cur: IntArray, live: BoolArray, alive: BoolArray, y: IntArray,
              rng: np.random.Generator) -> tuple[IntArray, BoolArray]:
        m = np.maximum(alive.sum(axis=1), 1)  # the survivors of live chains
        r = rho[m - 1, cur]
        taken, _ = survivors.first_accepted(
            live, alive, y, lambda u, t, j: accept(u, P[cur, t] / r, Q[cur, t]), rng)
        ended = live & (taken < 0)
        return np.where(ended, draw_r((m - 1) * size + cur, rng.random(n)), taken), ended

    return survivors.play_depths(P, Q, s, g, k, depth, rng)


def footprint(size: int, support: int, gamma: int, knobs: Knobs | None,
              chains: int) -> LawSize:
    """What :func:`law` and :func:`play` cost with k = ``drafts`` on S = ``size`` contexts:
    the (S k)^2 transition (None beyond :data:`BUDGET`), ρ* by bisection (80 passes over k
    (S, S) tables), the O(k^3) binomial sums, the carried (S, S k) law, the (S, S, S) pair law;
    a round holds the residuals' samplers and k γ drafts per chain."""
    k = checked_drafts(knobs or {}, "spectr")
    sk, s2, n = float(size * k), float(size) ** 2, float(chains)
    law = (2 * sk * sk + 12 * k * s2 + 4 * size * sk + 3 * s2 * k + 2.0 * size**3,
           survivors.law_work(size, k, gamma) + 4 * _BISECTIONS * k * s2 + 6 * k**3 * s2)
    samplers = (TableSampler.cells(k * size, size), TableSampler.work(k * size, size)
                + 2 * TableSampler.work(size, size))
    return survivors.law_size("spectr", size, k, chains, law if sk * sk <= BUDGET else None,
                              (6 * k * s2 + samplers[0] + 3 * n * k * gamma
                               + 2 * n * (gamma + 1) + 14 * n,
                               samplers[1] + 4 * _BISECTIONS * k * s2
                               + 10 * n * gamma * (6 * k + 12)))
