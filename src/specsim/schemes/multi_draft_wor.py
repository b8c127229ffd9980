"""k drafts whose tokens are sampled without replacement at each depth, verified by recursive
rejection sampling without replacement (a scheme of :mod:`.base`).

Jeon et al. 2024, "Recursive Speculative Decoding: Accelerating LLM Inference via Sampling
Without Replacement" (arXiv 2402.14160), RSD-C (constant branching), cited as [J]. Knob
``drafts`` = k >= 1; k = 1 is Algorithm 1 exactly.

Drafting: k sequences of length γ from context s whose tokens, at every depth, are distinct
among drafts sharing the prefix: their first tokens y_1..y_k are drawn from Q(.|s) without
replacement (y_j from Q(.|s) with y_1..y_{j-1} removed and renormalised; k is capped by the
row's support), and each sequence then continues as an order-1 Markov path of Q. No two drafts
share a first token, so past depth 0 each prefix has one draft: this is [J]'s draft tree with
branching (k, 1, ..., 1), k γ drafted tokens like ``multi_draft``'s.

Verification ([J] §3, recursive rejection sampling without replacement): at depth 0,
r_0 = P(.|s); for j = 1..k, with q_j = Q(.|s) without y_1..y_{j-1}, renormalised, accept y_j
w.p. min(1, r_{j-1}(y_j)/q_j(y_j)) and otherwise r_j = norm(max(r_{j-1} - q_j, 0))
(:func:`specsim.verify.residual`); if all are rejected a token of r_k ends the round. An
accepted y_j leaves one survivor, its draft, verified by Algorithm 1 at the later depths; past
depth γ a bonus token from P. Lossless ([J] Thm. 3.1): each emitted token has the target's law.
The drafts are not i.i.d., so the LP bound of :mod:`.multi_draft_optimal` (over i.i.d. drafts)
does not cover this rule.

Exact law: the (context, survivors) chain of :mod:`.survivors`; the first depth's kernel
enumerates every ordered tuple of distinct candidates (the residual depends on which tokens
were rejected), at most :data:`MAX_TUPLES` prefixes per context (:func:`limit`: refused before
any job beyond it).
"""

from __future__ import annotations

from math import perm
from typing import Final, cast

import numpy as np
from numpy.typing import ArrayLike

from specsim.sampling import TableSampler
from specsim.schemes import survivors
from specsim.schemes.base import Knobs
from specsim.schemes.law import FloatArray, IntArray, LawSize, RoundSample
from specsim.schemes.survivors import Kernel, checked_drafts
from specsim.verify import accept, residual

__all__ = ["MAX_TUPLES", "footprint", "law", "limit", "play", "sequence_law"]

MAX_TUPLES: Final = 200_000  # ordered tuples of k distinct candidates, per context


def limit(vocab: int, knobs: Knobs) -> str | None:
    """Why the exact law cannot be built on ``vocab`` tokens with these knobs (None if it can):
    vocab!/(vocab-k)! ordered candidate tuples per context, at most :data:`MAX_TUPLES`."""
    k = checked_drafts(knobs, "multi_draft_wor")
    tuples = perm(vocab, min(k, vocab))
    if tuples <= MAX_TUPLES:
        return None
    return (f"multi_draft_wor with drafts={k} on vocab {vocab} enumerates {tuples} ordered "
            f"candidate tuples per context, more than {MAX_TUPLES}; lower drafts")


def _first_depth(p: FloatArray, q: FloatArray, m: int) -> tuple[FloatArray, float, FloatArray]:
    """One context, m candidates without replacement: (P(accept a) (V,), P(all rejected),
    law of the token emitted then (V,)) by enumerating the ordered candidate tuples."""
    acc, rej = np.zeros(p.size), np.zeros(p.size)
    stop = 0.0

    def walk(r: FloatArray, left: FloatArray, mass: float, j: int) -> None:
        nonlocal stop
        z = left.sum()
        if j == m or z <= 0:  # all rejected (or no token left to propose)
            stop += mass
            rej[:] += mass * r
            return
        qj = left / z
        for y in np.flatnonzero(qj > 0):
            a = 1.0 if r[y] >= qj[y] else r[y] / qj[y]  # min(1, r/q), no overflow at tiny q
            acc[y] += mass * qj[y] * a
            if a < 1.0:
                rest = left.copy()
                rest[y] = 0.0
                walk(residual(r, qj), rest, mass * qj[y] * (1.0 - a), j + 1)

    walk(p, q.copy(), 1.0, 0)
    return acc, stop, (rej / stop if stop > 0 else p.copy())


def _kernel(P: FloatArray, Q: FloatArray, k: int) -> Kernel:
    survivors.refuse_beyond(limit, Q, k)
    size, v = P.shape  # rows may be any contexts (a trace's)
    trans, stop = np.zeros((size, k, v, k)), np.zeros((size, k))
    final = np.zeros((size, k, v))
    for c in range(size):
        for m in range(1, k + 1):  # only m = k (depth 0) and m = 1 (later depths) are reached
            acc, halt, res = _first_depth(P[c], Q[c], m)
            trans[c, m - 1, :, 0] = acc
            stop[c, m - 1], final[c, m - 1] = halt, res
    return Kernel(trans=trans, stop=stop, final=final)


