"""The best verification of k i.i.d. drafts at every depth: an optimal coupling from the LP.

Hu et al. 2025, "Towards Optimal Multi-draft Speculative Decoding" (arXiv 2502.18779) and
Khisti et al. 2024, "Multi-Draft Speculative Sampling: Canonical Architectures and Theoretical
Limits" (arXiv 2410.18234); the LP is SpecTr's optimal transport with membership cost (Sun et
al. 2023, arXiv 2310.15141, [S]). Knob ``drafts`` = k >= 1. A bound, not a production rule.

One step, m candidates X = (x_1..x_m) i.i.d. q, target p: a verification is a coupling of X
with the emitted Y ~ p; it accepts when Y is one of the candidates. The best acceptance is the
value of the LP over couplings, a max-flow from candidate multisets (mass = their multinomial
probability) to tokens (capacity p(y)) along "y is in the multiset"; by max-flow/min-cut

    alpha*_m(p, q) = min over token sets H of [ p(H) + 1 - q(H)^m ]

(a cut keeps the multisets inside H^m and the tokens of H; checked against a direct LP in
``tests/unit/schemes/test_scheme_multi_draft_optimal.py``). The minimising H is a prefix of the
tokens sorted by p/q ascending (at an optimum every x in H has p(x)/q(x) <= m q(H)^{m-1} <= that of
every x outside, by the exchange argument on the convex t^m), so :func:`optimal_acceptance` takes
the minimum over the V+1 prefixes. m = 1 gives Σ min(p, q), Algorithm 1's.

A round (multi-step): depth by depth the m survivors (the drafts whose tokens so far equal the
emitted ones; their next tokens i.i.d. Q(.|c)) are verified by one optimal coupling per (c, m):
accepted mass w(M, z) >= 0 for each multiset M of m candidates and token z in M, with
Σ_z w(M, z) <= P(M) and Σ_M w(M, z) <= p(z). Given M, z is emitted with probability
w(M, z)/P(M) and the survivors become the count of z in M; otherwise a token of the residual
norm(p - Σ_M w(M, .)) ends the round -- lossless by construction (the emitted law is
Σ_M w(M, .) + that residual's mass times it = p). The LP has many optimal couplings, and the
survivors -- so the multi-step law -- depend on which, so the coupling is pinned by three
objectives in turn, each LP keeping the earlier ones' values (to :data:`LP_TOL`, 1e-9;
:func:`solve_coupling`):

1. the acceptance Σ w, its maximum alpha*_m (checked against :func:`optimal_acceptance`);
2. the expected survivors Σ w(M, z) count_M(z), largest (more drafts carry on to the next
   depth);
3. Σ w(M, z) t(M, z), largest, for fixed weights t of (M, z) alone (:func:`tie_weights`, a
   hash of the multiset and the token): generic, so exactly one coupling is left -- the same
   whichever optimal vertex, variable order or HiGHS method the solver takes (the tests solve
   it with permuted variables, by simplex and by interior point, and without the third
   objective watch the first two leave couplings that differ).

Every depth is then optimal in acceptance; the round as a whole need not be the best over all
multi-step schemes (a coupling trading acceptance now for survivors later is not considered).

Exact law: the (context, survivors) chain of :mod:`.survivors` with these couplings. Vocabulary
limit: the LP of (c, m = k) has one row per multiset of k tokens of the row's support u,
C(u + k - 1, k); above :data:`MAX_MULTISETS` (3003: vocab 6 up to k = 10, vocab 20 up to k = 3,
vocab 77 at k = 2) the rule refuses before any job (:func:`limit`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from math import comb, factorial, prod
from typing import Final, Literal, cast

import numpy as np
from numpy.typing import ArrayLike

from specsim.resources import Footprint
from specsim.sampling import TableSampler
from specsim.schemes import survivors
from specsim.schemes.base import Knobs
from specsim.schemes.law import BoolArray, FloatArray, IntArray, LawSize, RoundSample
from specsim.schemes.survivors import Kernel, checked_drafts

__all__ = ["LP_TOL", "MAX_MULTISETS", "CouplingLP", "coupling", "coupling_lp", "footprint",
           "law", "limit", "optimal_acceptance", "play", "sequence_law", "solve_coupling",
           "tie_weights"]

MAX_MULTISETS: Final = 3003  # rows of one LP: multisets of k candidates
LP_TOL: Final = 1e-9  # each stage keeps the earlier stages' values within this
# the couplings and play's samplers of the last few (P, Q, k): play runs once per chunk of rounds
_CACHE: dict[tuple[bytes, bytes, int], tuple[Kernel, TableSampler, IntArray, TableSampler]] = {}


def optimal_acceptance(p: ArrayLike, q: ArrayLike, m: int) -> FloatArray:
    """alpha*_m per row of (p, q) (..., V): min over prefixes H of the tokens sorted by p/q
    ascending of p(H) + 1 - q(H)^m (tokens with q = 0 sort last, p = q = 0 are irrelevant)."""
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    with np.errstate(over="ignore"):  # p / q beyond 1e308 (q subnormal) sorts last: inf
        ratio = np.where(q > 0, p / np.where(q > 0, q, 1.0), np.inf)
    order = np.argsort(ratio, axis=-1, kind="stable")
    ph = np.cumsum(np.take_along_axis(p, order, axis=-1), axis=-1)
    qh = np.cumsum(np.take_along_axis(q, order, axis=-1), axis=-1)
    value = ph + 1.0 - np.minimum(qh, 1.0) ** m
    return cast(FloatArray, np.minimum(value.min(axis=-1), 1.0))  # H empty: 1


def limit(vocab: int, knobs: Knobs) -> str | None:
    """Why the exact couplings cannot be built on ``vocab`` tokens with these knobs (None if
    they can): C(vocab + k - 1, k) multisets in the largest LP, at most :data:`MAX_MULTISETS`."""
    k = checked_drafts(knobs, "multi_draft_optimal")
    rows = comb(vocab + k - 1, k)
    if rows <= MAX_MULTISETS:
        return None
    return (f"multi_draft_optimal with drafts={k} on vocab {vocab} needs LPs over C({vocab}+{k}"
            f"-1, {k}) = {rows} candidate multisets, more than {MAX_MULTISETS} (its vocabulary "
            f"limit); lower drafts or use a smaller vocab")


@dataclass(frozen=True)
class CouplingLP:
    """The LP of one context's couplings of m candidates: the multisets of m tokens of q's
    support (``sets``, their probabilities ``mass``) and one variable w(M, z) per multiset
    ``rows[i]`` and token ``cols[i]`` of it, with the count of that token in the multiset
    (``count``: the survivors it leaves) and its tie-break weight (``tie``, :func:`tie_weights`)."""

    p: FloatArray
    sets: list[tuple[int, ...]]
    mass: FloatArray
    rows: IntArray
    cols: IntArray
    count: FloatArray
    tie: FloatArray


def tie_weights(rows: IntArray, cols: IntArray, sets: list[tuple[int, ...]],
                vocab: int) -> FloatArray:
    """The third objective's weight of each variable w(M, z), in [0, 1): SplitMix64 (Steele,
    Lea & Flood 2014) of the key z + (V+1) Σ_j (M_j + 1) (V+1)^j, M's tokens ascending, its top
    53 bits -- a function of (M, z) alone, not of the LP's variable order, whose values obey no
    integer relation but by chance (~2^-53), so one coupling maximises it on the face the
    first two objectives leave."""
    base = vocab + 1
    keys = np.array([sum((t + 1) * base ** (j + 1) for j, t in enumerate(sets[r])) + c
                     for r, c in zip(rows.tolist(), cols.tolist(), strict=True)],
                    dtype=np.uint64)
    z = keys + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * 2.0**-53


def coupling_lp(p: FloatArray, q: FloatArray, m: int) -> CouplingLP:
    """The LP of one context's couplings of m candidates (:class:`CouplingLP`)."""
    support = np.flatnonzero(q > 0)
    sets = list(itertools.combinations_with_replacement(support.tolist(), m))
    if len(sets) > MAX_MULTISETS:
        raise ValueError(f"multi_draft_optimal: {len(sets)} candidate multisets (support "
                         f"{support.size}, m={m}), more than {MAX_MULTISETS}")
    mass = np.array([factorial(m) / prod(factorial(s.count(t)) for t in set(s))
                     * prod(q[t] for t in s) for s in sets])
    rows, cols, count = [], [], []
    for i, s in enumerate(sets):
        for t in sorted(set(s)):
            rows.append(i)
            cols.append(t)
            count.append(s.count(t))
    r, c = np.array(rows, dtype=np.intp), np.array(cols, dtype=np.intp)
    return CouplingLP(p, sets, mass, r, c, np.array(count, dtype=np.float64),
                      tie_weights(r, c, sets, p.size))


