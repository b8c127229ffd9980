"""The (context, survivors) chain the multi-draft rules share: k drafts verified depth by depth.

A multi-draft rule (:mod:`.multi_draft`, :mod:`.spectr`, :mod:`.multi_draft_optimal`) drafts k
order-1 Markov paths of length γ from Q and verifies them depth by depth: at depth i the
*survivors* are the drafts whose first i tokens equal the i tokens emitted so far (all k at
depth 0), their depth-i tokens are m i.i.d. draws of Q(.|c) (c the last emitted token: the
paths are Markov), and the rule either emits one of them -- the survivors become the drafts
carrying it -- or emits a token of its own law and ends the round. Past depth γ a bonus token
is drawn from P(.|c). A rule is then its :class:`Kernel`: for every (c, m) the law of
(accepted token, survivors) and of the rejection token; this module turns a kernel into the
exact law of a round (:func:`round_law`, forward DP over depths, O(γ S^3 k^2)) and into the
law of the emitted sequence from one start (:func:`sequence_law`); a rule module's ``law`` and
``sequence_law`` (the contract of :mod:`.base`) are those of its :class:`Rule`, its
``footprint`` counts the DP by :func:`law_work` and is named by :func:`law_size`. The rounds its
``play`` samples share their steps too: the checked inputs (:func:`checked_round`), the drafts
(:func:`draft_paths`), the depth loop (:func:`play_depths`: the rule gives one depth's
verification), the candidates tested in draft-index order (:func:`first_accepted`), each
depth's emitted token (:func:`emit_depth`) and the bonus token (:func:`finish_round`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from numbers import Integral
from typing import Final

import numpy as np
from numpy.typing import ArrayLike

from specsim.exact import RoundLaw
from specsim.resources import Footprint
from specsim.sampling import TableSampler
from specsim.schemes.base import Knobs
from specsim.schemes.law import (
    BoolArray,
    FloatArray,
    IntArray,
    LawSize,
    RoundSample,
    checked_pair,
    indexed_windows,
)

__all__ = ["BUDGET", "Kernel", "Rule", "checked_drafts", "checked_round", "checked_state",
           "checked_tables", "draft_paths", "emit_depth", "finish_round", "first_accepted",
           "law_size", "law_work", "play_depths", "refuse_beyond", "round_law", "sequence_law"]

KNOBS: Final = ("drafts",)
BUDGET: Final = 2**22  # cells of the DP's (context, survivors) transition, of a sequence's paths


def checked_drafts(knobs: Knobs, rule: str) -> int:
    """k from ``knobs`` = {"drafts": k}; one-line ValueError naming ``rule`` otherwise."""
    if not isinstance(knobs, Mapping):
        raise ValueError(f"{rule} knobs must be a mapping {{'drafts': k}}, got {knobs!r}")
    if set(knobs) != set(KNOBS):
        missing, extra = set(KNOBS) - set(knobs), sorted(map(str, set(knobs) - set(KNOBS)))
        raise ValueError(f"{rule} knobs must be exactly {list(KNOBS)}: "
                         f"missing {sorted(missing)}, unexpected {extra}")
    k = knobs["drafts"]
    if isinstance(k, bool) or not isinstance(k, Integral) or k < 1:
        raise ValueError(f"{rule} knob 'drafts' must be an integer >= 1, got {k!r}")
    return int(k)


def checked_tables(P: ArrayLike, Q: ArrayLike, gamma: int) -> tuple[FloatArray, FloatArray, int]:
    """Validated float tables (S, S) and γ."""
    P, Q = checked_pair(("P", P), ("Q", Q), "a square (S, S) table",
                        lambda a: a.ndim == 2 and a.shape[0] == a.shape[1] and a.shape[0] > 0)
    if isinstance(gamma, bool) or not isinstance(gamma, Integral) or gamma < 1:
        raise ValueError(f"gamma must be an integer >= 1, got {gamma!r}")
    return P, Q, int(gamma)


def checked_state(state: ArrayLike, size: int) -> IntArray:
    """Scheme states (n,) as contexts in [0, size); ValueError otherwise."""
    s = np.asarray(state)
    if s.ndim != 1 or not np.issubdtype(s.dtype, np.integer) or ((s < 0) | (s >= size)).any():
        raise ValueError(f"state must be a 1-D integer array of contexts in [0, {size})")
    return s.astype(np.intp)


def checked_round(P: ArrayLike, Q: ArrayLike, state: ArrayLike, gamma: int, knobs: Knobs,
                  rule: str) -> tuple[FloatArray, FloatArray, IntArray, int, int]:
    """A k-draft ``play``'s inputs, validated in this order: tables (S, S) and γ, k
    (``rule`` names the knobs' refusal), scheme states (n,): (P, Q, state, γ, k)."""
    P, Q, g = checked_tables(P, Q, gamma)
    k = checked_drafts(knobs, rule)
    return P, Q, checked_state(state, P.shape[0]), g, k


def refuse_beyond(limit: Callable[[int, Knobs], str | None], Q: FloatArray, k: int) -> None:
    """ValueError in ``limit``'s words when k drafts on the widest row of Q (its count of
    positive entries) are beyond a rule's vocabulary limit."""
    why = limit(int((Q > 0).sum(axis=1).max()), {"drafts": k})
    if why is not None:
        raise ValueError(why)


def law_work(size: int, k: int, gamma: int) -> float:
    """Operations of :func:`round_law` on S = ``size`` contexts and k drafts: γ
    (S, S k) x (S k, S k) products and the (S, S, S) pair law by einsum."""
    sk, s2 = float(size * k), float(size) ** 2
    return 2 * gamma * size * sk * sk + 2 * s2 * size * k


def law_size(rule: str, size: int, k: int, chains: int, law: tuple[float, float] | None,
             play: tuple[float, float]) -> LawSize:
    """A k-draft rule's ``footprint``: the (cells, operations) of its law (None where ``law``
    refuses) and of one ``play`` of ``chains`` chains, each named."""
    return LawSize(size, None if law is None else Footprint(
        *law, what=f"{rule} exact law ({k} drafts on {size} states)"),
        Footprint(*play, what=f"simulation ({chains} chains at once)"))


@dataclass(frozen=True)
class Kernel:
    """One depth of verification as a sub-stochastic kernel on (context c, survivors m).

    trans[c, m-1, a, n-1]  P(a survivor's token is emitted, it is a, and n drafts carry it on)
                           (S, k, S, k)
    stop[c, m-1]           P(no survivor's token is emitted: the round ends)            (S, k)
    final[c, m-1, :]       the law of the token emitted then                         (S, k, S)
    """

    trans: FloatArray
    stop: FloatArray
    final: FloatArray


def round_law(P: FloatArray, kern: Kernel, gamma: int) -> RoundLaw:
    """Exact law of one round from every context: forward DP over depths.

    Carries F[s, (c, m)] = P(start s, depth i reached at context c with m survivors); each
    depth is one (S, Sk) x (Sk, Sk) product. Drafted tokens per round: k γ.
    """
    size, k = kern.stop.shape
    sk, g = size * k, gamma
    trans, stop = kern.trans.reshape(sk, sk), kern.stop.reshape(sk)
    final = kern.final.reshape(sk, size)
    F = np.zeros((size, sk))
    F[np.arange(size), np.arange(size) * k + k - 1] = 1.0
    tokens, nxt = np.zeros((size, g + 2)), np.zeros((size, size))
    for i in range(g):
        halt = F * stop
        tokens[:, i + 1] = halt.sum(axis=1)
        nxt += halt @ final
        F = F @ trans
    tokens[:, g + 1] = F.sum(axis=1)
    nxt += F.reshape(size, size, k).sum(axis=2) @ P
    single = kern.stop[:, k - 1, None] * kern.final[:, k - 1]
    first = kern.trans[np.arange(size), k - 1]  # (s, a, m'): first token a, m' survivors
    if g == 1:
        second = np.broadcast_to(P[:, None, :], (size, k, size))
    else:  # second[a, m', b]: law of the next token from context a with m' survivors
        second = kern.trans.sum(axis=3) + kern.stop[..., None] * kern.final
    pair = np.einsum("sam,amb->sab", first, second)
    return RoundLaw(tokens=tokens, next_state=nxt, drafted=np.full(size, float(k * g)),
                    single=single, pair=pair, context=np.arange(size))


def _expand(row: IntArray, table: FloatArray) -> tuple[IntArray, IntArray, FloatArray]:
    """For items in rows ``row`` of ``table``: (item, column, value) of each non-zero entry."""
    r, c = np.nonzero(table)
    ptr = np.searchsorted(r, np.arange(table.shape[0] + 1))
    counts = ptr[row + 1] - ptr[row]
    item = np.repeat(np.arange(row.size), counts)
    at = ptr[row][item] + np.arange(item.size) - np.repeat(np.cumsum(counts) - counts, counts)
    return item, c[at], table[r[at], c[at]]


def sequence_law(P: FloatArray, kern: Kernel, gamma: int, start: ArrayLike, budget: int,
                 rule: str) -> tuple[IntArray, FloatArray]:
    """Exact law of the whole sequence one round from context ``start`` emits.

    Returns (paths (N, γ+1), distinct rows padded with -1 after the last token; their
    probabilities (N,)), enumerating only positive-mass branches of the (c, m) chain.
    Refuses more than ``budget`` path cells.
    """
    size, k = kern.stop.shape
    sk, g = size * k, gamma
    if isinstance(start, bool) or not isinstance(start, Integral) or not 0 <= int(start) < size:
        raise ValueError(f"start must be a context in [0, {size}), got {start!r}")
    trans = kern.trans.reshape(sk, sk)
    halt = kern.stop.reshape(sk, 1) * kern.final.reshape(sk, size)
    prefix = np.empty((1, 0), dtype=np.intp)  # accepted tokens of each live branch
    state, mass = np.array([start * k + k - 1]), np.ones(1)  # its (c, m) index, probability
    paths: list[IntArray] = []
    probs: list[FloatArray] = []
    for i in range(g + 1):  # emitted at depth i: a token of the final law, or the bonus
        item, tok, val = _expand(state, halt) if i < g else _expand(state // k, P)
        paths.append(np.column_stack([prefix[item], tok, np.full((item.size, g - i), -1)]))
        probs.append(mass[item] * val)
        if i == g:
            break
        item, col, val = _expand(state, trans)
        if item.size * (g + 1) > budget:
            raise ValueError(f"{rule} sequence_law needs at least {item.size * (g + 1)} "
                             f"path cells, more than budget={budget}")
        prefix, state, mass = np.column_stack([prefix[item], col // k]), col, mass[item] * val
    return _merge_rows(np.concatenate(paths), np.concatenate(probs))


def _merge_rows(rows: IntArray, mass: FloatArray) -> tuple[IntArray, FloatArray]:
    """Distinct rows of ``rows`` (N, L) in lexicographic order, with their summed ``mass``
    (an integer lexsort: ``np.unique(axis=0)`` sorts opaque byte strings, far slower)."""
    if rows.shape[0] == 0:
        return rows, mass
    order = np.lexsort(rows.T[::-1])
    rows, mass = rows[order], mass[order]
    new = np.concatenate([[True], (rows[1:] != rows[:-1]).any(axis=1)])
    return rows[new], np.add.reduceat(mass, np.flatnonzero(new))


@dataclass(frozen=True)
class Rule:
    """A k-draft rule as the scheme contract (:mod:`.base`) sees it: its ``name`` (in every
    refusal) and ``kernel(P, Q, k) -> Kernel``, built from validated tables and knobs.
    ``capped``: the rule refuses a transition of more than ``budget`` cells, (S k)^2 (False: a
    vocabulary limit of its own bounds the kernel). ``row_seconds(V, k)``: one context's
    kernel on V tokens, measured on one core (:meth:`window_seconds`). A rule module's ``law`` and
    ``sequence_law`` are its Rule's."""

    name: str
    kernel: Callable[[FloatArray, FloatArray, int], Kernel]
    capped: bool = True
    row_seconds: Callable[[int, int], float] = lambda v, k: 1e-7 * v * k * k  # a row's kernel
    window_step: Callable[[FloatArray, FloatArray, int], tuple[FloatArray, FloatArray]] | None \
        = None  # rows -> the kernel's trans summed over tokens and its stop (default: by it)

    def law(self, P: ArrayLike, Q: ArrayLike, gamma: int, knobs: Knobs,
            budget: int = BUDGET) -> RoundLaw:
        """Exact law of one round from every context: forward DP over depths on the
        (context, survivors) chain (:func:`round_law`, O(γ S^3 k^2)). Refuses
        (S k)^2 > ``budget`` if the rule is capped."""
        P, g, kern = self._built(P, Q, gamma, knobs, budget)
        return round_law(P, kern, g)

    def sequence_law(self, P: ArrayLike, Q: ArrayLike, gamma: int, knobs: Knobs, start: int,
                     budget: int = BUDGET) -> tuple[IntArray, FloatArray]:
        """Exact law of the whole sequence one round from context ``start`` emits
        (:func:`sequence_law`: distinct paths (N, γ+1) padded with -1, their probabilities).
        Refuses more than ``budget`` path cells (and, if capped, (S k)^2 > ``budget``)."""
        P, g, kern = self._built(P, Q, gamma, knobs, budget)
        return sequence_law(P, kern, g, start, budget, self.name)

    def window_law(self, p: ArrayLike, q: ArrayLike, gamma: int, knobs: Knobs,
                   at: ArrayLike | None = None) -> tuple[FloatArray, FloatArray]:
        """The round's law from n starts of position-indexed rows p, q (n, γ+1, V), or rows
        (R, V) met as ``at`` says (the ``window_law`` of :mod:`.base`): there a depth's rows do
        not depend on the token emitted, so the (context, survivors) chain lumps to survivors
        alone -- the kernel of each row summed over tokens, a (k, k) step, once per distinct
        row -- and a round is a forward DP over depths on (n, k), O(R V k^2 + n γ k^2).
        Drafted tokens: k per depth."""
        g = int(gamma)
        rows_p, rows_q, at = indexed_windows(p, q, g, at)
        k = checked_drafts(knobs, self.name)
        n = at.shape[0]
        r, v = rows_p.shape
        go_row, stop_row = np.empty((r, k, k)), np.empty((r, k))
        step = max(1, BUDGET // (k * v * k))  # rows per kernel: (rows, k, V, k) cells
        for lo in range(0, r, step):
            go_row[lo:lo + step], stop_row[lo:lo + step] = self._window_step(
                rows_p[lo:lo + step], rows_q[lo:lo + step], k)
        go, stop = go_row[at[:, :g]], stop_row[at[:, :g]]  # (n, γ, ...): each depth's step
        F = np.zeros((n, k))
        F[:, k - 1] = 1.0  # all k drafts survive at depth 0
        tokens = np.zeros((n, g + 2))
        for i in range(g):
            tokens[:, i + 1] = (F * stop[:, i]).sum(axis=1)
            F = np.einsum("nm,nmj->nj", F, go[:, i])
        tokens[:, g + 1] = F.sum(axis=1)
        return tokens, k * np.arange(g + 1, dtype=np.float64)

    def _window_step(self, p: FloatArray, q: FloatArray,
                     k: int) -> tuple[FloatArray, FloatArray]:
        """Per row: the kernel's trans summed over the emitted token (R, k, k) and its stop."""
        if self.window_step is not None:
            return self.window_step(p, q, k)
        kern = self.kernel(p, q, k)
        return kern.trans.sum(axis=2), kern.stop

    def window_seconds(self, n: int, vocab: int, gamma: int, knobs: Knobs,
                       rows: ArrayLike | None = None) -> float:
        """Estimated seconds of :meth:`window_law` on n starts: n γ kernel rows."""
        k = checked_drafts(knobs, self.name)
        return 1e-3 + n * gamma * (self.row_seconds(vocab, k) + 1e-7 * k * k)

    def window_cells(self, n: int, vocab: int, gamma: int, knobs: Knobs) -> float:
        """Peak cells of :meth:`window_law` on n starts: a chunk's kernel (at most
        :data:`BUDGET` cells and as many of temporaries, x4) and the lumped steps."""
        k = checked_drafts(knobs, self.name)
        return 4.0 * min(BUDGET, n * gamma * k * vocab * k) + 2.0 * n * gamma * (k * k + k)

    def _built(self, P: ArrayLike, Q: ArrayLike, gamma: int, knobs: Knobs,
               budget: int) -> tuple[FloatArray, int, Kernel]:
        P, Q, g = checked_tables(P, Q, gamma)
        k = checked_drafts(knobs, self.name)
        cells = (P.shape[0] * k) ** 2
        if self.capped and cells > budget:
            raise ValueError(f"{self.name} needs (S*drafts)**2 = ({P.shape[0]}*{k})**2 = {cells} "
                             f"DP cells, more than budget={budget}")
        return P, g, self.kernel(P, Q, k)


#: one depth of a ``play`` (:func:`play_depths`): (cur, live, alive, drafts, rng) -> (out, ended)
Depth = Callable[[IntArray, BoolArray, BoolArray, IntArray, np.random.Generator],
                 tuple[IntArray, BoolArray]]


def play_depths(P: FloatArray, Q: FloatArray, start: IntArray, gamma: int, k: int, depth: Depth,
                rng: np.random.Generator) -> RoundSample:
    """One round of k i.i.d. draft paths for n chains from contexts ``start`` (n,): the drafts
    (:func:`draft_paths`), then at each depth i < γ the rule's ``depth(cur, live, alive,
    drafts, rng)`` -- from the chains' contexts ``cur``, which are still ``live``, their
    survivors ``alive`` (n, k) and the drafts' depth-i tokens (n, k): the token each chain
    emits and whether it is the rule's own (the round ends) -- (:func:`emit_depth`), then the
    bonus token (:func:`finish_round`); k γ drafted tokens per chain."""
    n = start.size
    draw_q, draw_p = TableSampler.of(Q), TableSampler.of(P)
    x = draft_paths(draw_q, start, k, gamma, rng)
    tokens = np.full((n, gamma + 1), -1, dtype=np.intp)
    n_emitted = np.zeros(n, dtype=np.intp)
    cur, live, alive = start.copy(), np.ones(n, dtype=bool), np.ones((n, k), dtype=bool)
    for i in range(gamma):
        out, ended = depth(cur, live, alive, x[:, :, i], rng)
        emit_depth(tokens, n_emitted, cur, live, i, out, ended, alive, x[:, :, i])
    return finish_round(tokens, n_emitted, cur, live, gamma, draw_p, rng, k * gamma)


def first_accepted(live: BoolArray, present: BoolArray, tokens: IntArray,
                   test: Callable[[FloatArray, IntArray, IntArray], BoolArray],
                   rng: np.random.Generator,
                   labels: IntArray | None = None) -> tuple[IntArray, IntArray]:
    """Candidates tested one at a time in column order until one passes (recursive rejection
    sampling, [M] §4; K-SEQ): on ``live`` chains each candidate token of ``tokens`` (n, k)
    that is ``present`` (n, k) meets ``test(u, y, j)`` (u uniforms (n,), y the column's
    tokens, j the rejections so far) while none passed. Returns the passing candidate's
    ``labels`` entry (default: its token; -1 where none passed) and the rejections. One
    uniform per chain and column, drawn whether or not a test happens."""
    n = live.size
    rejected = np.zeros(n, dtype=np.intp)
    taken = np.full(n, -1, dtype=np.intp)
    for d in range(tokens.shape[1]):
        on = live & present[:, d] & (taken < 0)
        ok = on & test(rng.random(n), tokens[:, d], rejected)
        taken = np.where(ok, tokens[:, d] if labels is None else labels[:, d], taken)
        rejected += on & ~ok
    return taken, rejected


def draft_paths(draw_q: Callable[[IntArray, FloatArray], IntArray], start: IntArray, k: int,
                gamma: int, rng: np.random.Generator) -> IntArray:
    """k independent order-1 Markov draft paths of length γ per chain from contexts ``start``
    (n,): (n, k, γ); n k uniforms per depth, depth by depth."""
    n = start.size
    x = np.empty((n, k, gamma), dtype=np.intp)
    prev = np.repeat(start[:, None], k, axis=1)
    for i in range(gamma):
        prev = draw_q(prev.ravel(), rng.random(n * k)).reshape(n, k)
        x[:, :, i] = prev
    return x


def emit_depth(tokens: IntArray, n_emitted: IntArray, cur: IntArray, live: BoolArray,
               i: int, out: IntArray, ended: BoolArray,
               alive: BoolArray | None = None, drafts: IntArray | None = None) -> None:
    """The step at depth i every multi-draft ``play`` shares, in place: chains still ``live``
    emit ``out`` (n,) as their i-th token and move their context ``cur`` to it; with the
    survivors ``alive`` (n, k) and the drafts' depth-i tokens ``drafts`` (n, k), only the
    drafts carrying the emitted token survive (none where the round ``ended`` here: that token
    was the rule's own); chains whose round ``ended`` are live no more."""
    tokens[live, i] = out[live]
    n_emitted += live
    cur[live] = out[live]
    if alive is not None:
        alive &= drafts == np.where(live & ~ended, out, -1)[:, None]
    live &= ~ended


def finish_round(tokens: IntArray, n_emitted: IntArray, cur: IntArray, live: BoolArray,
                 gamma: int,
                 draw_p: Callable[[IntArray, FloatArray], IntArray], rng: np.random.Generator,
                 drafted: int) -> RoundSample:
    """The end of a round every multi-draft ``play`` shares: chains still ``live`` after depth
    γ (every depth accepted) draw their bonus token from P(.|cur) -- one uniform per chain,
    drawn for every chain so the stream does not depend on which survived -- and the round's
    :class:`RoundSample` (``drafted`` tokens per chain)."""
    n = cur.shape[0]
    bonus = draw_p(cur, rng.random((n,)))
    tokens[live, gamma] = bonus[live]
    n_emitted += live
    cur = np.where(live, bonus, cur)
    return RoundSample(tokens=tokens, n_emitted=n_emitted, next_state=cur,
                       drafted=np.full(n, drafted, dtype=np.intp))
