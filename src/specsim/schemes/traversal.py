"""Traversal verification: the token tree of :mod:`.tree` verified leaf to root (a scheme of
:mod:`.base`).

Weng et al. 2025, "Traversal Verification for Speculative Tree Decoding" (arXiv 2505.12398),
cited as [W]. Only [W]'s abstract is at hand: verification traverses the tree from the leaves
to the root, judges the whole sequence from a node to the root at once rather than token by
token, so it keeps subsequences that top-down verification discards, and it is lossless. The
algorithm below is reconstructed from that and checked exactly (lossless, and block
verification on a chain); it is not a transcription of [W].

The tree is drafted exactly as :mod:`.tree`'s (knob ``branches``, depth = γ; every node's
children i.i.d. from Q(.|its token), the same uniforms: :func:`.tree.draft_tree`), so the two
rules verify the very same trees. Every node v carries a state (a_v, B_v, D_v): a weight, a
target row and a draft row; the root (context s) starts at (1, P[s], Q[s]). When a node x
(token x, child of u) is first entered, with u's state at that moment,

    a_x = min(a_u B_u(x) / D_u(x), 1),   B_x = P[x],   D_x = Q[x]

(:func:`.block.ratio`). Nodes are visited in post-order (depth first, children in drawing
order): when v's turn comes all its children have been deleted and v is a leaf. It is accepted
with probability a_v: the round emits the path root -> v and a bonus token from B_v, and ends.
Otherwise v is deleted and its parent u updated ([B]'s backward step, :mod:`.block`):

    S = Σ_y max(a_u B_u(y) - D_u(y), 0),   a_u <- S / (S + 1 - a_u)   (1 at 0/0),
    B_u <- norm(max(a_u B_u - D_u, 0)) with the old a_u   (unchanged when S = 0),

D_u unchanged (the siblings are i.i.d.). The root keeps a = 1, so it is never rejected: when
all its children are deleted the bonus comes from the residual chain of recursive rejection
sampling. On a chain (all ones) this is block verification ([B] Alg. 2, :mod:`.block`); at depth
1 it is :mod:`.tree`'s RRS. [W] also treats siblings drawn without replacement: the update then
zeroes D_u(x) of the deleted child's token and renormalises (lossless too in the exact check);
only the i.i.d. form is played here, so ``traversal`` and ``tree`` verify the same trees.

The exact law (:func:`law`): with i.i.d. siblings a node's state after j deletions does not
depend on which tokens were deleted nor on what happened inside their subtrees, and the
children's subtrees are independent given it. The outcome of a subtree entered with (token x,
weight a) is then a recursion over depths, vectorised over *cells* (start context, drafted
tokens on the path, child positions): a node with m children calls the child recursion m
times (child j sees the state after j deletions), each on its cells expanded by the tokens
Q(.|c) can draft. Work ~ S Π_d (b_d d) cells for S contexts and rows reaching d tokens;
:data:`BUDGET` bounds it (beyond it the point is Monte Carlo only). On a trace's frozen rows
(positional model: the round from start t meets (p_{t+d}, q_{t+d}) at depth d whatever was
drafted) the same recursion gives a child its start as context, not its token
(:func:`positional_law`, all starts at once): cells of equal (start, weight) then merge, and
the leaves need no cell per token (child j of their parent is accepted w.p. a_j - S_j).
``tests/unit/schemes/test_scheme_traversal.py`` checks the law against a brute-force enumeration of
every drawn tree and every accept outcome in exact rational arithmetic, against :mod:`.block`
(chains) and :mod:`.tree` (depth 1), and :func:`play` against it by Monte Carlo.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, cast

import numpy as np
from numpy.typing import ArrayLike

from specsim.exact import RoundLaw, check_pair
from specsim.resources import Footprint
from specsim.sampling import TableSampler
from specsim.schemes.base import Knobs
from specsim.schemes.block import backward_step, excess, final_residual, hold, ratio
from specsim.schemes.law import FloatArray, IntArray, LawSize, checked_windows
from specsim.schemes.traversal_play import play
from specsim.schemes.tree import branches, checked_shape, draft_cells, drafted_through, parents_of

__all__ = ["BUDGET", "CHUNK_CELLS", "INTERNAL_COST", "SECONDS_PER_ENTRY", "footprint", "law",
           "play", "positional_cost", "positional_law", "window_cells", "window_law",
           "window_seconds"]

RULE: Final = "traversal"
BUDGET: Final = 2**26  # cell-rows (cells x S) the exact law may visit: ~1 s, ~1 GB at most
CHUNK_CELLS: Final = 2**15  # positional_law's row entries (cells x V) per call
SECONDS_PER_ENTRY: Final = 1.5e-8  # positional_law's time per row entry of the leaves' parents
INTERNAL_COST: Final = 12.0  # ... and above them, in those (measured, calls included)


def _sum_by(group: IntArray, n: int, values: FloatArray) -> FloatArray:
    """Rows of ``values`` (k,) or (k, w) summed by ``group`` (k,) into (n,) or (n, w)."""
    if values.ndim == 1:
        return cast(FloatArray, np.bincount(group, values, minlength=n))
    w = values.shape[1]
    cell = (group[:, None] * w + np.arange(w)).ravel()
    return cast(FloatArray, np.bincount(cell, values.ravel(), minlength=n * w).reshape(n, w))


@dataclass(frozen=True)
class _Outcome:
    """Per cell (a node entered with weight a at context c): P(its subtree is deleted);
    P(accepted with i + 1 tokens emitted from it on, bonus included) in column i; (``want`` >=
    1, order-1 tables only) the law of the last emitted token and the mass of the node's own
    acceptance by bonus token (``own``); the law of the first token (``first``: want >= 2) and
    of the first two (``pair``: want 3, the root); the work it took."""

    deleted: FloatArray
    length: FloatArray
    last: FloatArray | None
    own: FloatArray | None
    first: FloatArray | None
    pair: FloatArray | None
    work: float  # row entries visited (cells x V x children; INTERNAL_COST above leaves)


@dataclass(frozen=True)
class _Rows:
    """The rows a node meets: at depth d, ``target[d][c]`` and ``draft[d][c]`` at context c.
    ``markov``: a child's context is its token (order-1 tables: every depth the same (S, S)
    pair; the law bit for bit as it was). Else its parent's (frozen positional rows, (N, V) per
    depth: the context is the round's start); then cells of equal (start, weight) are visited
    once (their subtrees are the same), at most ``chunk`` row entries (cells x V) a call."""

    target: tuple[FloatArray, ...]
    draft: tuple[FloatArray, ...]
    markov: bool
    chunk: int = 0


def _merged(ctx: IntArray, a: FloatArray) -> tuple[IntArray, IntArray]:
    """One cell per run of equal (context, weight) in (context, ~weight) order (weights a hair
    apart may interleave, equal ones then stay apart: harmless); kept cells, cell -> kept."""
    order = np.argsort(ctx + 0.5 * a, kind="stable")  # the kept cells: the same on every CPU
    c, w = ctx[order], a[order]
    new = np.ones(order.size, dtype=bool)
    new[1:] = (c[1:] != c[:-1]) | (w[1:] != w[:-1])
    inverse = np.empty(order.size, dtype=np.intp)
    inverse[order] = np.cumsum(new) - 1
    return order[new], inverse


def _leaves(a: FloatArray, B: FloatArray, D: FloatArray, m: int) -> _Outcome:
    """:func:`_visit`'s lengths below cells whose m children are leaves, without a cell per
    token: child j is accepted w.p. Σ_x D(x) min(a_j B_j(x) / D(x), 1) = a_j - S_j (a_j, B_j:
    the state after j deletions, S_j its excess mass)."""
    reach, length = np.ones(a.size), np.zeros((a.size, 2))
    for j in range(m):
        exc, mass = excess(a, B, D)
        hit = np.maximum(a * B.sum(axis=1) - mass, 0.0)
        length[:, 1] += reach * hit
        reach = reach * (1.0 - hit)
        a, B = hold(mass, a), (final_residual(exc, mass, B) if j < m - 1 else B)
    length[:, 0] = reach * a
    return _Outcome(reach * (1.0 - a), length, None, None, None, None, float(B.size * m))


def _pieces(rows: _Rows, a: FloatArray, c: IntArray, shape: tuple[int, ...],
            depth: int) -> _Outcome:
    """:func:`_visit`'s lengths on positional rows, at most ``rows.chunk`` row entries a call."""
    step = max(1, rows.chunk // rows.draft[depth].shape[1])
    parts = [_visit(rows, a[i:i + step], c[i:i + step], shape, 0, depth)
             for i in range(0, a.size, step)]
    return _Outcome(np.concatenate([o.deleted for o in parts]),
                    np.concatenate([o.length for o in parts]), None, None, None, None,
                    sum(o.work for o in parts))


def _visit(rows: _Rows, a: FloatArray, c: IntArray, shape: tuple[int, ...], want: int,
           depth: int = 0) -> _Outcome:
    """The outcome of subtrees of ``shape`` below cells entered with weights ``a`` at contexts
    ``c`` at ``depth`` (module docstring); ``want`` 0: deletion and length only, 1: also the
    last token's law, 2: also the first token's, 3: also the pair's (1..3: ``rows.markov``)."""
    P, Q = rows.target[depth], rows.draft[depth]
    n, size = a.size, Q.shape[1]
    rest = shape[1:]
    if not rest and not want:
        return _leaves(a, P[c], Q[c], shape[0])
    parent, token = np.nonzero(Q[c] > 0)  # every child token the cell's row can draft
    q = Q[c[parent], token]
    cell = parent * size + token
    child = token if rows.markov else c[parent]
    D, B = Q[c], P[c].copy()
    reach = np.ones(n)  # P(the first j children's subtrees were all deleted)
    work = INTERNAL_COST * n * size * shape[0]
    length = np.zeros((n, len(shape) + 1))
    last = np.zeros((n, size)) if want else None
    first = np.zeros((n, size)) if want >= 2 else None
    pair = np.zeros((n * size, size)) if want == 3 else None
    for j in range(shape[0]):
        a_x = ratio(a[parent], B[parent, token], q)
        w = q * reach[parent]  # P(this child is entered with this token)
        if rest:
            sub_want = 2 if want == 3 else min(want, 1)
            if rows.markov:
                sub = _visit(rows, a_x, child, rest, sub_want, depth + 1)
                deleted, sub_length = sub.deleted, sub.length
            else:
                keep, inverse = _merged(child, a_x)
                sub = _pieces(rows, a_x[keep], child[keep], rest, depth + 1)
                deleted, sub_length = sub.deleted[inverse], sub.length[inverse]
            work += sub.work
            length[:, 1:] += _sum_by(parent, n, w[:, None] * sub_length)
            if last is not None and sub.last is not None:
                last += _sum_by(parent, n, w[:, None] * sub.last)
            if pair is not None and sub.first is not None:
                pair += _sum_by(cell, n * size, w[:, None] * sub.first)
        else:  # leaves: accepted w.p. a_x with a bonus from their row, per (cell, token)
            deleted = 1.0 - a_x
            hit = np.bincount(cell, w * a_x, minlength=n * size).reshape(n, size)
            length[:, 1] += hit.sum(axis=1)
            assert last is not None  # want >= 1 here: want 0 at the leaves took _leaves above
            last += hit @ rows.target[depth + 1]  # order-1 tables: a leaf's row is its token's
            if pair is not None:
                pair += hit.reshape(-1, 1) * np.tile(rows.target[depth + 1], (n, 1))
        if first is not None:
            first += np.bincount(cell, w * (1.0 - deleted), minlength=n * size).reshape(n, size)
        reach = reach * np.bincount(parent, q * deleted, minlength=n)
        if j < shape[0] - 1 or want:
            a, B = backward_step(a, B, D)
        else:  # every child deleted: only the node's weight is read on
            a = hold(excess(a, B, D)[1], a)
    own = None if last is None else (reach * a)[:, None] * B  # every child deleted: the node
    length[:, 0] += reach * a  # itself, then its bonus
    if last is not None and own is not None:
        last += own
    if first is not None and own is not None:
        first += own
    return _Outcome(reach * (1.0 - a), length, last, own, first,
                    None if pair is None else pair.reshape(n, size, size), work)


def _cells(size: int, support: int, shape: tuple[int, ...]) -> tuple[list[float], float]:
    """Cells the recursion visits at each depth 0..D, S Π_{l<i} (b_l d), and the cell-rows
    it visits in all (an (S)-row per cell above the leaves, a number per leaf cell)."""
    out, cells = [float(size)], float(size)
    for b in shape:
        cells *= b * min(support, size)
        out.append(cells)
    return out, size * sum(out[:-1]) + out[-1]


def law(P: ArrayLike, Q: ArrayLike, gamma: int, knobs: Knobs, budget: int = BUDGET) -> RoundLaw:
    """Exact law of one round (traversal verification of the [M] token tree) from every
    context, by the recursion of the module docstring; ValueError beyond ``budget``."""
    shape = checked_shape(gamma, knobs, RULE)
    P, Q = check_pair(P, Q)
    size = P.shape[0]
    cells, visits = _cells(size, int((Q > 0).sum(axis=1).max()), shape)
    if visits > budget:
        raise ValueError(f"traversal's exact law on branches {knobs['branches']!r} visits "
                         f"~{visits:.3g} cell-rows ({cells[-1]:.3g} drafted leaf paths on "
                         f"{size} states), more than budget={budget}")
    rows = _Rows((P,) * (len(shape) + 1), (Q,) * (len(shape) + 1), markov=True)
    out = _visit(rows, np.ones(size), np.arange(size), shape, 3)
    assert out.last is not None and out.own is not None
    tokens = np.zeros((size, len(shape) + 2))
    tokens[:, 1:] = out.length
    return RoundLaw(tokens=tokens, next_state=out.last,
                    drafted=np.full(size, float(parents_of(shape).size)), single=out.own,
                    pair=out.pair, context=np.arange(size))


def positional_law(p: ArrayLike, q: ArrayLike, shape: tuple[int, ...],
                   chunk: int = CHUNK_CELLS) -> FloatArray:
    """Law of the number of tokens one round emits (N, D+2; column 0 is 0) from each of N
    starts, when the round from start t meets the frozen rows ``p[t, d]``, ``q[t, d]`` (N, D+1,
    V) at depth d whatever was drafted before (a trace's positional model; depth D's row gives
    the bonus) and verifies the tree of branches ``shape`` (D = len(shape)). The recursion of
    :func:`law`, a child's context being its start rather than its token: equal to
    ``law(P, Q, D, knobs).tokens[first]`` on ``chain_of_rows(p[t], q[t])`` (the start's window
    chain), without its (D+1)V+1 states. Cells of equal (start, weight) are visited once (their
    subtrees' outcomes are the same), the leaves' parents in closed form (:func:`_leaves`), at
    most ``chunk`` row entries (cells x V) a call (memory ~100 B per entry and depth);
    :func:`positional_cost` estimates its time."""
    return _positional(p, q, shape, chunk)[0]


def window_law(p: ArrayLike, q: ArrayLike, gamma: int, knobs: Knobs,
               at: ArrayLike | None = None) -> tuple[FloatArray, FloatArray]:
    """The ``window_law`` of :mod:`.base` (rows gathered where ``at`` is given):
    :func:`positional_law` of the ``branches`` tree, and its drafted tokens through each depth
    (:func:`.tree.drafted_through`)."""
    shape = checked_shape(gamma, knobs, RULE)
    p, q = checked_windows(p, q, gamma, at)
    return positional_law(p, q, shape), drafted_through(shape)


def window_cells(n: int, vocab: int, gamma: int, knobs: Knobs) -> float:
    """Peak cells of :func:`window_law`: at most :data:`CHUNK_CELLS` row entries a call, ~100
    bytes each per depth of the recursion, and the law of n starts."""
    return CHUNK_CELLS * 12.5 * gamma + n * (gamma + 2.0)


def window_seconds(n: int, vocab: int, gamma: int, knobs: Knobs,
                   rows: tuple[FloatArray, FloatArray] | None = None) -> float | None:
    """Estimated seconds of :func:`window_law` on n starts: :func:`positional_cost` on the
    windows ``rows`` of a sample of them, scaled to n; None without them (how much the
    recursion merges depends on the rows, so no bound holds without them)."""
    if rows is None:
        return None
    shape = checked_shape(gamma, knobs, RULE)
    p, q = rows
    return float(positional_cost(p, q, shape, sample=p.shape[0]) * n / p.shape[0])


def positional_cost(p: ArrayLike, q: ArrayLike, shape: tuple[int, ...], sample: int = 512) -> float:
    """Estimated seconds of :func:`positional_law` (one of two busy cores): its work on
    ``sample`` evenly spaced starts (row entries visited, those above the leaves' parents
    :data:`INTERNAL_COST` each) scaled to N starts, at :data:`SECONDS_PER_ENTRY`. No clock
    (deterministic); the sample costs ~sample/N of the law itself."""
    n = np.shape(p)[0]
    pick = np.unique(np.linspace(0, n - 1, min(n, sample)).astype(np.intp))
    return float(_positional(np.asarray(p)[pick], np.asarray(q)[pick], shape, CHUNK_CELLS)[1]
                 * n / pick.size * SECONDS_PER_ENTRY)


def _positional(p: ArrayLike, q: ArrayLike, shape: tuple[int, ...],
                chunk: int) -> tuple[FloatArray, float]:
    """:func:`positional_law` and its work (row entries visited, :class:`_Outcome`)."""
    p, q = np.asarray(p, dtype=float), np.asarray(q, dtype=float)
    depth = len(shape)
    if p.ndim != 3 or p.shape != q.shape or p.shape[1] != depth + 1 or depth == 0 \
            or min(shape) < 1 or p.shape[0] == 0:
        raise ValueError(f"traversal positional law: p, q must be (N>0, {depth + 1}, V) for "
                         f"branches {shape!r}, got {p.shape} and {q.shape}")
    rows = _Rows(tuple(p[:, d] for d in range(depth + 1)),
                 tuple(q[:, d] for d in range(depth + 1)), markov=False, chunk=chunk)
    got = _pieces(rows, np.ones(p.shape[0]), np.arange(p.shape[0]), shape, 0)
    return np.pad(got.length, ((0, 0), (1, 0))), got.work


def footprint(size: int, support: int, gamma: int, knobs: Knobs | None,
              chains: int) -> LawSize:
    """What :func:`law` and :func:`play` cost on the tree of ``branches`` on S = ``size``
    contexts whose draft rows reach at most ``support`` tokens: the recursion holds one call
    per depth at a time (~8 (S)-rows per cell of depths < D, ~8 numbers per leaf cell), the
    (S, S, S) pair law twice; None beyond :data:`BUDGET` cell-rows (where :func:`law`
    refuses: Monte Carlo only). A round holds the drafted tree (:func:`.tree.draft_cells`)
    and its uniforms, and per chain and depth of the current path a state (a, B, context)."""
    shape = branches(knobs or {}, RULE)
    n_nodes = int(parents_of(shape).size)
    d = float(min(support, size))
    cells, visits = _cells(size, support, shape)
    law_fp = None
    if visits <= BUDGET:
        alive = [float(size) * d**i for i in range(len(shape) + 1)]  # one call per depth
        law_fp = Footprint(
            sum((8.0 * size + 2 * len(shape) + 8) * c for c in alive[:-1]) + 12.0 * alive[-1]
            + 4.0 * size * alive[-2] + 3.0 * size**3 + 4.0 * size * size,
            20.0 * visits + 2.0 * size * size * cells[-1] / d,
            what=f"traversal exact law (branches {'x'.join(map(str, shape))}: "
                 f"{cells[-1]:.3g} drafted leaf paths on {size} states)")
    n = float(chains)
    depth = len(shape)
    play_fp = Footprint(TableSampler.cells(size, size) + draft_cells(chains, shape)
                        + n * (n_nodes + 4)
                        + n * (depth + 1) * (size + 3) + 5 * n * size + 4 * n * (depth + 1),
                        TableSampler.work(size, size) + 10 * n * (n_nodes * (6 * size + 10)
                                                                   + 2 * depth + 4),
                        what=f"simulation ({chains} chains at once)")
    return LawSize(size, law_fp, play_fp)