def solve_coupling(lp: CouplingLP, method: Literal["highs", "highs-ds", "highs-ipm"] = "highs",
                   order: IntArray | None = None) -> FloatArray:
    """The pinned coupling's w per variable of ``lp``: three LPs in turn, each keeping the
    earlier ones' values (to :data:`LP_TOL`) -- the largest acceptance Σ w, then the most
    expected survivors Σ w count, then the largest Σ w tie. ``method`` (any of scipy's HiGHS
    methods) and ``order`` (the variables' order in the LP, a permutation) do not change the
    answer beyond the solvers' tolerance: the tests solve it both ways."""
    # scipy's optimize is imported here, not with the module: every point job loads the
    # registry of schemes, and only this rule's jobs solve an LP (scipy.optimize costs
    # ~0.15 s of each job's start)
    from scipy import sparse
    from scipy.optimize import linprog

    nv, v = lp.rows.size, lp.p.size
    perm = np.arange(nv) if order is None else np.asarray(order)
    var = np.empty(nv, dtype=np.intp)
    var[perm] = np.arange(nv)  # variable i sits in column var[i]
    a_ub = sparse.vstack([
        sparse.csr_matrix((np.ones(nv), (lp.rows, var)), shape=(len(lp.sets), nv)),
        sparse.csr_matrix((np.ones(nv), (lp.cols, var)), shape=(v, nv))]).tocsr()
    b_ub: FloatArray = np.concatenate([lp.mass, lp.p])
    x = np.zeros(nv)
    for objective in (np.ones(nv), lp.count, lp.tie):
        # scipy-stubs' linprog declares no sparse A_ub, which HiGHS takes
        res = linprog(  # type: ignore[call-overload, unused-ignore]
            -objective[perm], A_ub=a_ub, b_ub=b_ub, bounds=(0, None), method=method,
            options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10})
        if res.status != 0:  # the previous stage's coupling stands
            break
        x = res.x[var]
        a_ub = sparse.vstack([a_ub, -sparse.csr_matrix(objective[perm])]).tocsr()
        b_ub = np.append(b_ub, -(float(-res.fun) - LP_TOL))
    return x


