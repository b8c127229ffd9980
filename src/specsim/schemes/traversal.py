"""Traversal verification: the token tree of :mod:`.tree` verified leaf to root (a scheme of
:mod:`.law`).

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
:data:`BUDGET` bounds it (beyond it the point is Monte Carlo only).
``tests/test_scheme_traversal.py`` checks the law against a brute-force enumeration of every
drawn tree and every accept outcome in exact rational arithmetic, against :mod:`.block`
(chains) and :mod:`.tree` (depth 1), and :func:`play` against it by Monte Carlo.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from specsim.exact import RoundLaw, check_pair
from specsim.resources import Footprint
from specsim.sampling import TableSampler, sample_rows
from specsim.schemes.block import excess, final_residual, hold, ratio
from specsim.schemes.law import FloatArray, IntArray, LawSize, RoundSample
from specsim.schemes.tree import branches, checked_shape, draft_tree, parents_of

__all__ = ["BUDGET", "footprint", "law", "play"]

RULE: Final = "traversal"
BUDGET: Final = 2**26  # cell-rows (cells x S) the exact law may visit: ~1 s, ~1 GB at most


def _delete(a: FloatArray, B: FloatArray, D: FloatArray) -> tuple[FloatArray, FloatArray]:
    """A node's (a, B) after one of its children is deleted (module docstring)."""
    exc, mass = excess(a, B, D)
    return hold(mass, a), final_residual(exc, mass, B)


def _sum_by(group: IntArray, n: int, values: FloatArray) -> FloatArray:
    """Rows of ``values`` (k,) or (k, w) summed by ``group`` (k,) into (n,) or (n, w)."""
    if values.ndim == 1:
        return np.bincount(group, values, minlength=n)
    w = values.shape[1]
    cell = (group[:, None] * w + np.arange(w)).ravel()
    return np.bincount(cell, values.ravel(), minlength=n * w).reshape(n, w)


@dataclass(frozen=True)
class _Outcome:
    """Per cell (a node entered with weight a at context c): P(its subtree is deleted);
    P(accepted with i + 1 tokens emitted from it on, bonus included) in column i; the law of
    the last emitted token, of the first (``first``: when asked), the mass of the node's own
    acceptance by bonus token (``own``), and of the first two tokens (``pair``: the root)."""

    deleted: FloatArray
    length: FloatArray
    last: FloatArray
    own: FloatArray
    first: FloatArray | None
    pair: FloatArray | None


def _visit(P: FloatArray, Q: FloatArray, a: FloatArray, c: IntArray, shape: tuple[int, ...],
           want: int) -> _Outcome:
    """The outcome of subtrees of ``shape`` below cells entered with weights ``a`` at contexts
    ``c`` (module docstring); ``want`` 1: also the first token's law, 2: also the pair's."""
    n, size = a.size, P.shape[0]
    rest = shape[1:]
    parent, token = np.nonzero(Q[c] > 0)  # every child token the cell's row can draft
    q = Q[c[parent], token]
    cell = parent * size + token
    D, B = Q[c], P[c].copy()
    reach = np.ones(n)  # P(the first j children's subtrees were all deleted)
    length, last = np.zeros((n, len(shape) + 1)), np.zeros((n, size))
    first = np.zeros((n, size)) if want else None
    pair = np.zeros((n * size, size)) if want == 2 else None
    for _ in range(shape[0]):
        a_x = ratio(a[parent], B[parent, token], q)
        w = q * reach[parent]  # P(this child is entered with this token)
        if rest:
            sub = _visit(P, Q, a_x, token, rest, 1 if want == 2 else 0)
            deleted = sub.deleted
            length[:, 1:] += _sum_by(parent, n, w[:, None] * sub.length)
            last += _sum_by(parent, n, w[:, None] * sub.last)
            if pair is not None and sub.first is not None:
                pair += _sum_by(cell, n * size, w[:, None] * sub.first)
        else:  # leaves: accepted w.p. a_x with a bonus from P[x], gathered per (cell, token)
            deleted = 1.0 - a_x
            hit = np.bincount(cell, w * a_x, minlength=n * size).reshape(n, size)
            length[:, 1] += hit.sum(axis=1)
            last += hit @ P
            if pair is not None:
                pair += hit.reshape(-1, 1) * np.tile(P, (n, 1))
        if first is not None:
            first += np.bincount(cell, w * (1.0 - deleted), minlength=n * size).reshape(n, size)
        reach = reach * np.bincount(parent, q * deleted, minlength=n)
        a, B = _delete(a, B, D)
    own = (reach * a)[:, None] * B  # every child deleted: the node itself, then its bonus
    length[:, 0] += reach * a
    last += own
    if first is not None:
        first += own
    return _Outcome(reach * (1.0 - a), length, last, own, first,
                    None if pair is None else pair.reshape(n, size, size))


def _cells(size: int, support: int, shape: tuple[int, ...]) -> tuple[list[float], float]:
    """Cells the recursion visits at each depth 0..D, S Π_{l<i} (b_l d), and the cell-rows
    it visits in all (an (S)-row per cell above the leaves, a number per leaf cell)."""
    out, cells = [float(size)], float(size)
    for b in shape:
        cells *= b * min(support, size)
        out.append(cells)
    return out, size * sum(out[:-1]) + out[-1]


