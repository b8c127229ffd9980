"""A token tree drafted i.i.d. and verified root to leaf by multi-step speculative sampling
(a scheme of :mod:`.base`).

Miao et al. 2023, "SpecInfer" (arXiv 2305.09781), token tree verification with multi-step
speculative sampling (MSS, §4), cited as [M]. Knob ``branches`` = "b_0xb_1x...xb_{D-1}": every
node at depth d (the root, the context, at depth 0) has b_d children, so a chain is all ones.
The tree's depth D is the point's γ (a study pairs a tree with the γ of its depth only:
:attr:`specsim.schemes.Scheme.depth`). Drafted tokens per round = the tree's nodes (the root
excluded), N = b_0 + b_0 b_1 + ... : each costs a draft call's share (1 + N c a round).

One round from context s (order-1 Markov target P, draft Q, rows = context):

1. Drafting: the b_0 children of the root are drawn i.i.d. from Q(.|s); each child v at depth
   d >= 1 with token x gets b_d children drawn i.i.d. from Q(.|x), independently of everything
   else. Siblings that happen to share a token stay distinct nodes, each with its own subtree
   (no merging of equal prefixes: a tree of N sampled nodes is what the target verifies).
2. Verification from the root, c = s: at the current node with children y_1..y_m, in drawing
   order, RRS ([M] §4 MSS, as :mod:`.multi_draft`): r <- P(.|c); for j = 1..m accept y_j iff
   u Q(y_j|c) < r(y_j) (:func:`specsim.verify.accept`); on a rejection
   r <- :func:`specsim.verify.residual` (r, Q(.|c)). The first accepted child is emitted and
   becomes the current node (its subtree only). If all m are rejected, one token is drawn from
   the final r and the round ends.
3. At a leaf (m = 0, depth D) the same step draws the bonus token from r = P(.|c).

Every emitted token has the target's law given the ones before it: the children are i.i.d.
Q(.|c) and independent of how the round reached the node, which is what RRS needs ([M] §4), so
the scheme is lossless. All ones is Leviathan et al.'s Algorithm 1 (``correct``) exactly;
"kx1x...x1" is *not* ``multi_draft`` with k drafts (there a rejected prefix's equal siblings
stay alive; here only the accepted child's subtree does).

The exact law: the outcome at a node depends only on its context c and its number of children
m. Child j is accepted with token a after j - 1 rejections with mass
reach_{j-1}(c) min(Q(a|c), r_{j-1}(a|c)) (r_j and reach_j = prod_{l<j} rho_l as in
:mod:`.multi_draft`), all m are rejected with mass reach_m(c) and then the token is drawn from
r_m(c) (r_0 = P: the bonus at a leaf). :func:`tree_law` is a forward DP over the nodes in
breadth-first order carrying, per node, the (start, context) mass of reaching it: one (S, S)
product per node, O(N S^3); ``tests/unit/schemes/test_scheme_tree.py`` checks it against a
brute-force enumeration of all drawn trees and accept outcomes in exact rational arithmetic. The
same DP runs on any tree given as a parent array (:func:`tree_law`, :func:`play_tree`), which is how
Sequoia's trees (:mod:`.sequoia`) get an exact value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import ArrayLike

from specsim.exact import RoundLaw, check_gamma, check_pair
from specsim.resources import Footprint
from specsim.sampling import TableSampler
from specsim.schemes import survivors
from specsim.schemes.base import Knobs
from specsim.schemes.law import FloatArray, IntArray, LawSize, RoundSample, indexed_windows
from specsim.schemes.multi_draft import residuals, rrs
from specsim.verify import accept, rule_spec

__all__ = ["BUDGET", "KNOBS", "branches", "checked_shape", "draft_cells", "draft_tree",
           "drafted_through", "footprint", "law", "law_refusal", "parents_of", "play",
           "play_tree", "tree_cells", "tree_law", "window_cells", "window_law",
           "window_seconds", "window_tree_law"]

KNOBS: Final = ("branches",)
BUDGET: Final = 2**26  # cells of the DP (node masses, residuals): above every point's memory


def branches(knobs: Knobs, rule: str = "tree") -> tuple[int, ...]:
    """(b_0, ..., b_{D-1}) from ``knobs`` = {"branches": "b_0x...xb_{D-1}"} of ``rule`` (a rule
    drafting this tree: ``tree``, ``traversal``); one-line ValueError naming the knob otherwise
    (the registry's domain, :class:`specsim.verify.KnobSpec`)."""
    if not isinstance(knobs, Mapping) or set(knobs) != set(KNOBS):
        raise ValueError(f"{rule} knobs must be exactly {{'branches': 'b0xb1x...'}}, "
                         f"got {knobs!r}")
    spec = rule_spec(rule).knobs[0]
    return tuple(int(b) for b in spec.check(knobs["branches"], f"{rule} knob 'branches'")
                 .split("x"))


def parents_of(shape: tuple[int, ...]) -> IntArray:
    """The tree of ``shape`` as a parent array in breadth-first order (-1: the root)."""
    out: list[int] = []
    level = [-1]
    for b in shape:
        nxt = []
        for p in level:
            for _ in range(b):
                out.append(p)
                nxt.append(len(out) - 1)
        level = nxt
    return np.asarray(out, dtype=np.intp)


@dataclass(frozen=True)
class _Tree:
    """children[v, j]: node v's (j+1)-th child or -1 (row N: the root); n_children[v];
    depth[v] (the root's is 0); kmax the most children of any node."""

    children: IntArray
    n_children: IntArray
    depth: IntArray

    @property
    def nodes(self) -> int:
        return int(self.children.shape[0]) - 1

    @property
    def kmax(self) -> int:
        return int(self.n_children.max())


def _tree(parents: ArrayLike) -> _Tree:
    par = np.asarray(parents)
    n = par.size
    if par.ndim != 1 or n == 0 or not np.issubdtype(par.dtype, np.integer) or \
            (par < -1).any() or (par >= np.arange(n)).any():
        raise ValueError("parents must be a non-empty 1-D integer array with parents[i] in "
                         "[-1, i) (-1: the root; nodes in an order where parents come first)")
    par = np.where(par < 0, n, par).astype(np.intp)
    counts = np.bincount(par, minlength=n + 1)
    children = np.full((n + 1, max(int(counts.max()), 1)), -1, dtype=np.intp)
    fill = np.zeros(n + 1, dtype=np.intp)
    depth = np.zeros(n + 1, dtype=np.intp)
    for v in range(n):
        children[par[v], fill[par[v]]] = v
        fill[par[v]] += 1
        depth[v] = depth[par[v]] + 1 if par[v] < n else 1
    return _Tree(children, counts, depth)


def checked_shape(gamma: int, knobs: Knobs, rule: str = "tree") -> tuple[int, ...]:
    """:func:`branches` of ``rule``, whose depth must be ``gamma`` (ValueError otherwise)."""
    shape = branches(knobs, rule)
    if check_gamma(gamma) != len(shape):
        raise ValueError(f"{rule} knob 'branches'={knobs['branches']!r} has depth {len(shape)}, "
                         f"but gamma={gamma}: a tree runs at the gamma of its depth")
    return shape


def law(P: ArrayLike, Q: ArrayLike, gamma: int, knobs: Knobs,
        budget: int = BUDGET) -> RoundLaw:
    """Exact law of one round ([M] token tree, MSS) from every context (:func:`tree_law`)."""
    return tree_law(P, Q, parents_of(checked_shape(gamma, knobs)), budget)


def tree_law(P: ArrayLike, Q: ArrayLike, parents: ArrayLike, budget: int = BUDGET) -> RoundLaw:
    """Exact law of one round on the tree ``parents`` from every context: the forward DP over
    nodes of the module docstring. Refuses more than ``budget`` cells, naming the estimate."""
    P, Q = check_pair(P, Q)
    t = _tree(parents)
    size, n, k = P.shape[0], t.nodes, t.kmax
    why = law_refusal(size, n, k, budget)
    if why:
        raise ValueError(why)
    res, acc, reach = rrs(P, Q, k)  # r_j, j = 0..k; min(Q, r_j); P(j rejected)
    step = reach[:k, :, None] * acc  # step[j, c, a]: child j+1 accepted, token a
    halt = reach[:, :, None] * res  # halt[m, c, b]: all m rejected, then b drawn
    depth = int(t.depth.max())
    tokens, nxt = np.zeros((size, depth + 2)), np.zeros((size, size))
    mass: dict[int, FloatArray] = {n: np.eye(size)}
    order = [n, *range(n)]  # the root, then breadth-first (parents before children)
    for v in order:
        m_v = mass.pop(v)
        m = int(t.n_children[v])
        out = m_v * reach[m]
        tokens[:, t.depth[v] + 1] += out.sum(axis=1)
        nxt += out @ res[m]
        for j in range(m):
            mass[int(t.children[v, j])] = m_v @ step[j]
    # the law of the token emitted at a node with m children, from its context
    emit = np.cumsum(np.concatenate([np.zeros((1, size, size)), step]), axis=0) + halt
    root = int(t.n_children[n])
    pair = np.zeros((size, size, size))
    for j in range(root):
        pair += step[j][:, :, None] * emit[t.n_children[t.children[n, j]]][None, :, :]
    return RoundLaw(tokens=tokens, next_state=nxt, drafted=np.full(size, float(n)),
                    single=halt[root].copy(), pair=pair, context=np.arange(size))


def window_law(p: ArrayLike, q: ArrayLike, gamma: int, knobs: Knobs,
               at: ArrayLike | None = None) -> tuple[FloatArray, FloatArray]:
    """The round's law from n starts of position-indexed rows p, q (n, γ+1, V), or rows
    (R, V) met as ``at`` says (the ``window_law`` of :mod:`.base`; :func:`window_tree_law` of
    the shape's tree)."""
    return window_tree_law(p, q, parents_of(checked_shape(gamma, knobs)), at)


def window_tree_law(p: ArrayLike, q: ArrayLike, parents: ArrayLike,
                    at: ArrayLike | None = None) -> tuple[FloatArray, FloatArray]:
    """:func:`window_law` on any tree ``parents`` (as :func:`tree_law`), rows p, q
    (n, D+1, V) for its depth D (or rows (R, V) and ``at`` (n, D+1),
    :func:`.law.indexed_windows`): a node's children are i.i.d. q[i, d] and the next depth's
    rows do not depend on the token accepted, so a node at depth d with m children stops the
    round with reach_m and hands child j+1 the mass reach_j Σ_a min(q, r_j) (RRS,
    :func:`.multi_draft.rrs`, once per distinct row for the widest node's k children: a
    narrower depth reads its first entries): a DP over nodes with one number per start,
    O(R V k + n N). Drafted tokens through depth d: the tree's nodes in its first d levels."""
    t = _tree(parents)
    root, depth = t.nodes, int(t.depth.max())
    rows_p, rows_q, at = indexed_windows(p, q, depth, at)
    levels = t.depth[:root]  # each drafted node's depth, 1..D
    widths = [max(int(t.n_children[np.append(levels, 0) == d].max()), 1) for d in range(depth)]
    _, acc, reach = rrs(rows_p, rows_q, max(widths, default=1))
    accepted = acc.sum(axis=-1)
    steps = []  # per depth d: (reach (k+1, n), go (k, n)) of its widest node's k children
    for d, k in enumerate(widths):
        steps.append((reach[:k + 1, at[:, d]], reach[:k, at[:, d]] * accepted[:k, at[:, d]]))
    n = at.shape[0]
    tokens = np.zeros((n, depth + 2))
    mass: dict[int, FloatArray] = {root: np.ones(n)}
    for v in [root, *range(root)]:  # the root, then index order (parents before children)
        m_v, d, m = mass.pop(v), int(t.depth[v]), int(t.n_children[v])
        if d == depth:  # a leaf at depth D: every draft accepted, the bonus token
            tokens[:, d + 1] += m_v
            continue
        reach, go = steps[d]
        tokens[:, d + 1] += m_v * reach[m]
        for j in range(m):
            mass[int(t.children[v, j])] = m_v * go[j]
    by_depth = np.concatenate([[0.0], np.cumsum(np.bincount(levels, minlength=depth + 1)[1:])])
    return tokens, by_depth


def drafted_through(shape: tuple[int, ...]) -> FloatArray:
    """Tokens the tree of ``shape`` drafts through depth d = 0..D: its first d levels."""
    return np.concatenate([[0.0], np.cumsum(np.cumprod(shape))]).astype(np.float64)


def window_cells(n: int, vocab: int, gamma: int, knobs: Knobs) -> float:
    """Peak cells of :func:`window_law` on n starts: one depth's RRS on (n, V) rows (k + 1
    residuals, k accepted masses) and the law."""
    k = max(checked_shape(gamma, knobs))
    return (2.0 * k + 3.0) * n * vocab + n * (gamma + 2.0)


def window_seconds(n: int, vocab: int, gamma: int, knobs: Knobs,
                   rows: ArrayLike | None = None) -> float:
    """Estimated seconds of :func:`window_law` on n starts (an RRS row per start and depth)."""
    return 1e-3 + n * sum(2e-7 * vocab * b for b in checked_shape(gamma, knobs))


def play(P: ArrayLike, Q: ArrayLike, state: ArrayLike, gamma: int, knobs: Knobs,
         rng: np.random.Generator) -> RoundSample:
    """One round ([M] token tree, MSS) for n chains at once from contexts ``state`` (n,)."""
    return play_tree(P, Q, state, parents_of(checked_shape(gamma, knobs)), rng)


def play_tree(P: ArrayLike, Q: ArrayLike, state: ArrayLike, parents: ArrayLike,
              rng: np.random.Generator) -> RoundSample:
    """One round on the tree ``parents`` for n chains at once, vectorised over chains (loops
    over depths and child positions only). Uniforms per round: N for the drafts (one
    breadth-first level at a time), then per depth kmax tests (drawn whether or not a test
    happens) and one for the emitted token."""
    P, Q = check_pair(P, Q)
    t = _tree(parents)
    size, n_nodes, k = P.shape[0], t.nodes, t.kmax
    res = residuals(P, Q, k)
    draw_r = TableSampler.of(res.reshape((k + 1) * size, size))
    tok = draft_tree(Q, state, parents, rng)
    s = tok[:, n_nodes]
    n = s.size
    depth = int(t.depth.max())
    rows = np.arange(n)
    tokens = np.full((n, depth + 1), -1, dtype=np.intp)
    n_emitted = np.zeros(n, dtype=np.intp)
    node, cur, live = np.full(n, n_nodes, dtype=np.intp), s.copy(), np.ones(n, dtype=bool)
    for d in range(depth + 1):
        kids = t.children[node]  # (n, k): the current node's children, -1 padded
        taken, rejected = survivors.first_accepted(  # RRS on the children's tokens
            live, kids >= 0, tok[rows[:, None], np.maximum(kids, 0)],
            lambda u, y, j: accept(u, res[j, cur, y], Q[cur, y]), rng, labels=kids)
        stopped = live & (taken < 0)
        drawn = draw_r(rejected * size + cur, rng.random(n))
        out = np.where(stopped, drawn, tok[rows, np.maximum(taken, 0)])
        node = np.where(live & ~stopped, taken, node)
        survivors.emit_depth(tokens, n_emitted, cur, live, d, out, stopped)
    return RoundSample(tokens=tokens, n_emitted=n_emitted, next_state=cur,
                       drafted=np.full(n, n_nodes, dtype=np.intp))


def draft_tree(Q: FloatArray, state: ArrayLike, parents: ArrayLike,
               rng: np.random.Generator) -> IntArray:
    """The tokens of the tree ``parents`` drafted i.i.d. from contexts ``state`` (n,) (step 1
    of the module docstring): (n, N + 1), node v's token in column v, the context in column N.
    Uniforms: N per chain, one breadth-first level at a time (rng.random(n b) per level)."""
    t = _tree(parents)
    size, n_nodes = Q.shape[0], t.nodes
    s = survivors.checked_state(state, size)
    draw_q = TableSampler.of(Q)
    par = np.asarray(parents, dtype=np.intp)
    tok = np.empty((s.size, n_nodes + 1), dtype=np.intp)
    tok[:, n_nodes] = s  # the root's column holds the context
    for d in range(1, int(t.depth.max()) + 1):
        level = np.flatnonzero(t.depth[:n_nodes] == d)
        src = tok[:, np.where(par[level] < 0, n_nodes, par[level])]
        tok[:, level] = draw_q(src.ravel(), rng.random(src.size)).reshape(src.shape)
    return tok


def law_refusal(size: int, nodes: int, kmax: int, budget: int = BUDGET) -> str | None:
    """Why :func:`tree_law` refuses a tree of ``nodes`` nodes, at most ``kmax`` children
    a node, on S = ``size`` states (more than ``budget`` cells), or None; :func:`footprint`
    and the config's check of Sequoia's trees (:mod:`specsim.work`) ask the same."""
    cells = _law_cells(size, nodes, kmax)
    if cells <= budget:
        return None
    return (f"the tree's exact law needs ~{cells:.3g} cells ({nodes} nodes on {size} states), "
            f"more than budget={budget}")


def tree_cells(nodes: int, kmax: int) -> float:
    """Cells of :func:`_tree`'s tables on a tree of ``nodes`` nodes, at most ``kmax``
    children a node: its (N + 1, k) children table (a flat 4096-branch tree: 16.8 M cells)
    and three (N + 1,) columns."""
    return (nodes + 1.0) * (kmax + 3)


def draft_cells(chains: int, shape: tuple[int, ...]) -> float:
    """Peak cells of :func:`draft_tree` for ``chains`` chains on the tree of ``shape``: the
    (n, N + 1) tokens, ~6 (n, L) arrays while its widest level of L nodes is drawn (the
    parents' tokens, the uniforms, the guide-table bucket and its two factors, the draws and
    their cast; traced 6.1 n L at 32x64; 7 counted: with 6 a flat 4096-node tree's job
    peaked 1.04x under its estimate) and the tree's tables (:func:`tree_cells`)."""
    widths = np.cumprod(shape, dtype=np.float64)
    n_nodes = float(widths.sum())
    return float(chains) * (n_nodes + 1 + 7 * float(widths.max())) + tree_cells(int(n_nodes),
                                                                                max(shape))


def _law_cells(size: int, nodes: int, kmax: int) -> float:
    """Peak cells of :func:`tree_law`: the node masses alive at once (at most every node's),
    the k + 1 residuals and their step/halt/emit tables, the (S, S, S) pair law."""
    s2 = float(size) ** 2
    return (nodes + 2) * s2 + (5 * kmax + 6) * s2 + 3.0 * size**3


def footprint(size: int, support: int, gamma: int, knobs: Knobs | None,
              chains: int) -> LawSize:
    """What :func:`law` and :func:`play` cost on the tree of ``branches`` on S = ``size``
    contexts: the law's cells (:func:`_law_cells`) and N + 2 k (S, S) products (a tree
    beyond the memory a point job may declare is refused by :mod:`specsim.work` naming this
    estimate); a round holds the residuals' samplers, built by every call, and the N drafted
    tokens of every chain while they are drawn (:func:`draft_cells`)."""
    shape = branches(knobs or {})
    n_nodes = int(parents_of(shape).size)
    k = max(shape)
    what = f"tree exact law (branches {'x'.join(map(str, shape))}: {n_nodes} nodes on {size} " \
           f"states)"
    why = law_refusal(size, n_nodes, k)
    law_fp = None if why else Footprint(_law_cells(size, n_nodes, k) + tree_cells(n_nodes, k),
                                        2.0 * (n_nodes + 2 * k + 2) * float(size) ** 3,
                                        what=what)
    n = float(chains)
    samplers = (TableSampler.cells((k + 1) * size, size),
                TableSampler.work((k + 1) * size, size) + TableSampler.work(size, size))
    # play_tree's own tree tables beside draft_tree's (each builds them)
    play_fp = Footprint(2 * (k + 1) * float(size) ** 2 + samplers[0] + draft_cells(chains, shape)
                        + tree_cells(n_nodes, k) + 2 * n * (gamma + 1) + 14 * n,
                        samplers[1] + 10 * n * (n_nodes + (gamma + 1) * (6 * k + 10)),
                        what=f"simulation ({chains} chains at once)")
    return LawSize(size, law_fp, play_fp, why or "")