def coupling(p: FloatArray, q: FloatArray,
             m: int) -> tuple[list[tuple[int, ...]], FloatArray, FloatArray]:
    """The pinned optimal coupling for one context (:func:`solve_coupling`): the multisets of
    m candidates over q's support (their probabilities) and w (n_multisets, V), accepted mass,
    clipped inside its constraints."""
    lp = coupling_lp(p, q, m)
    x = solve_coupling(lp)
    sets, mass = lp.sets, lp.mass
    w = np.zeros((len(sets), p.size))
    w[lp.rows, lp.cols] = np.clip(x, 0.0, None)
    # rows inside the multiset's mass; a multiset whose mass underflows to 0 (a draft row with
    # entries below ~1e-154, e.g. tempered near T = 0) is never drawn and accepts nothing
    w[mass == 0] = 0.0
    over = np.divide(w.sum(axis=1), mass, out=np.zeros_like(mass), where=mass > 0)
    w /= np.maximum(over, 1.0)[:, None]
    col = w.sum(axis=0)  # columns inside p
    w *= np.where(col > p, p / np.where(col > 0, col, 1.0), 1.0)[None, :]
    return sets, mass, w


def _couplings(P: FloatArray, Q: FloatArray, k: int,
               table: bool) -> tuple[Kernel, list[int], list[FloatArray]]:
    """The kernel of :mod:`.survivors` from each row's LP couplings for m = 1..k candidates
    (rows of P, Q: any contexts, e.g. a trace's positions); with ``table``, also play's rows
    (one per (context, multiset) of (accept token 0..V-1, reject)) and their keys."""
    size, v = P.shape
    base = v + 1  # token v: the reject outcome and the padding digit of a multiset key
    if table and size * base ** k >= 2**62:
        raise ValueError(f"multi_draft_optimal: {size} x (V+1)^k = {size} x {base}^{k} "
                         f"multiset keys do not fit in 64 bits")
    trans, stop = np.zeros((size, k, v, k)), np.zeros((size, k))
    final = np.zeros((size, k, v))
    keys: list[int] = []
    rows: list[FloatArray] = []
    for c in range(size):
        for m in range(1, k + 1):
            sets, mass, w = coupling(P[c], Q[c], m)
            for i, s in enumerate(sets):
                for t in set(s):
                    trans[c, m - 1, t, s.count(t) - 1] += w[i, t]
                if table:  # a multiset of mass 0 (never drawn) rejects
                    row = np.append(w[i] / mass[i] if mass[i] > 0 else np.zeros(v), 0.0)
                    row[v] = max(1.0 - row[:v].sum(), 0.0)
                    rows.append(row)
                    digits = list(s) + [v] * (k - m)
                    keys.append(c * base**k + sum(d * base**j for j, d in enumerate(digits)))
            left = np.clip(P[c] - w.sum(axis=0), 0.0, None)
            z = left.sum()
            stop[c, m - 1] = z
            final[c, m - 1] = left / z if z > 0 else P[c]
    return Kernel(trans=trans, stop=stop, final=final), keys, rows


