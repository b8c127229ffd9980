"""One sampled round of traversal verification (:mod:`.traversal`, which re-exports
:func:`play` as the rule's ``play``): the tree of :mod:`.tree` drafted with the same uniforms,
its nodes visited in post-order, each accepted with its weight or deleted with [B]'s backward
step at its parent (:func:`specsim.schemes.block.backward_step`). :mod:`.traversal`'s exact
law is what ``tests/unit/schemes/test_scheme_traversal.py`` checks these rounds against.
"""

from __future__ import annotations

from typing import cast

import numpy as np
from numpy.typing import ArrayLike

from specsim.exact import check_pair
from specsim.sampling import sample_rows
from specsim.schemes.base import Knobs
from specsim.schemes.block import excess, final_residual, hold, ratio
from specsim.schemes.law import FloatArray, IntArray, RoundSample
from specsim.schemes.tree import checked_shape, draft_tree, parents_of

__all__ = ["play"]


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


def play(P: ArrayLike, Q: ArrayLike, state: ArrayLike, gamma: int, knobs: Knobs,
         rng: np.random.Generator) -> RoundSample:
    """One round for n chains at once from contexts ``state`` (n,), vectorised over chains (a
    loop over the tree's 2N enter/leave events; states kept per depth of the current path).

    Uniforms per round and chain: N for the drafts (:func:`.tree.draft_tree`, as the ``tree``
    rule draws them), then rng.random((N, n)): node v's accept test in row v (drawn whether or
    not it happens; accepted iff u < a_v), then rng.random(n) for the bonus token."""
    shape = checked_shape(gamma, knobs, "traversal")
    P, Q = check_pair(P, Q)
    parents = parents_of(shape)
    n_nodes, depth = parents.size, len(shape)
    tok = draft_tree(Q, state, parents, rng)
    s = tok[:, n_nodes]
    n = s.size
    tests, u_bonus = rng.random((n_nodes, n)), rng.random(n)
    rows = np.arange(n)
    a = np.ones((depth + 1, n))
    B = np.empty((depth + 1, n, P.shape[0]))  # a node's row once a child of it is deleted
    ctx = np.empty((depth + 1, n), dtype=np.intp)
    ctx[0] = s
    fresh = np.ones(depth + 1, dtype=bool)  # no child deleted yet: the row is P[ctx]
    # every child deleted: the residual rows, formed only for the chains that draw from them
    done: list[tuple[IntArray, FloatArray, FloatArray, FloatArray] | None] = [None] * (depth + 1)
    final = {u: v for v, u in enumerate(parents.tolist())}  # each node's last child
    last = [final[u] == v for v, u in enumerate(parents.tolist())]

    def row(d: int, on: IntArray) -> FloatArray:
        if fresh[d]:
            return cast(FloatArray, P[ctx[d, on]])
        held = done[d]
        if held is None:
            return cast(FloatArray, B[d, on])
        was, exc, mass, rows_p = held
        at = np.searchsorted(was, on)  # on: chains among those searching then
        return final_residual(exc[at], mass[at], rows_p[at])

    live = np.ones(n, dtype=bool)
    node = np.full(n, n_nodes, dtype=np.intp)  # the accepted node (n_nodes: the root)
    bonus = np.zeros(n, dtype=np.intp)
    for v, d in _events(parents):
        if d > 0:  # entering v: its weight from its parent's state now (chains searching)
            on = np.flatnonzero(live)
            x = tok[on, v]
            b_x = P[ctx[d - 1, on], x] if fresh[d - 1] else B[d - 1][on, x]
            a[d, on] = ratio(a[d - 1, on], b_x, Q[ctx[d - 1, on], x])
            ctx[d, on], fresh[d], done[d] = x, True, None
            continue
        d = -d  # leaving v: all its children deleted
        ok = live & (tests[v] < a[d])
        if ok.any():
            bonus[ok] = sample_rows(row(d, np.flatnonzero(ok)), u_bonus[ok])
            node[ok] = v
            live &= ~ok
        on = np.flatnonzero(live)  # the chains still searching: the others' rows are done
        rows_p = row(d - 1, on)  # [B]'s backward step at the parent (block.backward_step)
        exc, mass = excess(a[d - 1, on], rows_p, Q[ctx[d - 1, on]])
        a[d - 1, on] = hold(mass, a[d - 1, on])
        if last[v]:
            done[d - 1] = (on, exc, mass, rows_p)
        else:
            B[d - 1, on] = final_residual(exc, mass, rows_p)
        fresh[d - 1] = False
    if live.any():  # every child of the root deleted: the root (a = 1), bonus from its row
        bonus[live] = sample_rows(row(0, np.flatnonzero(live)), u_bonus[live])
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