def law(P: Any, Q: Any, gamma: int, knobs: Mapping[str, Any], budget: int = BUDGET) -> RoundLaw:
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
    out = _visit(P, Q, np.ones(size), np.arange(size), shape, 2)
    tokens = np.zeros((size, len(shape) + 2))
    tokens[:, 1:] = out.length
    return RoundLaw(tokens=tokens, next_state=out.last,
                    drafted=np.full(size, float(parents_of(shape).size)), single=out.own,
                    pair=out.pair, context=np.arange(size))


def _events(parents: IntArray) -> list[tuple[int, int]]:
    """The post-order walk of the tree: (node, its depth) on entering it, (node, -depth) on
    leaving it, depth first, children in drawing order (the root, -1, is neither)."""
    children: dict[int, list[int]] = {}
    for v, u in enumerate(parents.tolist()):
        children.setdefault(u, []).append(v)
    out: list[tuple[int, int]] = []
    stack = [(v, 1, False) for v in reversed(children.get(-1, []))]
    while stack:
        v, d, done = stack.pop()
        if done:
            out.append((v, -d))
            continue
        out.append((v, d))
        stack.append((v, d, True))
        stack += [(ch, d + 1, False) for ch in reversed(children.get(v, []))]
    return out


def play(P: Any, Q: Any, state: Any, gamma: int, knobs: Mapping[str, Any],
         rng: np.random.Generator) -> RoundSample:
    """One round for n chains at once from contexts ``state`` (n,), vectorised over chains (a
    loop over the tree's 2N enter/leave events; states kept per depth of the current path).

    Uniforms per round and chain: N for the drafts (:func:`.tree.draft_tree`, as the ``tree``
    rule draws them), then rng.random((N, n)): node v's accept test in row v (drawn whether or
    not it happens; accepted iff u < a_v), then rng.random(n) for the bonus token."""
    shape = checked_shape(gamma, knobs, RULE)
    P, Q = check_pair(P, Q)
    parents = parents_of(shape)
    n_nodes, depth = parents.size, len(shape)
    tok = draft_tree(Q, state, parents, rng)
    s = tok[:, n_nodes]
    n = s.size
    tests, u_bonus = rng.random((n_nodes, n)), rng.random(n)
    rows = np.arange(n)
    a = np.ones((depth + 1, n))
    B = np.empty((depth + 1, n, P.shape[0]))
    ctx = np.empty((depth + 1, n), dtype=np.intp)
    B[0], ctx[0] = P[s], s
    live = np.ones(n, dtype=bool)
    node = np.full(n, n_nodes, dtype=np.intp)  # the accepted node (n_nodes: the root)
    bonus = np.zeros(n, dtype=np.intp)
    for v, d in _events(parents):
        if d > 0:  # entering v: its weight from its parent's state now
            x = tok[:, v]
            a[d] = ratio(a[d - 1], B[d - 1][rows, x], Q[ctx[d - 1], x])
            B[d], ctx[d] = P[x], x
            continue
        d = -d  # leaving v: all its children deleted
        ok = live & (tests[v] < a[d])
        if ok.any():
            bonus[ok] = sample_rows(B[d][ok], u_bonus[ok])
            node[ok] = v
            live &= ~ok
        new_a, new_b = _delete(a[d - 1], B[d - 1], Q[ctx[d - 1]])
        a[d - 1] = np.where(live, new_a, a[d - 1])
        B[d - 1] = np.where(live[:, None], new_b, B[d - 1])
    if live.any():  # every child of the root deleted: the root (a = 1), bonus from its row
        bonus[live] = sample_rows(B[0][live], u_bonus[live])
    path = np.full((n_nodes + 1, depth), -1, dtype=np.intp)  # path[v]: root -> v's nodes
    level = np.zeros(n_nodes + 1, dtype=np.intp)
    for v, u in enumerate(parents.tolist()):
        if u >= 0:
            path[v] = path[u]
            level[v] = level[u]
        path[v, level[v]] = v
        level[v] += 1
    k = level[node]
    cols = np.arange(depth + 1)
    drafted = tok[rows[:, None], np.maximum(path[node], 0)]
    out = np.where(cols[None, :] == k[:, None], bonus[:, None], -1)
    out[:, :depth] = np.where(cols[None, :depth] < k[:, None], drafted, out[:, :depth])
    return RoundSample(tokens=out, n_emitted=k + 1, next_state=bonus,
                       drafted=np.full(n, n_nodes, dtype=np.intp))


def footprint(size: int, support: int, gamma: int, knobs: Mapping[str, Any] | None,
              chains: int) -> LawSize:
    """What :func:`law` and :func:`play` cost on the tree of ``branches`` on S = ``size``
    contexts whose draft rows reach at most ``support`` tokens: the recursion holds one call
    per depth at a time (~8 (S)-rows per cell of depths < D, ~8 numbers per leaf cell), the
    (S, S, S) pair law twice; None beyond :data:`BUDGET` cell-rows (where :func:`law`
    refuses: Monte Carlo only). A round holds the drafted tree and its uniforms, and per
    chain and depth of the current path a state (a, B, context)."""
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
    play_fp = Footprint(TableSampler.cells(size, size) + n * (3 * n_nodes + 4)
                        + n * (depth + 1) * (size + 3) + 5 * n * size + 4 * n * (depth + 1),
                        TableSampler.work(size, size) + 10 * n * (n_nodes * (6 * size + 10)
                                                                   + 2 * depth + 4),
                        what=f"simulation ({chains} chains at once)")
    return LawSize(size, law_fp, play_fp)