def _build(P: FloatArray, Q: FloatArray,
           k: int) -> tuple[Kernel, TableSampler, IntArray, TableSampler]:
    """The kernel of :mod:`.survivors`, plus play's sampler of a table with one row per
    (context, multiset of 1..k candidates) of (accept token 0..S-1, reject), the rows' sorted
    keys, and the sampler of the residuals (rows c k + m - 1); built once per (P, Q, k)."""
    key = (P.tobytes(), Q.tobytes(), k)
    if key in _CACHE:
        return _CACHE[key]
    kern, keys, rows = _couplings(P, Q, k, table=True)
    size, v = P.shape
    order = np.argsort(np.array(keys, dtype=np.int64), kind="stable")
    out = (kern, TableSampler(np.array(rows)[order]), np.array(keys, dtype=np.int64)[order],
           TableSampler(kern.final.reshape(size * k, v)))
    if len(_CACHE) > 8:
        _CACHE.clear()
    _CACHE[key] = out
    return out


def _kernel(P: FloatArray, Q: FloatArray, k: int) -> Kernel:
    survivors.refuse_beyond(limit, Q, k)
    key = (P.tobytes(), Q.tobytes(), k)
    return _CACHE[key][0] if key in _CACHE else _couplings(P, Q, k, table=False)[0]


# the couplings on the chain of :mod:`.survivors` (bounded by the vocabulary limit, not DP cells)
RULE: Final = survivors.Rule("multi_draft_optimal", _kernel, capped=False,  # 3 LPs per m
                             row_seconds=lambda v, k: 1.8e-2 * k)
