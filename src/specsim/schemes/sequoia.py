"""Sequoia's optimal draft tree for a node budget, by dynamic programming.

Chen et al. 2024, "Sequoia: Scalable, Robust, and Hardware-aware Speculative Decoding"
(arXiv 2402.12374), §3.1, cited as [S]. Under [S]'s *positional acceptance assumption* the
verifier (SpecInfer's recursive rejection sampling over a node's children, :mod:`.tree`)
accepts the child at position i of an accepted node with a probability that depends on i only.
Here ``accept[i]`` is the *conditional* probability that the (i+1)-th child is accepted given
that the first i were rejected; [S]'s p_i, the probability that the child at position i is the
accepted one, is ``accept[i] * prod_{l<i} (1 - accept[l])``. A tree T then emits, per target
call, F(T) = sum over its nodes v (the root included: the token drawn where the accepted path
ends) of prod_{edges of the path root -> v} p_{position}, its expected tokens per call.

:func:`best_tree` maximises F over trees of at most ``budget`` drafted nodes (the root, the
current context, is not drafted), [S]'s DP: c(n) = 1 + g(n - 1, 0) is the best subtree of n
nodes with its root; g(m, i) the best way to hang m nodes under children at positions i, i+1,
... (g(m, i) = max(0, max_{s=1..m} p_i c(s) + g(m - s, i + 1))). O(budget^2 K), exact.
``tests/unit/schemes/test_scheme_sequoia.py`` checks it against every ordered tree of small budgets.

:func:`positional_acceptance` computes the vector exactly from a Markov pair (P, Q) for
i.i.d. children: at context c, after j rejections RRS holds r_j(c)
(:func:`specsim.schemes.multi_draft.residuals`) and accepts the next child with probability
1 - rho_j(c), rho_j(c) = sum_x max(Q(x|c) - r_j(x|c), 0); averaged over the contexts the
generation passes through (the stationary law of P by default, any law ``weights``, e.g. the
i.i.d. stub's per-position contexts) given that j rejections happened there:
accept[j] = E_w[reach_j (1 - rho_j)] / E_w[reach_j], reach_j = prod_{l<j} rho_l. The tree's
exact value on the tables (:func:`specsim.schemes.tree.tree_law`) differs from F because
acceptance does depend on the context; the ``schemes_trees`` table shows both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np
from numpy.typing import ArrayLike

from specsim.exact import check_pair, stationary
from specsim.precision import at_least, first_max
from specsim.schemes.law import FloatArray, IntArray
from specsim.verify import residual

__all__ = ["best_tree", "best_trees", "level_widths", "positional_acceptance", "rejection_profile",
           "tree_value"]


def _marginal(accept: ArrayLike) -> FloatArray:
    a = np.asarray(accept, dtype=np.float64)
    if a.ndim != 1 or a.size == 0 or not np.isfinite(a).all() or (a < 0).any() or (a > 1).any():
        raise ValueError(f"accept must be a non-empty 1-D vector of probabilities in [0, 1], "
                         f"got {accept!r}")
    return cast(FloatArray, a * np.concatenate([[1.0], np.cumprod(1.0 - a)[:-1]]))


def tree_value(accept: ArrayLike, parents: ArrayLike) -> float:
    """F(T) of [S] for the tree ``parents`` (parents[i] in [-1, i), -1 the root; the j-th
    child of a node is the j-th to name it): expected tokens per call under the positional
    model (a child beyond len(accept) is never accepted)."""
    p = _marginal(accept)
    par = np.asarray(parents, dtype=np.intp)
    value, seen = np.ones(par.size), dict[int, int]()  # f(v) per node; children so far per parent
    total = 1.0
    for v, u in enumerate(par.tolist()):
        pos = seen.get(u, 0)
        seen[u] = pos + 1
        f = (1.0 if u < 0 else value[u]) * (p[pos] if pos < p.size else 0.0)
        value[v] = f
        total += f
    return float(total)


def level_widths(parents: ArrayLike) -> tuple[int, ...]:
    """Nodes per depth (1, 2, ...) of the tree ``parents`` (parents[i] in [-1, i), -1 the
    root): what a batched drafter drafts side by side at each depth; its length is the depth."""
    par = np.asarray(parents, dtype=np.intp)
    depth = np.zeros(par.size, dtype=np.intp)
    for v, u in enumerate(par.tolist()):
        depth[v] = 1 if u < 0 else depth[u] + 1
    return tuple(int(w) for w in np.bincount(depth, minlength=1)[1:])


def best_tree(accept: ArrayLike, budget: int) -> tuple[float, IntArray]:
    """Sequoia's optimal tree ([S] §3.1 DP) for ``budget`` drafted nodes: (its expected tokens
    per call F, its parent array in depth-first order, children in position order).

    Ties go to the fewer children at the lower position (the first maximum), so the answer is
    deterministic; values within :data:`specsim.precision.EXACT_RTOL` count as tied, so the
    last bits of ``accept`` (a long sum over a trace's positions) cannot pick the tree."""
    return best_trees(accept, [budget])[0]


def best_trees(accept: ArrayLike, budgets: Sequence[int]) -> list[tuple[float, IntArray]]:
    """:func:`best_tree` for each of ``budgets``, by one DP to the largest (a budget's table
    is the first rows of a larger one's)."""
    for budget in budgets:
        if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget < 1:
            raise ValueError(f"budget must be an integer >= 1 (drafted tree nodes), got "
                             f"{budget!r}")
    p = _marginal(accept)
    n, k = max(int(b) for b in budgets) + 1, p.size
    c = np.zeros(n + 1)  # c[s]: best subtree of s nodes, its root included
    g = np.zeros((n + 1, k + 1))  # g[m, i]: m nodes under children at positions >= i
    pick = np.zeros((n + 1, k + 1), dtype=np.intp)  # the subtree size at position i (0: none)
    for m in range(1, n + 1):
        c[m] = 1.0 + g[m - 1, 0]
        for i in range(k - 1, -1, -1):
            sizes = np.arange(1, m + 1)
            vals = p[i] * c[sizes] + g[m - sizes, i + 1]
            best = first_max(vals)
            if not at_least(g[m, i], vals[best]) and vals[best] > 0.0:  # better beyond rounding
                g[m, i], pick[m, i] = vals[best], sizes[best]
    def build(parents: list[int], node: int, m: int) -> list[int]:  # hang m nodes under node
        for i in range(k):
            s = int(pick[m, i])
            if s == 0:
                break
            parents.append(node)
            build(parents, len(parents) - 1, s - 1)
            m -= s
        return parents

    return [(float(c[int(b) + 1]), np.asarray(build([], -1, int(b)), dtype=np.intp))
            for b in budgets]


def positional_acceptance(P: ArrayLike, Q: ArrayLike, k: int,
                          weights: ArrayLike | None = None) -> FloatArray:
    """accept[0..k-1] of the module docstring, exactly, from a Markov pair and a law of contexts
    (default: the stationary law of P)."""
    Pa, Qa = check_pair(P, Q)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    w = stationary(Pa) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (Pa.shape[0],) or (w < 0).any() or abs(w.sum() - 1.0) > 1e-9:
        raise ValueError(f"weights must be a law over the {Pa.shape[0]} contexts")
    rho, reach = rejection_profile(Pa, Qa, int(k))
    num, den = (reach * (1.0 - rho)) @ w, reach @ w
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)


def rejection_profile(P: FloatArray, Q: FloatArray, k: int) -> tuple[FloatArray, FloatArray]:
    """Per row (context) of P, Q (R, V): rho_j, the probability that RRS rejects its (j+1)-th
    i.i.d. child, and reach_j = prod_{l<j} rho_l, j < k (both (k, R)); one residual held at a
    time (R V memory, not k R V: a trace has R ~ 3e4 rows)."""
    rho = np.empty((k, P.shape[0]))
    r = P
    for j in range(k):
        rho[j] = np.maximum(Q - r, 0.0).sum(axis=-1)
        if j + 1 < k:
            r = residual(r, Q)
    reach = np.concatenate([np.ones((1, P.shape[0])), np.cumprod(rho, axis=0)[:-1]])
    return rho, reach
