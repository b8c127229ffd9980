"""Long-run laws of a finite Markov chain, reducible or not: its closed classes, the
stationary law of each, and the long-run average law of a chain from a given start.

A round-start chain need not be irreducible: at sampling temperature 0 (greedy decoding), with
a near-deterministic target, or with a draft equal to the target, the chain of round starts
breaks into several closed classes (cycles of argmax tokens, parities of tokens per round), and
its stationary law is not unique. The chain *started somewhere* still has one long-run average
law, the Cesàro limit lim_n (1/n) Σ_{r<n} μ K^r = Σ_C P_μ(absorbed in C) π_C (periodic classes
included): exactly what a simulation of chains from μ averages over rounds as they grow, so it
is what :func:`limit_law` returns, and :func:`stationary` is its special case of one closed
class (then the law is the same from every start).

The closed classes are read off the support of K (the strongly connected components with no
edge leaving them: a transition of probability exactly 0 never happens, one of 1e-300 does).
Each class's stationary law and the absorption of the start law are computed by state
reduction with the Grassmann-Taksar-Heyman rule (Grassmann, Taksar & Heyman 1985, Operations
Research 33(5)): every quantity is a sum of non-negative terms and a "1 - K[k, k]" is the sum
of the row's other entries, never a difference, so each component has small relative error
however weakly the states are coupled (O'Cinneide 1993, Numer. Math. 65) -- where a least-squares
solve of pi (K - I) = 0 loses every digit once a coupling nears the rounding error.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numpy.typing import ArrayLike

from specsim.exact.kernels import FloatArray, IntArray, check_table

__all__ = ["closed_classes", "limit_law", "stationary"]


def _reach(edges: npt.NDArray[np.bool_], source: int) -> npt.NDArray[np.bool_]:
    """The states reachable from ``source`` (itself included), breadth first."""
    seen = np.zeros(edges.shape[0], dtype=bool)
    seen[source] = True
    frontier = seen.copy()
    while frontier.any():
        frontier = edges[frontier].any(axis=0) & ~seen
        seen |= frontier
    return seen


def closed_classes(K: FloatArray) -> list[IntArray]:
    """The states of each closed class of K: the strongly connected components of its support
    that no transition leaves. A state every state reaches in one step (a positive column, as
    in any table without zeros) makes its class the only one, found without a graph search."""
    edges = K > 0
    hub = np.flatnonzero(edges.all(axis=0))
    if hub.size:
        return [np.flatnonzero(_reach(edges, int(hub[0])))]
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    _, labels = connected_components(csr_matrix(edges), directed=True, connection="strong")
    rows, cols = np.nonzero(edges)
    leaving = np.unique(labels[rows[labels[rows] != labels[cols]]])
    closed = np.setdiff1d(np.unique(labels), leaving)
    return [np.flatnonzero(labels == c) for c in closed]


def _gth(K: FloatArray) -> FloatArray:
    """Stationary law of an irreducible stochastic matrix by GTH state reduction."""
    A = np.array(K, dtype=np.float64, copy=True)
    n = A.shape[0]
    for k in range(n - 1, 0, -1):
        s = A[k, :k].sum()  # = 1 - (censored) A[k, k], as a sum
        if not s > 0:
            raise ValueError("GTH reduction met a state that leaves nowhere: the class is "
                             "not irreducible")
        A[:k, k] /= s
        A[:k, :k] += np.outer(A[:k, k], A[k, :k])
    pi = np.zeros(n)
    pi[0] = 1.0
    for j in range(1, n):
        pi[j] = pi[:j] @ A[:j, j]
    return np.asarray(pi / pi.sum(), dtype=np.float64)


def _absorbed(K: FloatArray, mu: FloatArray, transient: IntArray) -> FloatArray:
    """The start law ``mu`` moved from the transient states to where the chain leaves them
    for good (state reduction: censoring out one transient state at a time)."""
    A = np.array(K, dtype=np.float64, copy=True)
    w = np.array(mu, dtype=np.float64, copy=True)
    alive = np.ones(A.shape[0], dtype=bool)
    for k in transient:
        alive[k] = False
        s = A[k, alive].sum()  # = 1 - (censored) A[k, k], as a sum
        if not s > 0:
            raise ValueError("a transient state leaves nowhere in floating point (couplings "
                             "below the smallest double)")
        out = np.where(alive, A[k], 0.0) / s
        rows = np.flatnonzero(alive & (A[:, k] > 0))  # recurrent rows never reach k
        A[rows] += np.outer(A[rows, k], out)
        A[:, k] = 0.0
        w += w[k] * out
        w[k] = 0.0
    return w


def limit_law(K: ArrayLike, start: ArrayLike | int) -> FloatArray:
    """The long-run average law lim_n (1/n) Σ_{r<n} μ K^r of the chain from ``start`` (a state
    or a law μ): the stationary law of each closed class weighted by the probability that the
    chain from μ ends in it. Defined for every finite chain (reducible, periodic)."""
    Ka = check_table(K, "K")
    n = Ka.shape[0]
    if np.ndim(start) == 0:
        mu = np.zeros(n)
        mu[int(start)] = 1.0  # type: ignore[arg-type]
    else:
        mu = np.asarray(start, dtype=np.float64)
        if mu.shape != (n,) or np.any(mu < 0) or not np.isclose(mu.sum(), 1.0, atol=1e-9):
            raise ValueError(f"start must be a state or a law over {n} states")
    classes = closed_classes(Ka)
    recurrent = np.zeros(n, dtype=bool)
    for c in classes:
        recurrent[c] = True
    w = _absorbed(Ka, mu, np.flatnonzero(~recurrent))
    out = np.zeros(n)
    for c in classes:
        mass = w[c].sum()
        if mass > 0:
            out[c] = mass * _gth(Ka[np.ix_(c, c)])
    return np.asarray(out / out.sum(), dtype=np.float64)


def stationary(K: ArrayLike) -> FloatArray:
    """The stationary law pi K = pi, sum pi = 1, of a chain with one closed class (0 on its
    transient states); ValueError naming the closed classes where it is not unique."""
    Ka = check_table(K, "K")
    classes = closed_classes(Ka)
    if len(classes) != 1:
        shown = "; ".join(str(c.tolist()) for c in classes[:4])
        more = f"; ... ({len(classes)} in all)" if len(classes) > 4 else ""
        raise ValueError(f"stationary law not unique: the chain has {len(classes)} closed "
                         f"classes of states ({shown}{more})")
    out = np.zeros(Ka.shape[0])
    out[classes[0]] = _gth(Ka[np.ix_(classes[0], classes[0])])
    return out