# RSD-C on the chain of :mod:`.survivors` (bounded by the vocabulary limit, not by DP cells)
RULE: Final = survivors.Rule(  # a row enumerates Σ_m V!/(V-m)! ordered tuples, ~3 µs each
    "multi_draft_wor", _kernel, capped=False,
    row_seconds=lambda v, k: 3e-6 * sum(perm(v, m) for m in range(1, k + 1)))
law: Final = RULE.law
sequence_law: Final = RULE.sequence_law


def _pick(rows: FloatArray, u: FloatArray) -> IntArray:
    """One token per row of ``rows`` (n, V) (not normalised) by inverse CDF at u (n,)."""
    cdf = np.cumsum(rows, axis=1)
    hit = (cdf > (u * cdf[:, -1])[:, None]) & (rows > 0)
    return cast(IntArray, np.argmax(hit, axis=1))


def play(P: ArrayLike, Q: ArrayLike, state: ArrayLike, gamma: int, knobs: Knobs,
         rng: np.random.Generator) -> RoundSample:
    """One round for n chains at once: k first tokens without replacement, RRS without
    replacement on them ((n, V) rows per chain: the vocabulary limit keeps V small), then
    Algorithm 1 on the one surviving draft. Uniforms per round: k γ drafts, k tests, 1
    residual token at depth 0, 2 per later depth, 1 bonus."""
    P, Q, s, g, k = survivors.checked_round(P, Q, state, gamma, knobs, "multi_draft_wor")
    n = s.size
    survivors.refuse_beyond(limit, Q, k)
    draw_q, draw_p = TableSampler.of(Q), TableSampler.of(P)
    draw_r = TableSampler.of(residual(P, Q))
    chains = np.arange(n)
    left, r = Q[s].copy(), P[s].copy()
    taken = np.full(n, -1, dtype=np.intp)
    first = np.full((n, k), -1, dtype=np.intp)
    for j in range(k):  # draw y_j without replacement, test it while nothing was accepted
        has = left.sum(axis=1) > 0
        qj = left / np.where(has, left.sum(axis=1), 1.0)[:, None]
        y = _pick(np.where(has[:, None], qj, 1.0), rng.random(n))
        first[:, j] = np.where(has, y, -1)
        test = has & (taken < 0)
        ok = test & accept(rng.random(n), r[chains, y], qj[chains, y])
        taken = np.where(ok, y, taken)
        no = test & ~ok
        r = np.where(no[:, None], residual(r, qj), r)
        left[chains, y] = np.where(has, 0.0, left[chains, y])
    tokens = np.full((n, g + 1), -1, dtype=np.intp)
    n_emitted = np.zeros(n, dtype=np.intp)
    cur, live = s.copy(), np.ones(n, dtype=bool)
    stopped = taken < 0
    out = np.where(stopped, _pick(r, rng.random(n)), taken)
    survivors.emit_depth(tokens, n_emitted, cur, live, 0, out, stopped)
    prev = cur.copy()  # the survivor's draft continues from its first token
    for i in range(1, g):
        y = draw_q(prev, rng.random(n))
        prev = y
        ok = accept(rng.random(n), P[cur, y], Q[cur, y])
        out = np.where(ok, y, draw_r(cur, rng.random(n)))
        survivors.emit_depth(tokens, n_emitted, cur, live, i, out, ~ok)
    return survivors.finish_round(tokens, n_emitted, cur, live, g, draw_p, rng, k * g)


def footprint(size: int, support: int, gamma: int, knobs: Knobs | None,
              chains: int) -> LawSize:
    """What :func:`law` and :func:`play` cost: the enumeration of S k sets of ordered candidate
    tuples (Python-level work and one (V,) residual per prefix), the (S k)^2 transition and
    the carried law; a round holds (n, V) rows per chain for the first depth and the
    samplers."""
    k = checked_drafts(knobs or {}, "multi_draft_wor")
    tuples = float(sum(perm(support, min(m, support)) for m in range(1, k + 1)))
    sk, s2, n = float(size * k), float(size) ** 2, float(chains)
    law = (3 * sk * sk + 2 * s2 * k + 4 * size * sk + 2.0 * size**3,
           survivors.law_work(size, k, gamma) + 3e2 * size * k * tuples * (support + 10))
    return survivors.law_size(
        "multi_draft_wor", size, k, chains, law if limit(support, {"drafts": k}) is None else None,
        (TableSampler.cells(size, size) + 3 * s2 + 8 * n * size + 3 * n * k * gamma
         + 2 * n * (gamma + 1) + 14 * n,
         3 * TableSampler.work(size, size) + 40 * n * k * size + 10 * n * gamma * (4 * k + 16)))