law: Final = RULE.law
sequence_law: Final = RULE.sequence_law


def play(P: ArrayLike, Q: ArrayLike, state: ArrayLike, gamma: int, knobs: Knobs,
         rng: np.random.Generator) -> RoundSample:
    """One round for n chains at once: at every depth the survivors' tokens as a multiset,
    looked up in the coupling's table, one draw of (accepted token | reject), the residual on a
    reject. Uniforms per round: k γ drafts, γ couplings, γ residual tokens, 1 bonus."""
    P, Q, s, g, k = survivors.checked_round(P, Q, state, gamma, knobs, "multi_draft_optimal")
    size, n = P.shape[0], s.size
    _kernel(P, Q, k)  # the vocabulary limit
    _, draw_w, keys, draw_r = _build(P, Q, k)
    base = size + 1
    powers = base ** np.arange(k, dtype=np.int64)

    def depth(cur: IntArray, live: BoolArray, alive: BoolArray, y: IntArray,
              rng: np.random.Generator) -> tuple[IntArray, BoolArray]:
        m = np.maximum(alive.sum(axis=1), 1)
        digits = np.sort(np.where(alive, y, size), axis=1).astype(np.int64)
        code = cur.astype(np.int64) * base**k + digits @ powers
        row = np.minimum(np.searchsorted(keys, code), keys.size - 1)
        outcome = draw_w(row, rng.random(n))
        rejected = live & (outcome == size)
        taken = np.where(live & ~rejected, outcome, -1)
        return np.where(rejected, draw_r(cur * k + m - 1, rng.random(n)), taken), rejected

    return survivors.play_depths(P, Q, s, g, k, depth, rng)


def footprint(size: int, support: int, gamma: int, knobs: Knobs | None,
              chains: int) -> LawSize:
    """What :func:`law` and :func:`play` cost: 3 S k LPs of at most C(u + k - 1, k) multisets
    (u = ``support``) times k variables, the (S k)^2 transition and the (S, S k) carried law,
    play's samplers of S Σ_m C(u+m-1, m) rows of S + 1 outcomes (the LPs and samplers are
    built once per job and cached; the play estimate counts the samplers' cells, not their
    building). Beyond the vocabulary limit the law is None and :func:`limit` refuses."""
    k = checked_drafts(knobs or {}, "multi_draft_optimal")
    sets = sum(comb(support + m - 1, m) for m in range(1, k + 1))
    rows = float(size * sets)
    # built once per job (cached): 3 S k LPs (~1 ms each plus ~1e3 operations per variable)
    # and play's two samplers, alive from then on (one guide-table bound covers every sampler
    # of a call, as multi_draft's estimate counts them)
    samplers = Footprint(TableSampler.cells(int(rows) + size * k, size + 1)
                         + 2 * rows * (size + 1),
                         TableSampler.work(int(rows), size + 1) + TableSampler.work(size * k, size))
    lp = Footprint(30.0 * comb(support + k - 1, k) * k + 10 * size * size,
                   3e3 * size * sets * k + 6e6 * size * k, what="multi_draft_optimal LPs")
    built = lp.then(samplers)
    sk, s2 = float(size * k), float(size) ** 2
    law_fp = None
    if limit(support, {"drafts": k}) is None:
        law_fp = built.then(samplers.plus(Footprint(
            3 * sk * sk + 2 * s2 * k + 4 * size * sk + 2.0 * size**3,
            survivors.law_work(size, k, gamma)))).named(
            f"multi_draft_optimal exact law ({k} drafts on {size} states)")
    n = float(chains)
    play_fp = Footprint(2 * sk * sk + 3 * n * k * gamma
                        + 6 * n * k + 2 * n * (gamma + 1) + 14 * n,
                        2 * TableSampler.work(size, size) + 10 * n * gamma * (8 * k + 16),
                        what=f"simulation ({chains} chains at once)").plus(samplers)
    return LawSize(size, law_fp, play_fp)
